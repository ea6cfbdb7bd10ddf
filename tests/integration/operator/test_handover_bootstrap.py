"""The operator's bootstrap of a replay (the handover topics' door, `HandoverReaders.bootstrap`) on the real broker:
the start recorded once, before any replica, which then only reads it; a bootstrap that cannot be done is left to
the replicas with the reason, never raised into the reconcile."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from replay_worker.replay.bootstrap import bootstrap_replay
from replay_worker.contract import StartSpec, WorkerSettings
from replay_worker.topic.handover_topic import HandoverTopic
from reprise_operator.doors.handover_state import HandoverReaders
from tests.fixtures.kube import wait_for
from tests.integration.replay_worker.harness import committed

pytestmark = pytest.mark.integration

STARTS = {0: 2, 1: 0, 2: 5}


def test_the_operator_records_the_start_once_and_a_replica_then_only_reads_it(kafka, topic_name, caplog) -> None:
    kafka.create_topic(topic_name, 3)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for n in range(30):
        producer.produce(topic_name, value=b"x", partition=n % 3)
    producer.flush(30)
    handover_topic = f"{topic_name}-handover"
    settings = WorkerSettings(
        bootstrap_servers=kafka.bootstrap,
        replay_id=f"test/{topic_name}",
        topics=(topic_name,),
        replay_group=f"{topic_name}-replay",
        handler="json:dumps",
        handover_topic=handover_topic,
        start=StartSpec("offsets", offsets={topic_name: STARTS}),
    )
    readers = HandoverReaders()
    try:
        readers.ensure(kafka.bootstrap, {}, handover_topic)
        with caplog.at_level(logging.INFO, logger="replay_worker.bootstrap"):
            assert readers.bootstrap(settings, {}) is None
        # (librdkafka's own lines come through logging too, under replay_worker.librdkafka: not counted here.)
        assert [r.getMessage() for r in caplog.records if r.name == "replay_worker.bootstrap"] == [
            "replay bootstrapped"
        ]
        expected = {(topic_name, p): o for p, o in STARTS.items()}
        handover = HandoverTopic(kafka.bootstrap, handover_topic)
        try:
            # Readable once the transaction's markers are written, which follows its commit by a moment.
            wait_for(
                lambda: handover.read_replay(settings.replay_id).start_offsets() == expected,
                30,
                "the start records in the handover topic",
            )
        finally:
            handover.close()
        assert {
            (topic_name, p): o for p, (o, _) in committed(kafka.bootstrap, settings.replay_group, topic_name, 3).items()
        } == expected

        # A replica finds it recorded: the same start, and no bootstrap of its own (which would first fence
        # every other bootstrapper with the replay's transactional id).
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="replay_worker.bootstrap"):
            state = bootstrap_replay(settings.with_changes(member_name="replica-0"), {})
            # The operator again (a restart before it wrote Running): a read after the fence, nothing written.
            assert readers.bootstrap(settings, {}) is None
        assert state.start_offsets() == expected
        assert [r.getMessage() for r in caplog.records if r.name == "replay_worker.bootstrap"] == []
    finally:
        readers.close()


def test_a_bootstrap_the_operator_cannot_do_is_left_to_the_replicas_with_its_reason(kafka, topic_name) -> None:
    handover_topic = f"{topic_name}-handover"
    settings = WorkerSettings(
        bootstrap_servers=kafka.bootstrap,
        replay_id=f"test/{topic_name}",
        topics=(topic_name,),  # never created
        replay_group=f"{topic_name}-replay",
        handler="json:dumps",
        handover_topic=handover_topic,
        start=StartSpec("earliest"),
    )
    readers = HandoverReaders()
    try:
        readers.ensure(kafka.bootstrap, {}, handover_topic)
        reason = readers.bootstrap(settings, {})
        assert reason is not None and f"source topic {topic_name}" in reason
        handover = HandoverTopic(kafka.bootstrap, handover_topic)
        try:
            assert not handover.read_replay(settings.replay_id).bootstrapped
        finally:
            handover.close()
    finally:
        readers.close()
