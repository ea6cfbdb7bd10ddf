"""Which handover topic settings keep handover state, and the reason given for those that do not."""

from __future__ import annotations

import pytest

from replay_worker.protocol.handover_topic_settings import REQUIRED, refusal


def test_the_settings_reprise_creates_topics_with_are_accepted():
    assert refusal("reprise.handover.team-b", REQUIRED) is None
    assert refusal("t", {"cleanup.policy": "compact"}) is None  # a topic of the one-per-cluster form


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"cleanup.policy": "delete"}, "cleanup.policy=delete"),
        ({}, "cleanup.policy=delete"),  # Kafka's default policy
        ({"cleanup.policy": "compact,delete", "retention.ms": "3600000"}, "retention.ms=3600000"),
        ({"cleanup.policy": "compact,delete"}, "retention.ms=604800000"),  # Kafka's default retention
        ({"cleanup.policy": "compact", "max.message.bytes": "1000"}, "max.message.bytes=1000"),
    ],
)
def test_a_topic_that_would_lose_or_refuse_handover_state_is_refused_naming_the_setting(config, named):
    reason = refusal("reprise.handover.team-b", config)
    assert reason is not None and named in reason and "reprise.handover.team-b" in reason
