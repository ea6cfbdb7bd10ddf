"""Role `backfill`: re-emit the latest record of each named key from a retained or compacted source topic.

Run as a Kubernetes Job (Backfill's `topic` source). It reads the source topics up to their end offsets at
the start (a bounded read with `assign()`, no consumer group), keeps the latest record of each key in the
key set (and matching the rest of the filter, if any), then produces those records to the target topic.
Keys go where the producer's partitioner (murmur2, as Java clients) puts them, so per-key order holds in the
target. A key whose latest record is a tombstone is reported as deleted and not re-emitted (a deleted entity
has no state to re-emit). Named keys that were not found are listed by name.

The result (counts, missing and deleted keys, and per target partition the first and last produced offset,
which is what the completion barrier waits for) goes to the log, to `REPRISE_RESULT_FILE` when set, and to
the handover topic as the replay id's `result` record.
"""

from __future__ import annotations

import dataclasses

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ..connection import kafka_clients
from ..connection.schema_registry import filter_schemas
from ..protocol.filters import RecordFilter, Undecodable
from ..protocol.wire import ResultInfo
from ..topic.handover_topic import HandoverTopic, now_ms
from .metrics import WorkerMetrics
from ..settings import WorkerSettings

log = logging.getLogger("replay_worker.backfill")


@dataclass
class Latest:
    """The newest record of one key seen so far."""

    offset: int
    topic: str
    partition: int
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None


class LatestByKey:
    """Keeps the latest matching record per key. Pure; fed in partition order (a key lives in one partition
    of a topic, so "latest" is the highest offset; across topics the last one fed wins)."""

    def __init__(self, keys: set[bytes], record_filter: RecordFilter) -> None:
        self.keys = keys
        self.filter = record_filter
        self.latest: dict[bytes, Latest] = {}
        self.undecodable = 0

    def offer(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        if key is None or key not in self.keys:
            return
        if value is not None:
            try:
                if not self.filter.matches(key, headers, value):
                    return
            except Undecodable:
                self.undecodable += 1
                return
        current = self.latest.get(key)
        if current is None or current.topic != topic or offset > current.offset:
            self.latest[key] = Latest(offset, topic, partition, value, headers)

    def summary(self) -> tuple[dict[bytes, Latest], list[str], list[str]]:
        """(records to re-emit, missing key names, deleted key names)."""
        present = {k: v for k, v in self.latest.items() if v.value is not None}
        deleted = sorted(k.decode("utf-8", "replace") for k, v in self.latest.items() if v.value is None)
        missing = sorted(k.decode("utf-8", "replace") for k in self.keys - set(self.latest))
        return present, missing, deleted


def run_backfill(settings: WorkerSettings, config: Mapping[str, str], metrics: WorkerMetrics, stop_hooks: list) -> int:
    stopped = {"flag": False}
    stop_hooks.append(lambda: stopped.__setitem__("flag", True))
    base = kafka_clients.connection(settings.bootstrap_servers, config, f"reprise-{settings.member_name}")
    keys = {k.encode("utf-8") for k in settings.filter.all_keys()}
    spec_without_keys = dataclasses.replace(settings.filter, keys=None, keys_file=None)
    collector = LatestByKey(keys, RecordFilter.compile(spec_without_keys, filter_schemas(spec_without_keys)))
    consumer = Consumer(kafka_clients.reader_config(base))
    ends: dict[tuple[str, int], int] = {}
    try:
        metadata = consumer.list_topics(timeout=30)
        assignment = []
        for topic in settings.topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                raise RuntimeError(f"source topic {topic} does not exist")
            for p in sorted(found.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
                if high > low:
                    ends[(topic, p)] = high
                    assignment.append(TopicPartition(topic, p, low))
        consumer.assign(assignment)
        remaining = set(ends)
        while remaining and not stopped["flag"]:
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                key = (message.topic(), message.partition())
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF and message.offset() >= ends.get(key, 0):
                        remaining.discard(key)
                    elif error.fatal():
                        raise KafkaException(error)
                    continue
                if key not in remaining:
                    continue
                if message.offset() >= ends[key]:
                    remaining.discard(key)
                    consumer.pause([TopicPartition(*key)])
                    continue
                metrics.consumed.inc()
                collector.offer(
                    message.topic(),
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                    message.headers(),
                )
                if message.offset() + 1 >= ends[key]:
                    remaining.discard(key)
    finally:
        consumer.close()
    if stopped["flag"]:
        log.warning("backfill stopped before it finished reading; nothing was produced")
        return 1
    present, missing, deleted = collector.summary()
    produced = _produce(base, settings.forward_topic or "", present)
    metrics.delivered.inc(sum(p["count"] for p in produced.values()))
    result: dict[str, Any] = {
        "replay_id": settings.replay_id,
        "source_topics": list(settings.topics),
        "target_topic": settings.forward_topic,
        "keys_requested": len(keys),
        "found": len(present),
        "produced": sum(p["count"] for p in produced.values()),
        "missing": missing,
        "deleted": deleted,
        "undecodable": collector.undecodable,
        "partitions": {str(p): v for p, v in sorted(produced.items())},
        "source_end_offsets": {f"{t}[{p}]": o for (t, p), o in sorted(ends.items())},
    }
    log.info(
        "backfill done",
        extra={
            "result": {k: v for k, v in result.items() if k not in ("missing", "deleted")},
            "missing_count": len(missing),
            "deleted_count": len(deleted),
        },
    )
    text = json.dumps(result, separators=(",", ":"))
    print(text, flush=True)
    if settings.result_file:
        try:
            Path(settings.result_file).write_text(text)
        except OSError as exc:
            log.warning("cannot write the result file", extra={"path": settings.result_file, "error": exc.strerror})
    handover = HandoverTopic(settings.bootstrap_servers, settings.handover_topic, config)
    try:
        handover.ensure(create=True)
        handover.publish(ResultInfo(settings.replay_id, result, now_ms()))
    finally:
        handover.close()
    return 0


def _produce(base: Mapping[str, Any], target: str, records: dict[bytes, Latest]) -> dict[int, dict[str, int]]:
    """Produce the records; per target partition the first and last offset and the count."""
    producer = Producer(kafka_clients.producer_config(base, **{"partitioner": "murmur2_random", "linger.ms": 5}))
    produced: dict[int, dict[str, int]] = {}
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            failures.append(error.str())
            return
        entry = produced.setdefault(
            message.partition(), {"first": message.offset(), "last": message.offset(), "count": 0}
        )
        entry["first"] = min(entry["first"], message.offset())
        entry["last"] = max(entry["last"], message.offset())
        entry["count"] += 1

    for key, latest in sorted(records.items()):
        args: dict[str, Any] = {"topic": target, "key": key, "value": latest.value, "on_delivery": delivered}
        if latest.headers:
            args["headers"] = latest.headers
        while True:
            try:
                producer.produce(**args)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    deadline = time.monotonic() + 120
    while producer.flush(1.0):
        if time.monotonic() > deadline:
            raise RuntimeError("backfill records not acknowledged within 120s")
    if failures:
        raise RuntimeError(f"producing backfill records failed: {failures[0]}")
    return produced
