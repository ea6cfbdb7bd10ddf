"""The handover topic in Kafka: read it, publish to it, tail it, clean it up. The operator's API.

The topic is compacted and has one partition, so every record of every replay is in one total order (a
`handover` record is never read before the `start` record it depends on). It is read with
`read_committed`, because the bootstrap writes the `replay` and `start` records in a transaction together
with the replay group's start offsets (see `bootstrap`): a reader sees both or neither.

For the operator:

    topic = HandoverTopic(bootstrap_servers, "reprise.handover", client_config)
    topic.ensure()                                   # create it (compacted, 1 partition) if missing
    state = topic.read_replay(replay_id)             # -> ReplayHandover (per-partition state)
    view = topic.read()                              # -> HandoverView of every replay
    topic.force_handover(replay_id, {("orders", 0): 1234})   # abort: H = the stopped replay's offsets
    topic.tombstone(replay_id)                       # cleanup: every record of the replay id
    topic.close()

`HandoverFollower` tails the topic in a thread and keeps a view current (the guard uses it; the operator
may use it instead of re-reading the topic on every poll).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType
from prometheus_client import Counter

from ..connection import kafka_clients
from ..connection.schema_registry import registry_schemas
from ..protocol import handover_topic_settings
from ..protocol.handover import HandoverView, ReplayHandover
from ..protocol.wire import HandoverInfo, HandoverRecord, TopicPartitionKey, decode_key, encode

log = logging.getLogger("replay_worker.handover_topic")

DEFAULT_TOPIC = "reprise.handover"

#: Handover-topic records a follower could not apply, by topic and reason: the wire code of a malformed record
#: (`malformed-key`, `too-large`, `malformed-value`, ...) or `apply-error` for an error while applying one.
#: In the default registry, which a guarded service exposes with its own metrics; the operator passes its own.
FOLLOWER_RECORDS_FAILED = Counter(
    "reprise_handover_follower_records_failed",
    "Handover-topic records a follower could not apply (malformed, or an error applying them); the records after"
    " them are applied",
    ["topic", "reason"],
)
OFFSET_BEGINNING = -2


def assign_from_start(consumer: Consumer, topic: str, timeout: float) -> None:
    """Assign the handover topic's partition from its beginning, its metadata fetched first.

    A new consumer assigned a partition it has no metadata for waits on librdkafka's retry timer (about
    500 ms) before its first fetch; asking for the topic's metadata first makes the first fetch go at once.
    A bootstrap reads the topic twice, so that was a second of every replica's start (measured on the local
    broker: a read of 50 records 0.55 s -> 0.10 s)."""
    consumer.list_topics(topic, timeout=timeout)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])


class HandoverTopicError(RuntimeError):
    """The handover topic is missing, misconfigured or unreachable; the message says which and what to do."""


def now_ms() -> int:
    return int(time.time() * 1000)


class HandoverTopic:
    """Blocking reads and durable writes of the handover topic."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = DEFAULT_TOPIC,
        config: Mapping[str, str] | None = None,
        *,
        timeout: float = 30.0,
        client_id: str = "reprise-handover",
        reader_group: str | None = None,
    ) -> None:
        self.topic = topic
        self.timeout = timeout
        #: The group id its readers carry, never joined (`kafka_clients.reader_config`).
        self.reader_group = reader_group
        self._base = kafka_clients.connection(bootstrap_servers, config, client_id)
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None

    # -- clients, made on first use

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            # librdkafka's admin client asks for metadata as a producer does, and so would have the broker create
            # a missing topic with its defaults (cleanup.policy=delete: refused by `ensure` ever after) whenever a
            # guard or the operator looked at a namespace's topic before the operator made it.
            config = {**kafka_clients.admin_config(self._base), "allow.auto.create.topics": False}
            self._admin = AdminClient(config)
        return self._admin

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(kafka_clients.producer_config(self._base, **{"linger.ms": 0}))
        return self._producer

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(self.timeout)
            producer.close()
        self._admin = None

    # -- the topic itself

    def ensure(self, *, create: bool = True) -> None:
        """Check the topic exists with one partition and settings that keep handover state (refused otherwise,
        naming the setting); create it with `handover_topic_settings.REQUIRED` when missing and allowed."""
        metadata = self.admin.list_topics(topic=self.topic, timeout=self.timeout)
        found = metadata.topics.get(self.topic)
        missing = found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART)
        if missing:
            if not create:
                raise HandoverTopicError(
                    f"handover topic {self.topic} does not exist: create it (1 partition, cleanup.policy=compact; "
                    f"docs/security.md gives its settings) or let the operator create it"
                )
            futures = self.admin.create_topics(
                [
                    NewTopic(
                        self.topic,
                        num_partitions=1,
                        replication_factor=-1,
                        config=dict(handover_topic_settings.REQUIRED),
                    )
                ],
                request_timeout=self.timeout,
            )
            try:
                futures[self.topic].result(timeout=self.timeout)
                log.info("created the handover topic", extra={"topic": self.topic})
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise HandoverTopicError(
                        f"cannot create handover topic {self.topic}: {exc.args[0].str()}"
                    ) from None
            self._wait_for_leader()
            return
        if found.error is not None:
            raise HandoverTopicError(f"handover topic {self.topic}: {found.error.str()}")
        if len(found.partitions) != 1:
            raise HandoverTopicError(
                f"handover topic {self.topic} has {len(found.partitions)} partitions; the protocol needs exactly 1 "
                f"(one total order of every replay's records): recreate it with 1 partition"
            )
        self._check_settings()

    def _check_settings(self) -> None:
        """Refuse a topic whose settings would lose or break handover state (`handover_topic_settings`)."""
        resource = ConfigResource(ResourceType.TOPIC, self.topic)
        futures = self.admin.describe_configs([resource], request_timeout=self.timeout)
        try:
            entries = futures[resource].result(timeout=self.timeout)
        except KafkaException as exc:
            raise HandoverTopicError(
                f"cannot read the settings of handover topic {self.topic}: {exc.args[0].str()} (the principal needs "
                f"DescribeConfigs on it, docs/security.md)"
            ) from None
        config = {name: str(entry.value) for name, entry in entries.items() if entry.value is not None}
        reason = handover_topic_settings.refusal(self.topic, config)
        if reason is not None:
            raise HandoverTopicError(reason)

    def _wait_for_leader(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            found = self.admin.list_topics(topic=self.topic, timeout=self.timeout).topics.get(self.topic)
            if (
                found is not None
                and found.error is None
                and found.partitions
                and all(p.leader >= 0 for p in found.partitions.values())
            ):
                return
            time.sleep(0.1)
        raise HandoverTopicError(f"handover topic {self.topic} has no leader after {self.timeout:.0f}s")

    def readable_end(self) -> int | None:
        """The offset a `read_committed` reader reaches at the end now (the last stable offset), or None
        when the topic does not exist (then no replay exists either)."""
        metadata = self.admin.list_topics(topic=self.topic, timeout=self.timeout)
        found = metadata.topics.get(self.topic)
        if found is None or found.error is not None:
            return None
        futures = self.admin.list_offsets(
            {TopicPartition(self.topic, 0): OffsetSpec.latest()},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=self.timeout,
        )
        (future,) = futures.values()
        return int(future.result(timeout=self.timeout).offset)

    # -- reads

    def read(self) -> HandoverView:
        """Every replay's state, read from the beginning to the readable end."""
        view = HandoverView(registry_schemas)
        end = self.readable_end()
        if not end:
            return view
        # The read ends at the end offset, which a transaction's commit marker can hold: no record reaches it,
        # only the partition-EOF event does, and that comes with a fetch that returned nothing, which the broker
        # holds for fetch.wait.max.ms (500 ms by default) before answering. A bounded read asks it not to wait.
        # Records at or after the end are not applied, although a consume call may return them (transactions
        # committed since the end was taken): the end is the last stable offset, a transaction boundary, while a
        # consume call's batch (at most 1000 records) may stop inside a transaction. Applying such a batch made
        # a replay look bootstrapped with only some of its `start` records, and its worker planned only those
        # partitions (issue 27: team B's replay that never read its partition 2).
        consumer = Consumer(kafka_clients.reader_config(self._base, self.reader_group, **{"fetch.wait.max.ms": 10}))
        try:
            assign_from_start(consumer, self.topic, self.timeout)
            deadline = time.monotonic() + self.timeout
            position = 0
            while position < end:
                if time.monotonic() > deadline:
                    raise HandoverTopicError(
                        f"reading handover topic {self.topic} to offset {end} took over "
                        f"{self.timeout:.0f}s (reached {position})"
                    )
                for message in consumer.consume(1000, 0.05):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            position = max(position, message.offset())
                            continue
                        if error.fatal():
                            raise HandoverTopicError(f"reading handover topic {self.topic}: {error.str()}")
                        continue
                    position = max(position, message.offset() + 1)
                    if message.offset() < end:
                        view.apply(message.key(), message.value())
        finally:
            consumer.close()
        return view

    def read_replay(self, replay_id: str) -> ReplayHandover:
        """One replay's state: per partition start S, handover H, guard progress and acknowledgement."""
        return self.read().replay(replay_id)

    # -- writes

    def publish(self, *records: HandoverRecord) -> None:
        """Write records and return once Kafka has them durably (acks=all); raise otherwise."""
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: Any) -> None:
            if error is not None:
                failures.append(error.str())

        for record in records:
            key, value = encode(record)
            self._produce(key, value, delivered)
        self._flush(failures)

    def _produce(self, key: bytes, value: bytes | None, callback: Callable[..., None]) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value=value, key=key, partition=0, on_delivery=callback)
                return
            except BufferError:
                self.producer.poll(0.1)

    def _flush(self, failures: list[str]) -> None:
        remaining = self.producer.flush(self.timeout)
        if remaining:
            raise HandoverTopicError(
                f"{remaining} handover record(s) not acknowledged by Kafka within {self.timeout:.0f}s"
            )
        if failures:
            raise HandoverTopicError(f"writing to handover topic {self.topic} failed: {failures[0]}")

    def force_handover(
        self, replay_id: str, offsets: Mapping[TopicPartitionKey, int], *, by: str = "operator", reason: str = "forced"
    ) -> list[HandoverInfo]:
        """Publish H for every listed partition that has none yet; return what was published.

        For aborting or finishing a replay from outside: stop the replay group first (scale it to zero) and
        pass its committed offsets, so that H is exactly what the replay processed."""
        state = self.read_replay(replay_id)
        records = []
        for (topic, partition), offset in sorted(offsets.items()):
            part = state.partitions.get((topic, partition))
            if part is None or part.start is None or part.handover is not None:
                continue
            records.append(
                HandoverInfo(replay_id, topic, partition, max(int(offset), part.start.offset), reason, by, now_ms())
            )
        if records:
            self.publish(*records)
        return records

    def tombstone(self, replay_id: str) -> int:
        """Delete every record of a replay id (compaction then drops them); returns how many keys."""
        # The `replay` record goes first: without it the replay is inactive for every guard at once, so no
        # guard ever sees a start without its handover offset in between (which would make it skip again).
        keys = sorted(self.read_replay(replay_id).live_keys, key=lambda k: (decode_key(k).kind != "replay", k))
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: Any) -> None:
            if error is not None:
                failures.append(error.str())

        for key in keys:
            self._produce(key, None, delivered)
        self._flush(failures)
        return len(keys)


T = TypeVar("T")


class HandoverFollower(Generic[T]):
    """Tails the handover topic in a thread; keeps a `HandoverView` and a snapshot derived from it.

    - `snapshot` / `version`: what `derive(view)` returned after the last change (read without locks).
    - `request_sync()` / `synced(ticket)`: a barrier. `synced` turns true once the view includes everything
      that was readable in the topic when the ticket was taken. The guard takes one on every assignment,
      so a live replica never processes a partition with an older view than the replica before it had.
    - `on_tick`: called in the thread about every `interval` seconds (the guard checks acknowledgements).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        config: Mapping[str, str] | None,
        derive: Callable[[HandoverView], T],
        *,
        interval: float = 0.1,
        on_tick: Callable[[], None] | None = None,
        client_id: str = "reprise-handover-follower",
        failures: Counter = FOLLOWER_RECORDS_FAILED,
        reader_group: str | None = None,
    ) -> None:
        self.topic = topic
        self._failures = failures
        self._derive = derive
        self._interval = interval
        self._on_tick = on_tick
        self._base = kafka_clients.connection(bootstrap_servers, config, client_id)
        self._reader_group = reader_group
        self._handover = HandoverTopic(bootstrap_servers, topic, config, client_id=client_id, reader_group=reader_group)
        self._lock = threading.Lock()
        self._view = HandoverView(registry_schemas)
        self.snapshot: T = derive(self._view)
        self.version = 0
        self._requested = 0
        self._served = 0
        self._targets: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def start(self) -> "HandoverFollower[T]":
        self._thread = threading.Thread(target=self._run, name="reprise-handover-follower", daemon=True)
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Ask the thread to end after its current read, without waiting for it (`stop` then waits less)."""
        self._stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._handover.close()

    @contextmanager
    def locked_view(self) -> Iterator[HandoverView]:
        with self._lock:
            yield self._view

    def request_sync(self) -> int:
        with self._lock:
            self._requested += 1
            return self._requested

    def synced(self, ticket: int) -> bool:
        return self._served >= ticket

    def wait_synced(self, ticket: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.synced(ticket):
            if time.monotonic() > deadline or self._thread is None:
                return False
            time.sleep(0.01)
        return True

    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        """One message, in its own `try`: the consumer has already moved past the whole batch, so an error
        that escaped here would lose every record after this one (a `handover` among them: a guard that
        never learns H). A malformed record is the view's to judge (HANDOVER.md section 2); an error while
        applying one is logged and counted, and the next record is applied."""
        try:
            with self._lock:
                code = self._view.apply(key, value)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the records after it must be applied
            code = "apply-error"
            log.warning(
                "handover record not applied",
                extra={"topic": self.topic, "offset": offset, "error": f"{type(exc).__name__}: {exc}"},
            )
        if code is not None:
            self._failures.labels(self.topic, code).inc()

    def _run(self) -> None:
        consumer: Consumer | None = None
        position = 0
        assigned = False
        last_tick = 0.0
        last_look = 0.0
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = Consumer(kafka_clients.reader_config(self._base, self._reader_group))
                with self._lock:
                    requested = self._requested
                if requested > self._served and not any(t == requested for t, _ in self._targets):
                    end = self._handover.readable_end()
                    if end is None:
                        # No handover topic: no replay exists, so an empty view is current.
                        self._targets.append((requested, 0))
                    else:
                        self._targets.append((requested, end))
                        if not assigned:
                            assign_from_start(consumer, self.topic, self._handover.timeout)
                            assigned = True
                if not assigned and time.monotonic() - last_look >= 5.0:
                    # No handover topic yet (no replay ever ran): look again now and then, not on every turn.
                    last_look = time.monotonic()
                    if self._handover.readable_end() is not None:
                        assign_from_start(consumer, self.topic, self._handover.timeout)
                        assigned = True
                changed = False
                if assigned:
                    for message in consumer.consume(500, self._interval):
                        error = message.error()
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                position = max(position, message.offset())
                            elif error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                                log.warning("handover topic read error", extra={"error": error.str()})
                            continue
                        self._apply(message.key(), message.value(), message.offset())
                        changed = True
                        position = max(position, message.offset() + 1)
                else:
                    self._stop.wait(self._interval)
                if changed:
                    with self._lock:
                        self.snapshot = self._derive(self._view)
                        self.version += 1
                for ticket, target in list(self._targets):
                    if position >= target:
                        self._served = max(self._served, ticket)
                        self._targets.remove((ticket, target))
                self.error = None
                if self._on_tick is not None and time.monotonic() - last_tick >= self._interval:
                    last_tick = time.monotonic()
                    self._on_tick()
            except Exception as exc:  # the tail must survive broker restarts and transient errors
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning("handover follower error, retrying", extra={"error": self.error})
                self._stop.wait(0.5)
        if consumer is not None:
            consumer.close()
