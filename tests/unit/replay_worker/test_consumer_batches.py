"""The replay consumer's batches: a batch taken whole, its positions from the consumer's, hands on the same records,
moves the same positions and counts the same bytes as reading each record of it; where they could differ (an
offset without a record, an event, a partition not taken as it comes) the batch is read record by record."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, Message, TopicPartition

from replay_worker.replay.consumer import ReplayConsumer
from replay_worker.replay.delivery import DeadLetters, HandlerDelivery
from replay_worker.protocol.filters import compile_filter
from replay_worker.protocol.handover import ReplayHandover
from replay_worker.replay.metrics import WorkerMetrics
from replay_worker.settings import WorkerSettings
from replay_worker.protocol.wire import StartInfo

TOPIC = "orders"
SETTINGS = WorkerSettings.from_env(
    {
        "REPRISE_BOOTSTRAP_SERVERS": "kafka:9092",
        "REPRISE_REPLAY_ID": "shop/orders-fix/1a2b3c4d",
        "REPRISE_TOPICS": TOPIC,
        "REPRISE_REPLAY_GROUP": "reprise-shop-orders-fix",
        "REPRISE_HANDLER": "shop.handlers:apply",
    }
)
FILTER = {"json": [{"path": "kind", "equals": "even"}]}


class FakeConsumer:
    """librdkafka's side of a batch: each partition's position is the offset after the last record (or transaction
    marker) it returned, reset when the partition is assigned; commits are answered at once."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, int], int] = {}
        self.committed_offsets: dict[tuple[str, int], int] = {}
        self.paused: list[tuple[str, int]] = []
        self.worker: ReplayConsumer | None = None

    def returned(self, messages: list[Message], markers: dict[int, int] | None = None) -> None:
        for message in messages:
            if message.error() is None:
                key = (message.topic(), message.partition())
                self.at[key] = max(self.at.get(key, OFFSET_INVALID), message.offset() + 1)
        for partition, offset in (markers or {}).items():
            key = (TOPIC, partition)
            self.at[key] = max(self.at.get(key, OFFSET_INVALID), offset + 1)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.at.get((tp.topic, tp.partition), OFFSET_INVALID))
            for tp in partitions
        ]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.at.pop((tp.topic, tp.partition), None)

    def assign(self, partitions: list[TopicPartition]) -> None:  # eager: the whole assignment, positions anew
        self.at.clear()

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 0) for tp in partitions]

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused.extend((tp.topic, tp.partition) for tp in partitions)

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        for tp in offsets:
            self.committed_offsets[(tp.topic, tp.partition)] = tp.offset
        if asynchronous and self.worker is not None:
            self.worker._on_commit(None, offsets)


def record(partition: int, offset: int, kind: str = "even", value: bytes | None = None) -> Message:
    body = value if value is not None else b'{"kind":"%s","n":%d}' % (kind.encode(), offset)
    return Message(topic=TOPIC, partition=partition, offset=offset, key=b"k", value=body, timestamp=(1, 1000 + offset))


def end_of(partition: int, offset: int) -> Message:
    return Message(topic=TOPIC, partition=partition, offset=offset, error=KafkaError(KafkaError._PARTITION_EOF))


def replica(whole: bool, partitions: int = 3, end_offset: int | None = None) -> tuple[ReplayConsumer, FakeConsumer]:
    """A replica of the replay group with `partitions` assigned from offset 0; with `whole` False every batch is
    read record by record (the reference)."""
    handed: list[Message] = []
    delivery = HandlerDelivery(handed.extend, DeadLetters(SETTINGS.replay_id, None, None), retries=0)
    worker = ReplayConsumer(
        SETTINGS,
        {},
        delivery,
        compile_filter(FILTER),
        WorkerMetrics(SETTINGS.replay_id, SETTINGS.member_name),
        ReplayHandover(SETTINGS.replay_id),
    )
    worker.handed = handed  # type: ignore[attr-defined]
    worker.plan = {
        (TOPIC, p): StartInfo(SETTINGS.replay_id, TOPIC, p, 0, end_offset=end_offset) for p in range(partitions)
    }
    worker._publish_handover = lambda *records: None  # type: ignore[method-assign]
    if not whole:
        worker._take_whole = lambda consumer, messages: False  # type: ignore[method-assign]
    consumer = FakeConsumer()
    consumer.worker = worker
    worker._on_assign(consumer, [TopicPartition(TOPIC, p) for p in range(partitions)])  # type: ignore[arg-type]
    return worker, consumer


def outcome(worker: ReplayConsumer) -> dict:
    metrics = worker.metrics
    return {
        "handed": [(m.partition(), m.offset()) for m in worker.handed],  # type: ignore[attr-defined]
        "positions": {key: (p.position, p.at_end, p.finished) for key, p in worker.parts.items()},
        "consumed": metrics.consumed._value.get(),
        "bytes": metrics.bytes._value.get(),
        "matched": metrics.matched._value.get(),
        "skipped": metrics.skipped._value.get(),
    }


def replay(batches: list[tuple[list[Message], dict[int, int]]], **kwargs) -> tuple[dict, dict, list[str]]:
    """The batches through a replica taking whole batches and through the reference; how each batch was taken:
    "positions" (the consumer's), "runs" (the batch's runs of one partition) or "each" (record by record)."""
    results = []
    ways: list[str] = []
    for whole in (True, False):
        worker, consumer = replica(whole, **kwargs)
        if whole:
            take_whole, take_runs = worker._take_whole, worker._take_runs

            def spy_whole(c, m, take_whole=take_whole):  # type: ignore[no-untyped-def]
                ways.append("positions")
                taken = take_whole(c, m)
                if not taken:
                    ways[-1] = "each"
                return taken

            def spy_runs(m, take_runs=take_runs):  # type: ignore[no-untyped-def]
                ways[-1] = "runs"
                return take_runs(m)

            worker._take_whole, worker._take_runs = spy_whole, spy_runs  # type: ignore[method-assign]
        for messages, markers in batches:
            consumer.returned(messages, markers)
            worker._process(consumer, messages)  # type: ignore[arg-type]
            worker._decide(consumer)  # type: ignore[arg-type]
        results.append((outcome(worker), consumer.committed_offsets))
    (whole_result, whole_commits), (each_result, each_commits) = results
    assert whole_commits == each_commits
    return whole_result, each_result, ways


def test_a_batch_of_contiguous_runs_is_taken_whole_with_the_positions_its_records_give() -> None:
    batch = [record(0, o) for o in range(5)] + [record(1, o, "odd") for o in range(3)] + [record(0, 5)]
    whole, each, ways = replay([(batch, {})])
    assert ways == ["positions"]
    assert whole == each
    assert whole["positions"][(TOPIC, 0)] == (6, False, None) and whole["positions"][(TOPIC, 1)] == (3, False, None)
    assert whole["handed"] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5)]
    assert whole["bytes"] == sum(len(m.value()) for m in batch) and whole["skipped"] == 3


def test_values_without_a_body_count_no_bytes_and_batches_go_on_whole() -> None:
    first = [record(0, 0), record(0, 1, value=b""), Message(topic=TOPIC, partition=0, offset=2, key=b"k")]
    second = [record(0, 3), record(2, 0)]
    whole, each, ways = replay([(first, {}), (second, {})])
    assert ways == ["positions", "positions"]
    assert whole == each and whole["bytes"] == len(first[0].value()) + sum(len(m.value()) for m in second)


def test_an_offset_without_a_record_takes_the_positions_from_the_batchs_runs() -> None:
    # A transaction's commit marker at offset 3: no record has it, so the spans add up to more than the batch.
    batch = [record(0, 0), record(0, 1), record(0, 2), record(0, 4), record(1, 0)]
    later = [record(0, 5), record(1, 1)]
    whole, each, ways = replay([(batch, {}), (later, {})])
    assert ways == ["runs", "positions"]
    assert whole == each and whole["positions"][(TOPIC, 0)][0] == 6
    # A marker after the last record: librdkafka's position passes it; the records' position stays before it.
    trailing = [record(0, 0), record(0, 1), record(1, 0)]
    whole, each, ways = replay([(trailing, {0: 2}), ([record(0, 3), record(1, 1)], {})])
    assert ways == ["runs", "runs"]
    assert whole == each and whole["positions"][(TOPIC, 0)][0] == 4


def test_an_end_of_partition_event_sends_the_batch_record_by_record() -> None:
    batch = [record(0, 0), record(0, 1), end_of(0, 2), record(1, 0)]
    whole, each, ways = replay([(batch, {}), ([record(1, 1), record(1, 2)], {})])
    assert ways == ["each", "positions"]
    assert whole == each
    assert whole["positions"][(TOPIC, 0)] == (2, True, "end-of-partition")


def test_records_of_a_finished_partition_are_never_handed_on() -> None:
    # Partition 0 finishes at its end; records that still come for it are read one by one and left out.
    first = [record(0, 0), end_of(0, 1), record(1, 0)]
    stray = [record(0, 1), record(1, 1)]
    whole, each, ways = replay([(first, {}), (stray, {}), ([record(1, 2)], {})])
    assert ways == ["each", "each", "positions"]
    assert whole == each and (0, 1) not in whole["handed"]
    assert whole["positions"][(TOPIC, 0)] == (1, True, "end-of-partition")


def test_a_bounded_partition_is_read_record_by_record_up_to_its_end() -> None:
    batch = [record(0, o) for o in range(4)] + [record(1, o) for o in range(2)]
    whole, each, ways = replay([(batch, {})], end_offset=3)
    assert ways == ["each"]
    assert whole == each and (0, 3) not in whole["handed"]
    assert whole["positions"][(TOPIC, 0)] == (3, False, "end-bound")


def test_records_of_a_partition_assigned_while_stopping_are_left_to_its_next_owner() -> None:
    worker, consumer = replica(True, partitions=1)
    worker.request_stop()
    worker._on_assign(consumer, [TopicPartition(TOPIC, 5)])  # type: ignore[arg-type]
    batch = [record(0, 0), record(5, 0), record(5, 1)]
    consumer.returned(batch)
    assert not worker._take_whole(consumer, batch)  # type: ignore[arg-type]
    worker._process(consumer, batch)  # type: ignore[arg-type]
    assert [(m.partition(), m.offset()) for m in worker.handed] == [(0, 0)]  # type: ignore[attr-defined]


def test_a_partition_assigned_again_starts_from_its_committed_offset() -> None:
    worker, consumer = replica(True, partitions=2)
    first = [record(0, o) for o in range(3)] + [record(1, 0)]
    consumer.returned(first)
    worker._process(consumer, first)  # type: ignore[arg-type]
    worker._on_revoke(consumer, [TopicPartition(TOPIC, 0)])  # type: ignore[arg-type]
    worker._on_assign(consumer, [TopicPartition(TOPIC, 0)])  # type: ignore[arg-type]
    again = [record(0, 0), record(0, 1), record(1, 1)]  # the committed offset our fake answers is 0
    consumer.returned(again)
    worker._process(consumer, again)  # type: ignore[arg-type]
    assert worker.parts[(TOPIC, 0)].position == 2 and worker.parts[(TOPIC, 1)].position == 2


@pytest.mark.parametrize("seed", range(20))
def test_mixed_batches_hand_on_what_reading_each_record_does(seed: int) -> None:
    import random

    rng = random.Random(seed)
    next_offset = [0, 0, 0]
    batches = []
    for _ in range(6):
        messages: list[Message] = []
        markers: dict[int, int] = {}
        for _ in range(rng.randint(1, 4)):
            partition = rng.randrange(3)
            for _ in range(rng.randint(1, 5)):
                if rng.random() < 0.1:
                    next_offset[partition] += 1  # an offset without a record (a marker, a compacted record)
                kind = rng.choice(["even", "odd"])
                messages.append(record(partition, next_offset[partition], kind))
                next_offset[partition] += 1
            if rng.random() < 0.1:
                messages.append(end_of(partition, next_offset[partition]))
            if rng.random() < 0.1:
                markers[partition] = next_offset[partition]
                next_offset[partition] += 1
        batches.append((messages, markers))
    whole, each, _ = replay(batches)
    assert whole == each
