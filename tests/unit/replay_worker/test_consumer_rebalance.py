"""The replay consumer's rebalance callbacks while it stops: close() may serve an assignment that was under way
at the stop, on a consumer that is being destroyed."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replay_worker.replay.consumer import ReplayConsumer
from replay_worker.replay.delivery import DeadLetters, Delivery
from replay_worker.protocol.filters import compile_filter
from replay_worker.protocol.handover import ReplayHandover
from replay_worker.replay.metrics import WorkerMetrics
from replay_worker.settings import WorkerSettings

SETTINGS = WorkerSettings.from_env(
    {
        "REPRISE_BOOTSTRAP_SERVERS": "kafka:9092",
        "REPRISE_REPLAY_ID": "shop/orders-fix/1a2b3c4d",
        "REPRISE_TOPICS": "orders",
        "REPRISE_REPLAY_GROUP": "reprise-shop-orders-fix",
        "REPRISE_FORWARD_TOPIC": "orders.replayed",
    }
)


class ClosingConsumer:
    """The calls a rebalance callback makes, on a consumer whose close() is under way."""

    def __init__(self) -> None:
        self.assigned: list[TopicPartition] = []
        self.committed_calls = 0

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned.extend(partitions)

    def assign(self, partitions: list[TopicPartition]) -> None:  # eager: the whole assignment
        self.assigned = list(partitions)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.committed_calls += 1
        raise KafkaException(KafkaError(KafkaError._DESTROY, "Broker handle destroyed for termination"))


def replay_consumer() -> ReplayConsumer:
    metrics = WorkerMetrics(SETTINGS.replay_id, SETTINGS.member_name)
    return ReplayConsumer(
        SETTINGS,
        {},
        Delivery(DeadLetters(SETTINGS.replay_id, None, None), 1.0),
        compile_filter(None),
        metrics,
        ReplayHandover(SETTINGS.replay_id),
    )


def test_an_assignment_served_while_stopping_is_taken_but_not_read() -> None:
    worker, consumer = replay_consumer(), ClosingConsumer()
    worker.request_stop()
    partitions = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    worker._on_assign(consumer, partitions)
    assert consumer.assigned == partitions  # the protocol completes
    assert consumer.committed_calls == 0 and worker.parts == {}


def test_a_consumer_being_destroyed_is_not_asked_again() -> None:
    worker, consumer = replay_consumer(), ClosingConsumer()
    try:
        worker._committed(consumer, [TopicPartition("orders", 0)])
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError._DESTROY
    else:
        raise AssertionError("a destroyed consumer's error must be raised")
    assert consumer.committed_calls == 1  # not retried for a minute


class RecordingConsumer:
    """How an assignment is taken: whole (eager) or added to (cooperative)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assign", list(partitions)))

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("incremental_assign", list(partitions)))


def test_an_eager_group_takes_each_assignment_whole_and_a_cooperative_one_adds_to_it() -> None:
    partitions = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    for cooperative, call in ((False, "assign"), (True, "incremental_assign")):
        worker, consumer = replay_consumer(), RecordingConsumer()
        worker._cooperative = cooperative
        worker.request_stop()  # no offsets to read: only how the partitions are taken
        worker._on_assign(consumer, partitions)
        assert consumer.calls == [(call, partitions)]
