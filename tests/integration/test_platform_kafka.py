"""The local platform's Kafka broker: records go in and come back out exactly, and a restart keeps data and address."""

from __future__ import annotations

import hashlib
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from local_platform.kafka_broker import KafkaBroker

pytestmark = pytest.mark.integration


def _value(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).hexdigest().encode() * (1 + i % 4)


def _produce(broker: KafkaBroker, topic: str, numbers: range, producer: Producer | None = None) -> None:
    producer = producer or Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for i in numbers:
        while True:
            try:
                producer.produce(topic, key=f"key-{i}".encode(), value=_value(i), on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
    assert producer.flush(120) == 0, "records still undelivered after flush"
    assert failures == []


def _consume_all(broker: KafkaBroker, topic: str, partitions: int) -> list[tuple[bytes, bytes, int, int]]:
    """Every record of `topic` from the start to the end of each partition: (key, value, partition, offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    records: list[tuple[bytes, bytes, int, int]] = []
    at_end: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        # A bound so a broken broker fails the test instead of hanging it (not a timing assertion).
        deadline = time.monotonic() + 300
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"only {len(records)} records read before giving up"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            records.append((msg.key(), msg.value(), msg.partition(), msg.offset()))
    finally:
        consumer.close()
    return records


def _checksum(values: list[bytes]) -> str:
    digest = hashlib.sha256()
    for v in sorted(values):
        digest.update(hashlib.sha256(v).digest())
    return digest.hexdigest()


def test_ten_thousand_records_come_back_exactly(kafka: KafkaBroker, topic_name: str) -> None:
    count, partitions = 10_000, 3
    kafka.create_topic(topic_name, partitions)

    _produce(kafka, topic_name, range(count))
    records = _consume_all(kafka, topic_name, partitions)

    assert len(records) == count
    assert {key for key, *_ in records} == {f"key-{i}".encode() for i in range(count)}
    assert _checksum([value for _, value, *_ in records]) == _checksum([_value(i) for i in range(count)])
    assert all(value == _value(int(key.decode().split("-")[1])) for key, value, *_ in records)
    # Offsets are dense per partition: nothing was lost or written twice.
    for p in range(partitions):
        offsets = sorted(o for *_, part, o in records if part == p)
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("kill", [False, True], ids=["clean-stop", "crash"])
def test_restart_keeps_data_and_bootstrap(kafka: KafkaBroker, topic_name: str, kill: bool) -> None:
    kafka.create_topic(topic_name, 2)
    bootstrap, pid_before = kafka.bootstrap, kafka.pid
    # A client made before the restart keeps working after it, as a replay consumer or producer would.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    _produce(kafka, topic_name, range(0, 500), producer)

    kafka.restart(kill=kill)

    assert kafka.bootstrap == bootstrap
    assert kafka.pid is not None and kafka.pid != pid_before
    _produce(kafka, topic_name, range(500, 1000), producer)
    records = _consume_all(kafka, topic_name, 2)
    assert sorted(key for key, *_ in records) == sorted(f"key-{i}".encode() for i in range(1000))
    assert kafka.admin().list_topics(topic_name, timeout=10).topics[topic_name].error is None
