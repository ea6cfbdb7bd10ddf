"""Where matching records go: the service's handler in batches, or a target topic; and poison records.

- `handler`: a Python entry point `package.module:function`, called with a list of confluent_kafka Messages
  (the same objects the service's own consumer loop handles, so one function can serve both groups).
- `forward`: each record produced to the target topic with its key, value, headers and timestamp. Partition
  mapping: when the target has as many partitions as every source topic, a record keeps its partition
  number; otherwise the key decides, with the murmur2 partitioner that Java producers use, so keys land where
  the service's other producers put them. The producer is idempotent (no duplicates from retries). With
  `transactional`, records, dead letters and the consumed offsets commit in one transaction per batch
  (`send_offsets_to_transaction`): the copy is exactly-once.
- Poison records (the filter cannot decode them, or the handler keeps raising): to the dead-letter topic
  when one is set, else counted and skipped. Never a crash loop.

A batch's offsets are committed only after its records are durable (`checkpoint`): at-least-once, with the
batches not yet committed as the duplicate window after a crash (see `consumer`).
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from ..connection import kafka_clients

log = logging.getLogger("replay_worker.delivery")

PartitionMapping = Literal["same", "key"]
Handler = Callable[[list[Message]], Any]

#: Headers a dead letter carries besides the record's own, saying where it came from and why.
DLQ_HEADERS = (
    "reprise.error",
    "reprise.replay",
    "reprise.source.topic",
    "reprise.source.partition",
    "reprise.source.offset",
)


class DeliveryError(RuntimeError):
    """Records could not be made durable; the batch must not be committed (the worker restarts from the
    last committed offsets)."""


class HandlerLoadError(ValueError):
    """`REPRISE_HANDLER` does not name an importable callable."""


# ---------------------------------------------------------------------------------------------- pure parts


def choose_partition_mapping(source_partitions: Mapping[str, int], target_partitions: int) -> PartitionMapping:
    """`same` when every source topic has the target's partition count, else `key`."""
    if source_partitions and all(count == target_partitions for count in source_partitions.values()):
        return "same"
    return "key"


def forward_args(
    topic: str,
    partition: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    timestamp: tuple[int, int],
    target: str,
    mapping: PartitionMapping,
) -> dict[str, Any]:
    """The `Producer.produce` arguments that copy one record to `target`."""
    args: dict[str, Any] = {"topic": target, "value": value, "key": key}
    if headers:
        args["headers"] = list(headers)
    ts_type, ts = timestamp
    if ts_type != 0 and ts >= 0:  # 0 = TIMESTAMP_NOT_AVAILABLE
        args["timestamp"] = ts
    if mapping == "same":
        args["partition"] = partition
    return args


def dead_letter_args(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    timestamp: tuple[int, int],
    dlq_topic: str,
    replay_id: str,
    reason: str,
) -> dict[str, Any]:
    """The `produce` arguments of a dead letter: the record as it was, plus where it came from and why."""
    own = [h for h in (headers or []) if h[0] not in DLQ_HEADERS]
    extra = [
        ("reprise.error", reason[:1000].encode("utf-8", "replace")),
        ("reprise.replay", replay_id.encode()),
        ("reprise.source.topic", topic.encode()),
        ("reprise.source.partition", str(partition).encode()),
        ("reprise.source.offset", str(offset).encode()),
    ]
    args = forward_args(topic, partition, key, value, own + extra, timestamp, dlq_topic, "key")
    return args


def load_handler(spec: str) -> Handler:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HandlerLoadError(f"REPRISE_HANDLER {spec}: cannot import {module_name} ({exc})") from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise HandlerLoadError(f"REPRISE_HANDLER {spec}: {module_name} has no {attribute}")
    if not callable(target):
        raise HandlerLoadError(f"REPRISE_HANDLER {spec}: {attribute} is not callable")
    return target


# ---------------------------------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    delivered: int = 0
    dead_lettered: int = 0
    poison_skipped: int = 0


def _describe(message: Message) -> str:
    return f"{message.topic()}[{message.partition()}]@{message.offset()}"


class DeadLetters:
    """Poison records: to the dead-letter topic when there is one, else counted and skipped."""

    def __init__(self, replay_id: str, dlq_topic: str | None, producer: Producer | None) -> None:
        self.replay_id = replay_id
        self.dlq_topic = dlq_topic
        self.producer = producer if dlq_topic else None
        self.failures: list[str] = []

    def handle(self, message: Message, reason: str, outcome: Outcome) -> None:
        if self.producer is None or self.dlq_topic is None:
            outcome.poison_skipped += 1
            log.warning("poison record skipped", extra={"record": _describe(message), "reason": reason[:300]})
            return
        args = dead_letter_args(
            message.topic(),
            message.partition(),
            message.offset(),
            message.key(),
            message.value(),
            message.headers(),
            message.timestamp(),
            self.dlq_topic,
            self.replay_id,
            reason,
        )
        _produce(self.producer, args, self._delivered)
        outcome.dead_lettered += 1
        log.warning(
            "poison record dead-lettered",
            extra={"record": _describe(message), "reason": reason[:300], "dlq_topic": self.dlq_topic},
        )

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self.failures.append(error.str())


def _produce(producer: Producer, args: dict[str, Any], callback: Callable[..., None] | None = None) -> None:
    while True:
        try:
            if callback is None:
                producer.produce(**args)
            else:
                producer.produce(on_delivery=callback, **args)
            return
        except BufferError:
            # The local queue is full: serve delivery reports until there is room.
            producer.poll(0.05)


def _flush(producer: Producer, timeout: float, failures: list[str], what: str) -> None:
    remaining = producer.flush(timeout)
    if remaining:
        raise DeliveryError(f"{remaining} {what} record(s) not acknowledged within {timeout:.0f}s")
    if failures:
        first = failures[0]
        failures.clear()
        raise DeliveryError(f"producing {what} records failed: {first}")


# ---------------------------------------------------------------------------------------------- deliveries


class Delivery:
    """Hands a batch of matching records on (`deliver`), then makes it durable and commits the consumed
    offsets (`checkpoint`)."""

    transactional = False

    def __init__(self, dead_letters: DeadLetters, timeout: float) -> None:
        self.dead_letters = dead_letters
        self.timeout = timeout

    def deliver(self, records: list[Message]) -> Outcome:
        raise NotImplementedError

    def poison(self, message: Message, reason: str, outcome: Outcome) -> None:
        self.dead_letters.handle(message, reason, outcome)

    def in_flight(self) -> bool:
        """Records handed on but not yet durable (a checkpoint now would wait for them)."""
        return False

    def checkpoint(self, consumer: Consumer, offsets: list[TopicPartition], asynchronous: bool = False) -> None:
        """Make the delivered records durable, then commit `offsets` (asynchronously when asked: a batch's
        commit need not hold up the next batch, the records it covers are durable already)."""
        self._make_durable()
        if offsets:
            consumer.commit(offsets=offsets, asynchronous=asynchronous)

    def _make_durable(self) -> None:
        if self.dead_letters.producer is not None:
            _flush(self.dead_letters.producer, self.timeout, self.dead_letters.failures, "dead-letter")

    def close(self) -> None:
        if self.dead_letters.producer is not None:
            self.dead_letters.producer.flush(self.timeout)


class HandlerDelivery(Delivery):
    """Calls the service's handler with each batch. When the batch call raises, each record is retried on its
    own (`retries` times) to find the poison ones; the others are delivered."""

    def __init__(
        self, handler: Handler, dead_letters: DeadLetters, retries: int, timeout: float = 60.0, backoff: float = 0.2
    ) -> None:
        super().__init__(dead_letters, timeout)
        self.handler = handler
        self.retries = retries
        self.backoff = backoff

    def deliver(self, records: list[Message]) -> Outcome:
        outcome = Outcome()
        if not records:
            return outcome
        try:
            self.handler(records)
            outcome.delivered = len(records)
            return outcome
        except Exception as exc:  # the handler is the service's code: any failure is possible
            log.info(
                "handler raised on a batch, retrying record by record",
                extra={"records": len(records), "error": f"{type(exc).__name__}: {exc}"[:300]},
            )
        for message in records:
            error: Exception | None = None
            for attempt in range(self.retries + 1):
                try:
                    self.handler([message])
                    error = None
                    break
                except Exception as exc:
                    error = exc
                    if attempt < self.retries:
                        time.sleep(self.backoff * (attempt + 1))
            if error is None:
                outcome.delivered += 1
            else:
                self.poison(message, f"handler raised {type(error).__name__}: {error}", outcome)
        return outcome


class ForwardDelivery(Delivery):
    """Produces each record to the target topic with an idempotent producer."""

    def __init__(
        self,
        base: Mapping[str, Any],
        target: str,
        mapping: PartitionMapping,
        dead_letters_topic: str | None,
        replay_id: str,
        timeout: float = 60.0,
    ) -> None:
        self.producer = Producer(self._config(base))
        super().__init__(DeadLetters(replay_id, dead_letters_topic, self.producer), timeout)
        self.target = target
        self.mapping = mapping
        self.failures: list[str] = []

    #: Throughput defaults; settings of the same name in the Kafka config folder win over them. lz4: a copy
    #: is written in full once more, and on a broker that shares its CPUs with the worker, validating and
    #: storing compressed batches took about a third less broker time than plain ones (librdkafka compresses
    #: in its own thread, off the GIL). Consumers decompress transparently.
    TUNING = {"linger.ms": 5, "batch.size": 1048576, "compression.type": "lz4"}

    def _config(self, base: Mapping[str, Any]) -> dict[str, Any]:
        return kafka_clients.producer_config(
            {**self.TUNING, **base},
            **{
                # Java's partitioner, so keys go where the service's Java/Go producers put them.
                "partitioner": "murmur2_random",
                # Only failures call back into Python: a callback per record would cost more than the produce.
                "delivery.report.only.error": True,
                "on_delivery": self._delivered,
            },
        )

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self.failures.append(error.str())

    def deliver(self, records: list[Message]) -> Outcome:
        # Once per record: the same arguments as `forward_args`, without building a dict for each.
        produce = self.producer.produce
        target = self.target
        same = self.mapping == "same"
        for message in records:
            ts_type, ts = message.timestamp()
            try:
                # Every argument positional: (topic, value, key, partition, callback, on_delivery, timestamp,
                # headers). A keyword argument costs a third of the call; None callbacks mean the producer's,
                # a 0 timestamp means now (for a record without one) and None headers none.
                produce(
                    target,
                    message.value(),
                    message.key(),
                    message.partition() if same else -1,
                    None,
                    None,
                    ts if ts_type else 0,
                    message.headers(),
                )
            except BufferError:
                args = forward_args(
                    message.topic(),
                    message.partition(),
                    message.key(),
                    message.value(),
                    message.headers(),
                    message.timestamp(),
                    target,
                    self.mapping,
                )
                _produce(self.producer, args)
        self.producer.poll(0)
        return Outcome(delivered=len(records))

    def _make_durable(self) -> None:
        _flush(self.producer, self.timeout, self.failures, "forwarded")
        super()._make_durable()

    def in_flight(self) -> bool:
        self.producer.poll(0)
        return len(self.producer) > 0


class TransactionalForwardDelivery(ForwardDelivery):
    """Forwarding exactly-once: per batch one transaction holds the copies, the dead letters and the consumed
    offsets. A crash aborts the open transaction; the batch is read again and copied once."""

    transactional = True

    def in_flight(self) -> bool:
        return False  # every batch ends with its transaction

    def __init__(
        self,
        base: Mapping[str, Any],
        target: str,
        mapping: PartitionMapping,
        dead_letters_topic: str | None,
        replay_id: str,
        member: str,
        timeout: float = 60.0,
    ) -> None:
        self._transactional_id = f"reprise-forward-{replay_id}-{member}"
        super().__init__(base, target, mapping, dead_letters_topic, replay_id, timeout)
        self.producer.init_transactions(timeout)
        self.in_transaction = False

    def _config(self, base: Mapping[str, Any]) -> dict[str, Any]:
        config = super()._config(base)
        config["transactional.id"] = self._transactional_id
        config["transaction.timeout.ms"] = 60000
        return config

    def deliver(self, records: list[Message]) -> Outcome:
        self._begin()
        return super().deliver(records)

    def poison(self, message: Message, reason: str, outcome: Outcome) -> None:
        self._begin()
        super().poison(message, reason, outcome)

    def _begin(self) -> None:
        if not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True

    def checkpoint(self, consumer: Consumer, offsets: list[TopicPartition], asynchronous: bool = False) -> None:
        # A transaction's commit is always waited for: its records and offsets become visible together.
        if not offsets and not self.in_transaction:
            return
        self._begin()
        try:
            if offsets:
                self.producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), self.timeout)
            self.producer.commit_transaction(self.timeout)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.txn_requires_abort():
                try:
                    self.producer.abort_transaction(self.timeout)
                except KafkaException:
                    pass
            raise DeliveryError(f"committing the forward transaction failed: {error.str()}") from None
        finally:
            self.in_transaction = False
        if self.failures:
            first = self.failures[0]
            self.failures.clear()
            raise DeliveryError(f"producing forwarded records failed: {first}")

    def close(self) -> None:
        if self.in_transaction:
            try:
                self.producer.abort_transaction(self.timeout)
            except KafkaException:
                pass
            self.in_transaction = False
        self.producer.flush(self.timeout)
