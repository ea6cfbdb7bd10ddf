"""A bounded read of the handover topic stops at the end it took, so it never sees part of a transaction.

The bootstrap writes a replay's `replay` and `start` records in one transaction, and a worker plans exactly the
partitions whose `start` it read (a partition without one is "not in the plan" and left to the live group). A read
that took the topic's readable end (the last stable offset: always a transaction boundary) but then applied
whatever a consume call returned applied records beyond that end too, which transactions committed meanwhile had
made readable. A consume call returns at most 1000 records, so that batch could end in the middle of such a
transaction: the `replay` record and some `start` records read, the others not. The replay then counted as
bootstrapped, and a worker of team B's tenant suite planned 2 of its 3 partitions and never replayed the third
(issue 27; the stall of tests/integration/operator/test_tenant_handover.py).

The test makes that order certain: a transaction held open keeps the readable end low while a few hundred
bootstrap-shaped transactions are written after it, and it commits just after the read took its end.
"""

from __future__ import annotations

from confluent_kafka import Producer

from replay_worker.protocol.wire import ReplayInfo, StartInfo, encode
from replay_worker.topic.handover_topic import HandoverTopic

PARTITIONS = 3
REPLAYS = 300


def bootstrap_records(replay_id: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    records = [ReplayInfo(replay_id, "Handover", "reprise.t.r", "t.live", (topic,), {}, 1)]
    records += [StartInfo(replay_id, topic, p, 0, None, None, False, 1) for p in range(PARTITIONS)]
    return [encode(record) for record in records]


class EndThenCommit(HandoverTopic):
    """The handover topic whose first readable end is taken while `held` is open; `held` commits right after."""

    def __init__(self, *args, held: Producer, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.held = held
        self.end: int | None = None

    def readable_end(self) -> int | None:
        end = super().readable_end()
        if self.end is None:
            self.end = end
            self.held.commit_transaction(30)
        return end


def test_a_read_applies_nothing_after_its_end(kafka, topic_name):
    handover = f"{topic_name}-handover"
    kafka.create_topic(handover, 1, {"cleanup.policy": "compact"})

    def transactional(name: str) -> Producer:
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{topic_name}-{name}"})
        producer.init_transactions(30)
        producer.begin_transaction()
        return producer

    first = transactional("first")  # one replay, committed before anything else
    for key, value in bootstrap_records("t/before", topic_name):
        first.produce(handover, key=key, value=value, partition=0)
    first.commit_transaction(30)
    held = transactional("held")  # open: the readable end stays at its first record
    key, value = bootstrap_records("t/held", topic_name)[0]
    held.produce(handover, key=key, value=value, partition=0)
    held.flush(30)
    many = transactional("many")
    for n in range(REPLAYS):
        for key, value in bootstrap_records(f"t/after-{n}", topic_name):
            many.produce(handover, key=key, value=value, partition=0)
        many.commit_transaction(30)
        many.begin_transaction()
    many.abort_transaction(30)

    topic = EndThenCommit(kafka.bootstrap, handover, held=held, timeout=30)
    try:
        view = topic.read()
        assert topic.end == PARTITIONS + 2  # the first transaction: 4 records and its commit marker
        partial = {rid: len(r.planned) for rid, r in view.replays.items() if r.bootstrapped and len(r.planned) != 3}
        assert not partial, f"replays read as bootstrapped with only some of their starts: {partial}"
        assert set(view.replays) == {"t/before"}, "the read applied records from after the end it took"
        again = topic.read()  # everything is readable now, and a new read takes the new end
        assert len(again.replays) == REPLAYS + 2  # and t/held, a `replay` record without starts
        assert all(len(again.replay(f"t/after-{n}").planned) == PARTITIONS for n in range(REPLAYS))
    finally:
        topic.close()
        for producer in (first, held, many):
            producer.flush(10)
