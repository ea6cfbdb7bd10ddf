"""LakeReplay end to end: the operator as a process, the real API server with the Spark operator's own
SparkApplication CRD, Spark in `local[2]` through the STAND-IN controller (tests/fixtures/spark.py), drain and
continuation pods really running the worker (through the node agent), and the real broker. A generated lake
of 30k events over 6 days under three schema versions; each test replays a sub-range.

The 2-million-row replay and the kill-and-retry of the Spark job are proven at the job's level:
tests/soak/test_spark_lake_replay.py and tests/integration/spark_app/test_resume.py.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from confluent_kafka import Consumer, TopicPartition

from reprise_operator.shared.constants import replay_group_name
from tests.fixtures.kube import wait_for

from .lake_scenario import (
    Sink,
    assert_lake_children_gone,
    drain_consumer,
    get,
    in_key_order,
    lake,  # noqa: F401 - the session fixture
    lake_replay,
    produce_events,
    schema_configmap,
    topic_exists,
    watch,
)
from .scenario import KeepProducing, Ledger, apply, committed, group_state, live_deployment, wait_caught_up

pytestmark = pytest.mark.integration

UTC = timezone.utc


def test_lake_range_is_replayed_through_the_backfill_topic_and_everything_is_torn_down(
    kube, kafka, operator, spark_operator, spark_version, namespace, lake, tmp_path
):
    start, end = datetime(2024, 1, 2, 6, tzinfo=UTC), datetime(2024, 1, 5, 18, tzinfo=UTC)
    sink = tmp_path / "sink"
    sink.mkdir()
    schema_configmap(kube, namespace)
    apply(
        kube,
        namespace,
        lake_replay(
            "history",
            kafka.bootstrap,
            lake,
            spark_version,
            start="2024-01-02T06:00:00Z",
            to="2024-01-05T18:00:00Z",
            filter_="event_type <> 'view'",
            consumer=drain_consumer(sink),
            cleanup={"ttlSecondsAfterFinished": 5},
        ),
    )

    seen = watch(kube, namespace, "history", "Running", 120, operator, spark_operator)
    children = seen.body["status"]["children"]
    assert get(kube, namespace, "sparkapplication", children["sparkApplication"]) is not None
    assert get(kube, namespace, "deployment", children["deployment"]) is not None
    topic = children["backfillTopic"]
    assert topic == f"{namespace}.history.reprise-backfill" and topic_exists(kafka.bootstrap, topic)

    seen = watch(kube, namespace, "history", "Complete", 900, operator, spark_operator, seen)
    status = seen.body["status"]

    # The lake range that passes the filter, in the latest schema, each event exactly once, per-key order kept.
    expected = {k: v for k, v in lake.expected(start, end).items() if v[1]["event_type"] != "view"}
    rows = Sink.read(sink).of_topic(topic)
    counts = Counter(r.value["event_id"] for r in rows)
    assert set(counts) == set(expected), (
        f"missing {len(set(expected) - set(counts))}, unexpected {len(set(counts) - set(expected))}"
    )
    assert max(counts.values()) == 1, f"processed twice: {[e for e, c in counts.items() if c > 1][:5]}"
    for row in rows:
        n, want = expected[row.value["event_id"]]
        assert dict(row.value, ts=datetime.fromisoformat(row.value["ts"])) == want
        assert row.key == want["user_id"] and row.headers["reprise-replay"] == "true"
    assert {lake.spec.version_of(n) for n, _ in expected.values()} == {1, 2, 3}
    assert in_key_order(rows)

    # Spark's states became conditions on the way; the record count is what the topic held.
    assert "RUNNING" in seen.spark_states and seen.spark_states[-1] == "COMPLETED"
    assert ("Running", "True", "SparkRunning") in seen.conditions_seen
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Produced"]["status"] == "True" and conditions["Produced"]["reason"] == "SparkCompleted"
    assert conditions["Drained"]["status"] == "True" and conditions["Complete"]["status"] == "True"
    assert status["spark"]["recordsWritten"] == len(expected)
    assert status["progress"]["lag"] == 0 and status["progress"]["processed"] == len(expected)
    assert "Running" in seen.phases and seen.phases[-1] == "Complete"
    # Review M4: the drain group and the backfill topic are what status.created says Reprise made, and went.
    assert status["created"] == {"groups": ["history-lake"], "topics": [topic]}
    assert_lake_children_gone(kube, kafka, namespace, "history", status)
    # ttlSecondsAfterFinished: the finished LakeReplay itself goes.
    wait_for(lambda: get(kube, namespace, "lakereplay", "history") is None, 60, "the TTL to delete the LakeReplay")


def test_then_reconsume_continues_on_kafka_at_the_seam_and_hands_over_to_the_live_group(
    kube, kafka, operator, spark_operator, spark_version, namespace, lake, topic_name, tmp_path
):
    """The whole journey in one resource: events before `to` come from the lake (through the backfill topic),
    events at and after `to` from the live topic (a Handover continuation), none lost or doubled at the seam."""
    start, seam = datetime(2024, 1, 3, tzinfo=UTC), datetime(2024, 1, 5, 12, tzinfo=UTC)
    # The live topic keeps the last two days, so it overlaps the lake by half a day before the seam.
    kept_from = datetime(2024, 1, 5, tzinfo=UTC)
    in_kafka = [r for _, r in lake.expected(kept_from, datetime(2024, 1, 7, tzinfo=UTC)).values()]
    # Kept forever: the events carry their 2024 event times, and the first record produced now rolls the
    # segment, which time retention (7 days by record timestamp) would then delete at its next check.
    kafka.create_topic(topic_name, 3, config={"retention.ms": "-1"})
    produce_events(kafka.bootstrap, topic_name, in_kafka)
    sink = tmp_path / "sink"
    sink.mkdir()
    apply(kube, namespace, live_deployment("accounts", kafka.bootstrap, "accounts-group", topic_name, sink))
    wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, 3)
    schema_configmap(kube, namespace)

    with KeepProducing(kafka.bootstrap, topic_name, rate=20) as producer:
        apply(
            kube,
            namespace,
            lake_replay(
                "journey",
                kafka.bootstrap,
                lake,
                spark_version,
                start="2024-01-03T00:00:00Z",
                to="2024-01-05T12:00:00Z",
                partitions=None,
                consumer=drain_consumer(deployment="accounts"),
                then={
                    "reconsume": {
                        "topics": [topic_name],
                        "consumerGroup": "accounts-group",
                        "mode": "Handover",
                        "completion": {"drainedFor": "2s"},
                    }
                },
            ),
        )
        seen = watch(kube, namespace, "journey", "Complete", 1200, operator, spark_operator)
    assert producer.written > 0
    status = seen.body["status"]
    children = status["children"]
    backfill = children["backfillTopic"]
    ends = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, 3)

    # The continuation started at the first offset at/after the seam, on every partition of the live topic.
    live = read_live(kafka.bootstrap, topic_name, ends)
    starts = {o["partition"]: o["offset"] for o in status["continuation"]["startOffsets"]}
    seam_ms = int(seam.timestamp() * 1000)
    for p, records in live.items():
        first = next((o for o, (ts, _) in sorted(records.items()) if ts >= seam_ms), ends[p])
        assert starts[p] == first, (
            f"partition {p}: continuation starts at {starts[p]}, first record at/after to is {first}"
        )
    assert status["continuation"]["phase"] == "Complete" and children["reconsume"] == "journey-then"
    assert len(status["plan"]["partitions"]) == 3

    # Lake side: exactly the events with start <= ts < to, each once, into a backfill topic of the live topic's size.
    sunk = Sink.read(sink)
    drained = sunk.of_topic(backfill)
    lake_events = lake.expected(start, seam)
    drained_counts = Counter(r.value["event_id"] for r in drained)
    assert set(drained_counts) == set(lake_events) and max(drained_counts.values()) == 1
    assert {r.partition for r in drained} == {0, 1, 2}
    assert all(datetime.fromisoformat(r.value["ts"]) < seam for r in drained)

    # Kafka side, from the seam: every record processed exactly once by the replay or, from where its guard
    # skipped, the live group; nothing before the seam replayed from Kafka.
    replayed = Counter((r.partition, r.offset) for r in sunk.of_topic(topic_name))
    ledger = Ledger.read(sink, topic_name)
    assert all(o >= starts[p] for p, o in replayed), "the continuation replayed records before the seam"
    # Whether the guard skipped records the continuation then replayed depends on timing: a continuation that
    # reaches the end of a partition first hands over there, and the guard reads back what it had skipped.
    # The accounting holds either way; that the guard took part on every partition is the continuation's
    # Complete above (it needs the guard's acknowledgement of every handover offset).
    for p in range(3):
        # The live side's own processing counts from where it stopped processing: where its guard began to
        # skip, or else the handover offset, one past the last record replayed.
        handover = max((o + 1 for q, o in replayed if q == p), default=starts[p])
        live_from = min(ledger.first_skipped(p, ends[p]), handover)
        for offset in range(starts[p], ends[p]):
            by_live = ledger.live.get(p, Counter())[offset] if offset >= live_from else 0
            total = replayed[(p, offset)] + by_live
            assert total == 1, f"partition {p} offset {offset}: processed {total} times after the seam"
    after_seam = {(p, offset) for p in range(3) for offset in range(starts[p], ends[p])}

    # At the seam itself: no event from both sides, and each side holds exactly its half of the overlap.
    from_kafka = {live[p][o][1].get("event_id") for p, o in after_seam} - {None}
    assert not from_kafka & set(drained_counts), "an event came from the lake and from Kafka"
    overlap = {e["event_id"]: e["ts"] for e in in_kafka}
    assert {e for e, ts in overlap.items() if ts < seam} <= set(drained_counts)
    assert {e for e, ts in overlap.items() if ts >= seam} <= from_kafka

    # Per key, the lake's records were all processed before the first record from Kafka.
    assert max(r.wall_ns for r in drained) < min(r.wall_ns for r in sunk.of_topic(topic_name))

    # Everything Reprise made is gone: the lake's children, the continuation Reconsume and its replay group.
    assert_lake_children_gone(kube, kafka, namespace, "journey", status)
    assert get(kube, namespace, "reconsume", "journey-then") is None
    assert group_state(kafka.bootstrap, replay_group_name(namespace, "journey-then")) in ("DEAD", "Dead")
    assert committed(kafka.bootstrap, replay_group_name(namespace, "journey-then"), topic_name, 3) == {}


def read_live(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, dict[int, tuple[int, dict]]]:
    """partition -> offset -> (timestamp ms, value) of the live topic up to `ends`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-read", "enable.auto.commit": False})
    found: dict[int, dict[int, tuple[int, dict]]] = {p: {} for p in ends}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends if ends[p] > 0])
        deadline = datetime.now(UTC) + timedelta(minutes=5)
        while any(len(found[p]) < ends[p] for p in ends):
            assert datetime.now(UTC) < deadline, "could not read the live topic back"
            for m in consumer.consume(5000, 1.0):
                if m.error() is None and m.offset() < ends[m.partition()]:
                    found[m.partition()][m.offset()] = (m.timestamp()[1], json.loads(m.value()))
    finally:
        consumer.close()
    return found
