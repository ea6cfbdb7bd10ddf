"""The standby Deployment's service container: `consumer.container` names it, and it alone gets the
resources, the worker and the handler, whatever its place in the pod template (issue 14, the two defects)."""

from __future__ import annotations

import pytest

from replay_worker.settings import WorkerSettings
from replay_worker.protocol.start_position import StartSpec
from reprise_operator.api import KafkaConnection
from reprise_operator.api.common import Consumer
from reprise_operator.core.lifecycle import Failure, Resource, Waiting
from reprise_operator.core.standby import delivery_from_env, standby_deployment, template_env, user_env

TEMPLATE = {
    "metadata": {"labels": {"app": "accounts"}},
    "spec": {
        "containers": [
            {
                "name": "proxy",
                "image": "envoyproxy/envoy:v1.31",
                "env": [{"name": "REPRISE_HANDLER", "value": "proxy:wrong"}],
            },
            {
                "name": "app",
                "image": "accounts:1",
                "env": [{"name": "REPRISE_HANDLER", "value": "accounts.replay:handle"}],
            },
        ]
    },
}
RESOURCES = {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}


def resource() -> Resource:
    body = {"metadata": {"name": "fix", "namespace": "accounts", "uid": "1a2b3c4d-0000-4000-8000-000000000000"}}
    return Resource("Reconsume", "reconsumes", body, {}, rt=None)  # type: ignore[arg-type]


def settings() -> WorkerSettings:
    return WorkerSettings(
        bootstrap_servers="kafka:9092",
        replay_id="accounts/fix/1a2b3c4d",
        topics=("users",),
        role="replay",
        mode="Parallel",
        replay_group="g",
        live_group="accounts",
        start=StartSpec("offsets", offsets={"users": {0: 0}}),
        handler="accounts.replay:handle",
    )


def test_the_named_service_container_gets_the_resources_and_the_worker_when_it_is_second():
    consumer = Consumer.model_validate({"template": TEMPLATE, "container": "app", "resources": RESOURCES})
    manifest = standby_deployment(
        resource(),
        name="fix-replay",
        component="replay-consumer",
        template=TEMPLATE,
        consumer=consumer,
        settings=settings(),
        kafka=KafkaConnection(bootstrapServers="kafka:9092"),
    )
    proxy, app = manifest["spec"]["template"]["spec"]["containers"]
    assert app["resources"] == RESOURCES and "resources" not in proxy
    assert app["command"] == ["python", "-m", "replay_worker"] and "command" not in proxy


def test_the_handler_is_read_from_the_named_service_container():
    consumer = Consumer.model_validate({"template": TEMPLATE, "container": "app"})
    delivery = delivery_from_env(template_env(TEMPLATE, consumer.container), user_env(consumer))
    assert delivery == {"REPRISE_HANDLER": "accounts.replay:handle"}
    assert template_env(TEMPLATE)[0]["value"] == "proxy:wrong"  # no name: the first container, as documented


def test_a_container_name_the_template_lacks_waits_with_the_field_named():
    with pytest.raises(Waiting) as waiting:
        template_env(TEMPLATE, "service")
    assert waiting.value.reason == "ContainerNotFound"
    assert "spec.consumer.container 'service' is not in the pod template (it has: proxy, app)" in waiting.value.message


def test_pod_labels_land_on_the_replay_pods_and_reprises_selector_labels_stay():
    consumer = Consumer.model_validate(
        {
            "template": TEMPLATE,
            "container": "app",
            "podLabels": {"team": "accounts", "policy.example.com/egress": "kafka"},
        }
    )
    manifest = standby_deployment(
        resource(),
        name="fix-replay",
        component="replay-consumer",
        template=TEMPLATE,
        consumer=consumer,
        settings=settings(),
        kafka=KafkaConnection(bootstrap_servers="kafka:9092"),
    )
    labels = manifest["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "accounts" and labels["policy.example.com/egress"] == "kafka"
    assert "app" not in labels, "the live pods' labels are still not copied"
    selector = manifest["spec"]["selector"]["matchLabels"]
    assert selector == {k: labels[k] for k in selector}, "the pods still match the Deployment's selector"
    assert "team" not in manifest["metadata"]["labels"], "podLabels are the pods', not the Deployment's"


@pytest.mark.parametrize(
    "key", ["reprise.io/replay", "reprise.io/anything", "app.kubernetes.io/component", "app.kubernetes.io/managed-by"]
)
def test_pod_labels_cannot_set_the_labels_reprise_selects_its_pods_by(key: str):
    with pytest.raises(ValueError, match="consumer.podLabels: the keys Reprise selects its replay pods by"):
        Consumer.model_validate({"template": TEMPLATE, "podLabels": {key: "x"}})


@pytest.mark.parametrize("key", ["-team", "a/b/c", "Example.com/x", "x" * 64])
def test_pod_label_keys_must_be_label_keys(key: str):
    with pytest.raises(ValueError, match="consumer.podLabels: every key must be a Kubernetes label key"):
        Consumer.model_validate({"template": TEMPLATE, "podLabels": {key: "x"}})


def test_reprise_labels_win_even_when_a_pod_label_names_one():
    from reprise_operator.rules.workloads import Owner, replay_deployment_manifest

    manifest = replay_deployment_manifest(
        owner=Owner("reprise.io/v1alpha1", "Reconsume", "fix", "uid"),
        name="fix-replay",
        namespace="accounts",
        labels={"reprise.io/replay": "fix", "app.kubernetes.io/component": "replay-consumer"},
        pod_template=TEMPLATE,
        replicas=1,
        worker_env={},
        pod_labels={"reprise.io/replay": "other", "team": "a"},
    )
    assert manifest["spec"]["template"]["metadata"]["labels"]["reprise.io/replay"] == "fix"


def _service_deployment(worker: WorkerSettings) -> dict:
    consumer = Consumer.model_validate({"template": TEMPLATE, "container": "app", "entrypoint": "Service"})
    return standby_deployment(
        resource(),
        name="fix-replay",
        component="replay-consumer",
        template=TEMPLATE,
        consumer=consumer,
        settings=worker,
        kafka=KafkaConnection(bootstrapServers="kafka:9092"),
    )


def test_a_service_port_is_never_asked_for_a_setting_it_does_not_support():
    # The Java and Go roles stop at the live group's offsets: a follow asked of them would be dropped silently.
    with pytest.raises(Failure) as refused:
        _service_deployment(settings().with_changes(follow=True))
    assert refused.value.reason == "UnsupportedSetting"
    assert refused.value.message.startswith("REPRISE_FOLLOW: the replay role of entrypoint Service")


def test_a_service_port_gets_what_it_supports():
    manifest = _service_deployment(settings())
    env = {e["name"]: e.get("value") for e in manifest["spec"]["template"]["spec"]["containers"][1]["env"]}
    assert env["REPRISE_MODE"] == "Parallel" and "REPRISE_FOLLOW" not in env and "REPRISE_HANDLER" not in env


def test_the_consumer_model_refuses_an_unsupported_setting_for_a_service():
    with pytest.raises(ValueError, match="does not support .*REPRISE_ROLE=backfill"):
        Consumer.model_validate(
            {"template": TEMPLATE, "entrypoint": "Service", "env": [{"name": "REPRISE_ROLE", "value": "Backfill"}]}
        )
    Consumer.model_validate(
        {"template": TEMPLATE, "entrypoint": "Service", "env": [{"name": "REPRISE_FOLLOW", "value": "off"}]}
    )
