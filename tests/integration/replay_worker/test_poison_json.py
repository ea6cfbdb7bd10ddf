"""Records no reader can be broken by, on the real broker (finding H3; HANDOVER.md section 2 "Limits", section 4
steps 5 and 8): a key and a value nested 5000 deep and a 10 MB value on the handover topic, and the same kinds
of value on a live topic that a JSON-filtered replay covers.

The review's attack A3: one key `"[" * 5000` between a replay's `start` and its `handover` record broke the
Python reader, and the follower lost the rest of its batch, H among it, for good. A record nested 5000 deep
in a live topic raised out of the guarded consumer's `consume()`. Here every guard must learn H, hand out
exactly the records the replay does not cover, and count the records it could not read.

The Java and Go guards run the same records in their own suites (`PoisonRecordsIntegrationTest`,
`TestPoisonRecords`), so the three agree on which records the replay covers (filters.json holds the cases).
"""

from __future__ import annotations

import json
import time

import prometheus_client
from confluent_kafka import Producer

from replay_worker.guard import GuardedConsumer
from replay_worker.topic.handover_topic import HandoverFollower, HandoverTopic
from replay_worker.protocol.wire import HandoverInfo, ReplayInfo, StartInfo, encode, encode_key

from .harness import wait_for

#: Room for a 10 MB record in the topics (per topic) and in the producer.
BIG = "12000000"
TEN_MB = 10_000_000
RECORDS = 30
DEEP_AT, BIG_AT, H = 20, 21, 22
#: Two values, so the single-field prefix rule does not apply and a value holding `"even"` is parsed.
FILTER = {"json": [{"path": "kind", "in": ["even", "none"]}]}


def live_value(n: int) -> bytes:
    """Record n of the live topic: JSON, except the two poison records."""
    if n == DEEP_AT:  # holds the wanted bytes, so it reaches the parser: 5000 levels
        return b'{"kind":"odd","note":"even","deep":' + b"[" * 5000 + b"]" * 5000 + b"}"
    if n == BIG_AT:  # valid JSON whose kind is odd, but above the size limit: undecodable, so covered
        head = b'{"kind":"odd","note":"even","pad":"'
        return head + b"x" * (TEN_MB - len(head) - 2) + b'"}'
    return json.dumps({"n": n, "kind": "even" if n % 2 == 0 else "odd"}).encode()


def _produce(bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": BIG, "enable.idempotence": True})
    failures: list[str] = []
    for key, value in messages:
        producer.produce(topic, value, key, on_delivery=lambda err, _m: err and failures.append(err.str()))
    assert producer.flush(60) == 0 and not failures, failures


def _poisoned_handover_topic(kafka, handover_topic: str, topic_name: str, group: str, rid: str) -> HandoverTopic:
    """The replay's records with the poison between `start` and `handover`, all written before any reader starts
    (so one reader gets them in one batch, as in the review's reproduction)."""
    kafka.create_topic(handover_topic, 1, {"cleanup.policy": "compact", "max.message.bytes": BIG})
    topic = HandoverTopic(kafka.bootstrap, handover_topic, {})
    topic.publish(
        ReplayInfo(rid, "Handover", f"{topic_name}-replay", group, (topic_name,), FILTER),
        StartInfo(rid, topic_name, 0, 0),
    )
    progress_key = encode_key(rid, "progress", topic_name, 0)
    guard_key = encode_key(rid, "guard", topic_name, 0)
    deep = b'{"v":1,"kind":"progress","deep":' + b"[" * 5000 + b"]" * 5000 + b"}"
    # The 10 MB record comes alone in its fetch; the A3 key and H come in the next one, as in the review.
    _produce(
        kafka.bootstrap,
        handover_topic,
        [
            (progress_key, deep),
            (guard_key, b'{"v":1,"kind":"guard","pad":"' + b"x" * TEN_MB + b'"}'),
            (b"[" * 5000, b"{}"),  # the review's A3 key
            encode(HandoverInfo(rid, topic_name, 0, H, "caught-up")),
        ],
    )
    return topic


def _failed(handover_topic: str, reason: str) -> float:
    value = prometheus_client.REGISTRY.get_sample_value(
        "reprise_handover_follower_records_failed_total", {"topic": handover_topic, "reason": reason}
    )
    return value or 0.0


def test_the_follower_learns_h_after_poison_records_and_counts_them(kafka, topic_name, handover_topic) -> None:
    group, rid = f"{topic_name}-live", f"test/{topic_name}"
    topic = _poisoned_handover_topic(kafka, handover_topic, topic_name, group, rid)
    follower = HandoverFollower(kafka.bootstrap, handover_topic, {}, derive=lambda view: None, interval=0.1).start()
    try:
        assert follower.wait_synced(follower.request_sync(), 60), f"the follower did not catch up: {follower.error}"
        with follower.locked_view() as view:
            part = view.replay(rid).partitions.get((topic_name, 0))
            handover = None if part is None else part.handover_offset
        assert handover == H, "the follower missed the handover record after the poison records"
        assert _failed(handover_topic, "malformed-key") == 1
        assert _failed(handover_topic, "malformed-value") == 1
        assert _failed(handover_topic, "too-large") == 1
    finally:
        follower.stop()
        topic.close()
        kafka.admin().delete_topics([handover_topic])


def test_a_guard_reads_past_poison_records_on_both_topics(kafka, topic_name, handover_topic) -> None:
    group, rid = f"{topic_name}-live", f"test/{topic_name}"
    kafka.create_topic(topic_name, 1, {"max.message.bytes": BIG})
    _produce(kafka.bootstrap, topic_name, [(str(n).encode(), live_value(n)) for n in range(RECORDS)])
    topic = _poisoned_handover_topic(kafka, handover_topic, topic_name, group, rid)
    consumer = GuardedConsumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        },
        handover_topic=handover_topic,
        member="live-poison",
        progress_interval=0.2,
    )

    def acknowledged() -> bool:
        part = topic.read_replay(rid).partitions.get((topic_name, 0))
        return part is not None and part.acknowledged

    # The replay covers the even records below H and the two undecodable ones; the guard hands the rest.
    expected = {n for n in range(H) if n % 2 == 1 and n not in (DEEP_AT, BIG_AT)} | set(range(H, RECORDS))
    handed: list[int] = []
    try:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (set(handed) >= expected and acknowledged()):
            batch = [m for m in consumer.consume(100, 0.3) if m.error() is None]
            if batch:
                handed += [m.offset() for m in batch]
                consumer.commit(asynchronous=False)
        assert sorted(handed) == sorted(expected), "the guard handed other records than the replay does not cover"
        wait_for(acknowledged, 30, "the guard's ack of H (it learned H after the poison records)")
    finally:
        consumer.close()
        topic.close()
        kafka.admin().delete_topics([topic_name, handover_topic])
