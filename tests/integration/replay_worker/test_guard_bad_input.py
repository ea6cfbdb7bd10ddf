"""The guard on bad input, on the real broker (HANDOVER.md section 6, "Bad input"): it skips nothing it cannot
prove the replay covers, and it says why in a `guard` record (what the operator reads) and one log line."""

from __future__ import annotations

import json
import logging
import time

from confluent_kafka import Consumer, TopicPartition

from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.guard import GuardedConsumer
from replay_worker.topic.handover_topic import HandoverTopic
from replay_worker.protocol.wire import HandoverInfo, ReplayInfo, StartInfo

from .harness import committed, produce, wait_for

RECORDS = 20


def _even_odd(n: int) -> bytes:
    return json.dumps({"n": n, "kind": "even" if n % 2 == 0 else "odd"}).encode()


def _guarded_run(bootstrap: str, group: str, topic: str, handover_topic: str, until) -> set[int]:
    """Run a guarded consumer that commits after every batch until `until(handed offsets)`; the offsets handed."""
    consumer = GuardedConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        },
        handover_topic=handover_topic,
        member="live-test",
        progress_interval=0.2,
    )
    handed: list[int] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not until(handed):
            batch = [m for m in consumer.consume(100, 0.3) if m.error() is None]
            if batch:
                handed += [m.offset() for m in batch]
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert len(handed) == len(set(handed)), f"handed twice: {handed}"
    return set(handed)


def test_a_filter_the_guard_cannot_evaluate_hands_every_record_and_says_why(
    kafka, topic_name, handover_topic, caplog
) -> None:
    kafka.create_topic(topic_name, 1)
    produce(kafka.bootstrap, topic_name, 1, RECORDS, _even_odd)
    group, rid = f"{topic_name}-live", f"test/{topic_name}"
    topic = HandoverTopic(kafka.bootstrap, handover_topic, {})
    try:
        topic.ensure(create=True)
        # A newer Reprise's filter operator: this guard cannot tell which records the replay covers.
        topic.publish(
            ReplayInfo(
                rid,
                "Handover",
                f"{topic_name}-replay",
                group,
                (topic_name,),
                {"json": [{"path": "kind", "regex": "ev.*"}]},
            ),
            StartInfo(rid, topic_name, 0, 0),
        )
        with caplog.at_level(logging.WARNING, logger="replay_worker.guard"):
            handed = _guarded_run(
                kafka.bootstrap,
                group,
                topic_name,
                handover_topic,
                lambda h: len(h) >= RECORDS and "cannot follow" in caplog.text,
            )
        assert handed == set(range(RECORDS))  # nothing skipped
        [line] = [r for r in caplog.records if "cannot follow the replay" in r.getMessage()]
        assert (line.topic, line.partition, line.problem) == (topic_name, 0, "unevaluable-filter:bad-operator")

        def problem_published() -> bool:
            part = topic.read_replay(rid).partitions.get((topic_name, 0))
            return part is not None and part.guard is not None and part.guard.problem is not None

        wait_for(problem_published, 30, "the guard record with the problem")
        guard = topic.read_replay(rid).partitions[(topic_name, 0)].guard
        assert guard is not None and guard.problem == "unevaluable-filter:bad-operator" and guard.first_skipped is None
    finally:
        topic.close()


def test_a_commit_mark_of_a_newer_version_makes_the_guard_re_read_from_h(kafka, topic_name, handover_topic) -> None:
    """A newer guard committed 10 with a mark this guard cannot read: it may have skipped the covered (even)
    records in [S, 10). The replay covers only [S, H) = [2, 6), so the even records 6 and 8 must be processed
    here: the guard assumes F = S and, H being known, re-reads [6, 10) (odd ones there were processed)."""
    kafka.create_topic(topic_name, 1)
    produce(kafka.bootstrap, topic_name, 1, RECORDS, _even_odd)
    group, rid = f"{topic_name}-live", f"test/{topic_name}"
    newer = json.dumps({"reprise": 2, "replay": rid, "skipped": [[2, 10]]})
    writer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        writer.commit(offsets=[TopicPartition(topic_name, 0, 10, metadata=newer)], asynchronous=False)
    finally:
        writer.close()
    topic = HandoverTopic(kafka.bootstrap, handover_topic, {})
    try:
        topic.ensure(create=True)
        topic.publish(
            ReplayInfo(
                rid,
                "Handover",
                f"{topic_name}-replay",
                group,
                (topic_name,),
                {"json": [{"path": "kind", "equals": "even"}]},
            ),
            StartInfo(rid, topic_name, 0, 2),
            HandoverInfo(rid, topic_name, 0, 6, "caught-up"),
        )

        def acknowledged() -> bool:
            part = topic.read_replay(rid).partitions.get((topic_name, 0))
            return part is not None and part.acknowledged

        handed = _guarded_run(
            kafka.bootstrap, group, topic_name, handover_topic, lambda h: len(h) >= 12 and acknowledged()
        )
        assert handed == {6, 8} | set(range(10, RECORDS))
        offset, metadata = committed(kafka.bootstrap, group, topic_name, 1)[0]
        assert offset == RECORDS and CommitMark.decode(metadata) is None
        guard = topic.read_replay(rid).partitions[(topic_name, 0)].guard
        assert guard is not None and guard.problem == "unusable-commit-mark:newer-version"
    finally:
        topic.close()
