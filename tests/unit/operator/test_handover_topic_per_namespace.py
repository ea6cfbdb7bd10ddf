"""The handover topic of each namespace (issue 27, review C2.1): the operator's template and the live Deployment's
`REPRISE_HANDOVER_TOPIC`, which must name the same topic."""

from __future__ import annotations

import pytest

from reprise_operator.core.lifecycle import Failure
from reprise_operator.core.standby import refuse_other_handover_topic
from reprise_operator.shared.settings import OperatorSettings, SettingsError

NAMESPACE_ENV = {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}


def test_each_namespace_has_its_own_topic_by_default():
    settings = OperatorSettings.from_env({})
    assert settings.handover_topic_for("team-a") == "reprise.handover.team-a"
    assert settings.handover_topic_for("team-b") == "reprise.handover.team-b"


def test_a_template_without_the_namespace_is_one_topic_for_the_cluster():
    settings = OperatorSettings.from_env({"REPRISE_HANDOVER_TOPIC": "reprise.handover"})
    assert settings.handover_topic_for("team-a") == settings.handover_topic_for("team-b") == "reprise.handover"


@pytest.mark.parametrize(
    "template", ["reprise handover", "reprise.{name}", "x" * 250, "reprise.{namespace}" + "x" * 180]
)
def test_a_template_no_namespace_can_make_a_topic_name_of_is_refused_naming_the_setting(template):
    with pytest.raises(SettingsError, match="REPRISE_HANDOVER_TOPIC"):
        OperatorSettings.from_env({"REPRISE_HANDOVER_TOPIC": template})


@pytest.mark.parametrize(
    "env",
    [
        [],  # the guard's default: nothing to compare
        [{"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover.team-b"}],
        [NAMESPACE_ENV, {"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover.$(POD_NAMESPACE)"}],
        [{"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover.$(FROM_A_CONFIGMAP)"}],  # the pod decides
    ],
)
def test_a_live_container_naming_this_namespaces_topic_or_none_is_accepted(env):
    refuse_other_handover_topic({"name": "app", "env": env}, "reprise.handover.team-b", "team-b")


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ([{"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover"}], "reprise.handover,"),
        (
            [NAMESPACE_ENV, {"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover-$(POD_NAMESPACE)"}],
            "reprise.handover-team-b,",
        ),
    ],
)
def test_a_live_container_naming_another_topic_is_refused_naming_both(env, named):
    with pytest.raises(Failure) as refused:
        refuse_other_handover_topic({"name": "app", "env": env}, "reprise.handover.team-b", "team-b")
    assert refused.value.reason == "HandoverTopicMismatch"
    assert f"REPRISE_HANDOVER_TOPIC={named}" in str(refused.value)
    assert "handover topic is reprise.handover.team-b" in str(refused.value)
