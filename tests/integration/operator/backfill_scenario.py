"""Helpers of the Backfill end-to-end tests: records in and out of real topics, downstream groups that
consume (or do not), a stand-in for a Debezium connector, and reading a Backfill's status.

Downstream groups here are consumers with `assign()` that read to the end and commit, as a downstream
service would after processing; holding one back is simply not running it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Iterable

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.fixtures.kube import wait_for

from .scenario import end_offsets

Record = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value


def produce_keyed(bootstrap: str, topic: str, records: Iterable[tuple[str, str | None]]) -> None:
    """Produce (key, value) pairs with the murmur2 partitioner Java producers use (None value: a tombstone)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, "partitioner": "murmur2_random"}
    )
    for i, (key, value) in enumerate(records):
        producer.produce(topic, key=key.encode(), value=value.encode() if value is not None else None)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def read_topic(bootstrap: str, topic: str, partitions: int, starts: dict[int, int] | None = None) -> list[Record]:
    """Every record of the topic from `starts` (default the beginning) to its end offsets now."""
    ends = end_offsets(bootstrap, topic, partitions)
    starts = starts or {}
    todo = {p for p in range(partitions) if starts.get(p, 0) < ends[p]}
    found: list[Record] = []
    if not todo:
        return found
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "backfill-test-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in sorted(todo)])
        while todo:
            for message in consumer.consume(500, 1.0):
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(message.partition())
                    continue
                if message.offset() < ends[message.partition()]:
                    found.append((message.partition(), message.offset(), message.key(), message.value()))
                if message.offset() + 1 >= ends[message.partition()]:
                    todo.discard(message.partition())
    finally:
        consumer.close()
    return found


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for a group without joining it (a downstream service's position, set by the test)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def consume_to_end(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """A downstream group catching up: read from its committed offsets to the end, then commit the end."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        reader.close()
    starts = {tp.partition: max(tp.offset, 0) for tp in committed}
    read_topic(bootstrap, topic, partitions, starts)
    ends = end_offsets(bootstrap, topic, partitions)
    commit(bootstrap, group, topic, ends)
    return ends


def backfill_body(kube, namespace: str, name: str) -> dict:
    return json.loads(kube.kubectl("get", "backfill", name, "-n", namespace, "-o", "json").stdout)


def conditions(body: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}


def wait_status(kube, namespace: str, name: str, check, what: str, timeout: float = 80, operator=None) -> dict:
    """Poll the Backfill until `check(body)` is true; fail with its status and the operator's log."""
    last: dict = {}

    def current():
        nonlocal last
        last = backfill_body(kube, namespace, name)
        if (last.get("status") or {}).get("phase") == "Failed":
            raise AssertionError(f"Backfill {name} failed: {json.dumps(last.get('status'), indent=1)}")
        return last if check(last) else None

    try:
        return wait_for(current, timeout, what, interval=0.5)
    except AssertionError as exc:
        log = "\n".join(operator.log().splitlines()[-40:]) if operator is not None else ""
        raise AssertionError(
            f"{exc}\nstatus: {json.dumps(last.get('status'), indent=1)}\noperator log:\n{log}"
        ) from None


@dataclass
class FakeConnector:
    """Plays a Debezium connector: reads its signal topic (partition 0, as Debezium does), and for the first
    execute-snapshot signal keyed with its topic prefix, emits the named rows to the table topic and the
    incremental snapshot's notifications. It stops after IN_PROGRESS until `finish` is set."""

    bootstrap: str
    topic_prefix: str
    signal_topic: str
    table_topic: str
    notification_topic: str
    rows: dict[str, str]
    signal: tuple[bytes | None, bytes | None, list] | None = None
    error: str | None = None
    finish: threading.Event = field(default_factory=threading.Event)
    notified: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "FakeConnector":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self.finish.set()
        if self._thread is not None:
            self._thread.join(30)

    def _notify(self, producer: Producer, id_: str, type_: str, **extra: str) -> None:
        body = {
            "id": id_,
            "aggregate_type": "Incremental Snapshot",
            "type": type_,
            "additional_data": {"connector_name": self.topic_prefix, **extra},
            "timestamp": "1695817046353",
        }
        producer.produce(self.notification_topic, key=self.topic_prefix.encode(), value=json.dumps(body).encode())
        assert producer.flush(10) == 0
        self.notified.append(type_)

    def _run(self) -> None:
        try:
            consumer = Consumer(
                {"bootstrap.servers": self.bootstrap, "group.id": "fake-connector-signals", "enable.auto.commit": False}
            )
            consumer.assign([TopicPartition(self.signal_topic, 0, 0)])
            try:
                while self.signal is None and not self._stop.is_set():
                    message = consumer.poll(0.2)
                    if message is None or message.error() is not None:
                        continue
                    if message.key() == self.topic_prefix.encode():
                        self.signal = (message.key(), message.value(), message.headers() or [])
            finally:
                consumer.close()
            if self.signal is None:
                return
            body = json.loads(self.signal[1])
            id_ = body["id"]
            collection = body["data"]["data-collections"][0]
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "partitioner": "murmur2_random"})
            self._notify(producer, id_, "STARTED", data_collections=collection)
            for key, value in self.rows.items():
                producer.produce(self.table_topic, key=json.dumps({"id": key}).encode(), value=value.encode())
            assert producer.flush(10) == 0
            self._notify(
                producer, id_, "IN_PROGRESS", data_collections=collection, current_collection_in_progress=collection
            )
            self.finish.wait()
            if self._stop.is_set():
                return
            self._notify(
                producer,
                id_,
                "TABLE_SCAN_COMPLETED",
                data_collection=collection,
                scanned_collection=collection,
                total_rows_scanned=str(len(self.rows)),
                status="SUCCEEDED",
            )
            self._notify(producer, id_, "COMPLETED")
        except Exception as exc:  # shown by the test
            self.error = f"{type(exc).__name__}: {exc}"
