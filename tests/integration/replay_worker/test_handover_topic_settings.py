"""The handover topic's settings on the broker: created with the protocol's, refused with others, never created by
a look (issue 27, review M3)."""

from __future__ import annotations

import pytest

from replay_worker.protocol.handover_topic_settings import REQUIRED
from replay_worker.topic.handover_topic import HandoverTopic, HandoverTopicError


def topic_config(kafka, name: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, name)
    admin = kafka.admin()  # held until the answer: a client collected meanwhile fails the future
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {key: str(entry.value) for key, entry in entries.items()}


def test_a_look_at_a_missing_topic_does_not_create_it_and_ensure_creates_it_with_the_protocols_settings(
    kafka, topic_name
):
    # A guard or the operator looking at a namespace's topic before it exists made the broker create it with its
    # defaults (cleanup.policy=delete), which every later ensure refused: the namespace could never replay.
    name = f"{topic_name}-handover"
    topic = HandoverTopic(kafka.bootstrap, name, timeout=30)
    try:
        assert topic.readable_end() is None
        assert not topic.read().replays
        assert name not in kafka.admin().list_topics(timeout=30).topics
        topic.ensure(create=True)
        config = topic_config(kafka, name)
        assert {key: config[key] for key in REQUIRED} == REQUIRED
        topic.ensure(create=True)  # and accepts it
    finally:
        topic.close()


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"cleanup.policy": "delete"}, "cleanup.policy=delete"),
        ({"cleanup.policy": "compact,delete", "retention.ms": "3600000"}, "retention.ms=3600000"),
    ],
)
def test_a_topic_with_settings_that_lose_state_is_refused_naming_the_setting(kafka, topic_name, config, named):
    name = kafka.create_topic(f"{topic_name}-handover", 1, config)
    topic = HandoverTopic(kafka.bootstrap, name, timeout=30)
    try:
        with pytest.raises(HandoverTopicError, match=named):
            topic.ensure(create=True)
    finally:
        topic.close()
