"""The handover guard: the library a live service embeds around its confluent-kafka consumer loop.

    from replay_worker.guard import GuardedConsumer

    consumer = GuardedConsumer({"bootstrap.servers": ..., "group.id": "accounts", ...})
    consumer.subscribe(["transactions"])
    try:
        while running:
            for message in consumer.consume(500, 1.0):
                if message.error():
                    continue
                apply(message)
                consumer.store_offsets(message)      # or rely on enable.auto.offset.store (the default)
            # enable.auto.commit (the default) commits what was stored; or call consumer.commit()
    finally:
        consumer.close()

`GuardedConsumer` behaves like `confluent_kafka.Consumer` (other methods pass through) with one difference:
while a Handover-mode replay covers one of its partitions, records the replay processes are not returned
(HANDOVER.md has the rules), and commits carry the guard's state in their metadata. Requirements: commit and
store only through this object, and do not call `assign()` from your `on_assign` callback (the guard
assigns, so it can hold new partitions until it knows the current handover state).

With no replay active nothing is done per record: per batch, a look at the handover view and, when automatic
offset storing is on, one `position` and one `store_offsets` call (the guard stores instead of librdkafka, so
it never stores a record it skipped). The guard's own clients (a tail of the handover topic, a producer for
its records) are small and mostly idle.

A partition is held (paused) from its assignment until the guard's view of the handover topic is current, so
a live replica never acts on an older view than the replica before it: if the handover topic cannot be read,
those partitions wait rather than risk processing what a replay covers.

The handover topic is the `handover_topic` argument, else the environment variable `REPRISE_HANDOVER_TOPIC`, else
`reprise.handover`. It is one per namespace: the live Deployment sets `POD_NAMESPACE` from the downward API and
`REPRISE_HANDOVER_TOPIC=reprise.handover.$(POD_NAMESPACE)`, the topic the operator gives the replay pods
(docs/security.md section 8b).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from itertools import compress, groupby
from typing import Any, Callable, Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from ..connection import kafka_clients
from .guard_book import GuardBook, Store
from ..protocol.commit_marks import CommitMark
from ..protocol.filters import SchemaUnavailable
from ..protocol.guard_rules import ActiveHandover, ack_due
from ..protocol.handover import HandoverView
from ..protocol.wire import AckInfo, GuardInfo, encode
from ..topic.handover_topic import DEFAULT_TOPIC, HandoverFollower, now_ms

log = logging.getLogger("replay_worker.guard")

#: Longest inner wait of `consume` while the service blocks in it: a changed handover view (a new handover
#: offset) is acted on between two waits, and its floor commit and acknowledgement are what a replay's end waits
#: for. At 0.5 s that was about a quarter of a second of every end-to-end replay (benchmarks/end_to_end); a
#: service that is busy never waits here, and one that is idle makes ten cheap calls a second.
WAIT_SLICE_S = 0.1
#: Seconds a partition stays paused while the schema registry cannot be reached, before its record is read and
#: judged again (HANDOVER.md section 4, "Schemas": a wait, never a guess).
REGISTRY_RETRY_S = 1.0

TopicPartitionKey = tuple[str, int]

#: Message's own methods, unbound (a tenth of `methodcaller`'s cost per record; see consumer.py).
_error_of = Message.error
_topic_of = Message.topic
_partition_of = Message.partition
_offset_of = Message.offset
_value_of = Message.value

#: Settings of the service's consumer that the guard's own clients (reader, producer, admin) reuse.
_CONNECTION_PREFIXES = (
    "bootstrap.servers",
    "security.protocol",
    "sasl.",
    "ssl.",
    "ssl_",
    "oauthbearer",
    "client.dns.lookup",
    "broker.address.family",
    "socket.",
    "reconnect.",
    "api.version",
    "broker.version.fallback",
    "logger",
    "client.rack",
)


def connection_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a consumer's config that says where Kafka is and how to authenticate."""
    return {k: v for k, v in config.items() if k.startswith(_CONNECTION_PREFIXES)}


@dataclass
class GuardStats:
    """Counts for the service's own metrics."""

    skipped: int = 0
    handed: int = 0
    seeks: int = 0
    acks: int = 0
    #: Records held back because the schema registry could not be reached (judged again later).
    registry_waits: int = 0


class GuardedConsumer:
    """A confluent-kafka consumer for a live service, guarded for handovers (see the module docstring)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        handover_topic: str | None = None,
        member: str | None = None,
        progress_interval: float = 1.0,
    ) -> None:
        if "group.id" not in config:
            raise ValueError("GuardedConsumer needs group.id: the guard acts for one live group")
        self.group_id = str(config["group.id"])
        # The live Deployment names its namespace's topic in REPRISE_HANDOVER_TOPIC (the operator gives its replay
        # pods the same one); the one-per-cluster default is for clusters that keep one topic.
        handover_topic = handover_topic or os.environ.get("REPRISE_HANDOVER_TOPIC") or DEFAULT_TOPIC
        self.handover_topic = handover_topic
        self.member = member or os.environ.get("HOSTNAME") or socket.gethostname()
        self._auto_store = str(config.get("enable.auto.offset.store", True)).lower() not in ("false", "0")
        strategy = str(config.get("partition.assignment.strategy", ""))
        self._cooperative = "cooperative" in strategy
        inner = dict(config)
        # The guard stores offsets itself, so a skipped record is never stored by librdkafka on its own.
        inner["enable.auto.offset.store"] = False
        self._consumer = Consumer(inner)
        connection = connection_settings(config)
        bootstrap = str(connection.pop("bootstrap.servers"))
        connection.pop("logger", None)
        self._connection = {k: str(v) for k, v in connection.items()}
        base = kafka_clients.connection(bootstrap, self._connection, f"reprise-guard-{self.member}")
        self._producer = Producer(kafka_clients.producer_config(base, **{"linger.ms": 5}))
        self._reader_base = base
        self._offsets: kafka_clients.GroupOffsetReader | None = None
        self._book = GuardBook(auto_store=self._auto_store)
        #: Partitions paused because the schema registry could not be reached, and when to read them again.
        self._registry_waits: dict[TopicPartitionKey, float] = {}
        self._pending_handovers: dict[TopicPartitionKey, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._seen_version = -1
        #: The view changed since the last progress step / the pending acknowledgements changed since the last
        #: check: each is then done at once instead of at the next `progress_interval`.
        self._news = False
        self._ack_news = False
        self.progress_interval = progress_interval
        self._last_progress = 0.0
        self.stats = GuardStats()
        group = self.group_id
        self._follower: HandoverFollower[dict[TopicPartitionKey, ActiveHandover]] = HandoverFollower(
            bootstrap,
            handover_topic,
            self._connection,
            lambda view: view.active_for(group),
            interval=0.1,
            on_tick=self._tick,
            client_id=f"reprise-guard-{self.member}-follower",
            reader_group=group,
        ).start()
        self._user_callbacks: dict[str, Callable[..., Any] | None] = {}
        self._last_ack_check = 0.0
        self._closing = False
        self._only_topic: str | None = None

    # -- subscription and rebalances

    def subscribe(
        self,
        topics: list[str],
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> None:
        self._user_callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        # One topic named (not a `^` pattern): every record is of that topic, so a batch's runs are found by
        # partition alone, without reading each record's topic.
        self._only_topic = topics[0] if len(topics) == 1 and not topics[0].startswith("^") else None
        self._consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if partitions and not self._closing:
            # (While closing, close() may serve an assignment that was under way: taken, never read.)
            # Hold the new partitions until the handover view is at least as new as the moment of this
            # assignment: the previous owner may have acted on state this replica has not read yet.
            consumer.pause(partitions)
            committed = self._committed(consumer, partitions)
            ticket = self._follower.request_sync()
            for tp in partitions:
                offset, mark = committed.get((tp.topic, tp.partition), (None, None))
                self._book.assign((tp.topic, tp.partition), offset, mark, ticket)
        callback = self._user_callbacks.get("assign")
        if callback is not None:
            callback(self, partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        callback = self._user_callbacks.get("revoke")
        if callback is not None:
            callback(self, partitions)  # the service commits here, through us, while the state still exists
        self._drop(partitions)
        if not self._cooperative:
            consumer.unassign()

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        callback = self._user_callbacks.get("lost")
        if callback is not None:
            callback(self, partitions)
        self._drop(partitions)

    def _drop(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._book.drop((tp.topic, tp.partition))

    def _committed(
        self, consumer: Consumer, partitions: list[TopicPartition]
    ) -> dict[TopicPartitionKey, tuple[int | None, CommitMark | None]]:
        found = kafka_clients.read_committed(consumer, partitions, "the live group's committed offsets", log)
        return {
            (tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None, CommitMark.decode(tp.metadata))
            for tp in found
        }

    # -- the state the handover topic gives

    def _refresh(self) -> None:
        """Release partitions whose sync is done and apply state changes; seek back where the rules say."""
        follower = self._follower
        version = follower.version
        snapshot = follower.snapshot
        seeks: dict[TopicPartitionKey, int] = {}
        if version != self._seen_version:
            self._seen_version = version
            seeks.update(self._book.apply(snapshot))
            self._news = True
        released = []
        for key, part in self._book.parts.items():
            if part.ticket is not None and follower.synced(part.ticket):
                target = self._book.release(key, snapshot.get(key))
                if target is not None:
                    seeks[key] = target
                released.append(key)
        now = time.monotonic()
        for key, until in list(self._registry_waits.items()):
            if now >= until:
                del self._registry_waits[key]
                if key in self._book.parts and self._book.parts[key].ticket is None:
                    released.append(key)
        for key, target in seeks.items():
            self._seek(key, target)
        if released:
            self._consumer.resume([TopicPartition(t, p) for t, p in released])

    def _seek(self, key: TopicPartitionKey, target: int) -> None:
        rules = self._book.parts[key].rules
        self.stats.seeks += 1
        log.info(
            "guard seeks back to the handover offset",
            extra={
                "topic": key[0],
                "partition": key[1],
                "offset": target,
                "replay_id": rules.replay_id or rules.reread_replay,
            },
        )
        self._consumer.seek(TopicPartition(key[0], key[1], target))

    # -- consuming

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        # The inner wait is cut in slices so that partitions waiting for the handover view are released,
        # and state changes applied, while the service blocks here; the caller's timeout is kept.
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        # Commits the guard makes are for records handed out by earlier calls: by calling again, the service
        # is done with those (the assumption librdkafka's automatic offset store makes). Never for the batch
        # about to be returned, which the service has not processed yet.
        self._progress()
        while True:
            self._refresh()
            left = WAIT_SLICE_S if deadline is None else max(0.0, min(WAIT_SLICE_S, deadline - time.monotonic()))
            messages = self._consumer.consume(num_messages, left)
            if messages:
                break
            self._progress()
            if deadline is not None and time.monotonic() >= deadline:
                return messages
        book = self._book
        if not book.guarded:
            # No replay active: everything goes to the service. Its consumer's positions (one call, whatever
            # the batch size) are what librdkafka's automatic store would have stored.
            positions = self._consumer.position([TopicPartition(t, p) for t, p in book.parts])
            stores = book.handed_unguarded({(tp.topic, tp.partition): tp.offset for tp in positions})
            if stores:
                self._consumer.store_offsets(offsets=[_offset(*s_) for s_ in _fields(stores)])
            return messages
        held: set[TopicPartitionKey] = set()
        touched: set[TopicPartitionKey] = set()
        if any(map(_error_of, messages)):
            result = self._judge_each(messages, held, touched)
        else:
            result = self._judge_runs(messages, held, touched)
        stores = [store for store in (book.after_batch(key) for key in touched) if store is not None]
        if stores:
            self._consumer.store_offsets(offsets=[_offset(*s_) for s_ in _fields(stores)])
        return result

    def _judge_runs(
        self, messages: list[Message], held: set[TopicPartitionKey], touched: set[TopicPartitionKey]
    ) -> list[Message]:
        """The records of a batch without events that go to the service, judged a run of one partition at a
        time where the rules allow (`GuardBook.judge_run`: the filter's value predicate mapped over the run,
        iterated in C), else record by record."""
        book = self._book
        parts = book.parts
        result: list[Message] = []
        only_topic = self._only_topic
        if only_topic is not None:
            runs: Iterable[tuple[str, int, list[Message]]] = (
                (only_topic, partition, list(run)) for partition, run in groupby(messages, _partition_of)
            )
        else:
            runs = (
                (topic, partition, list(run))
                for partition, same_partition in groupby(messages, _partition_of)
                for topic, run in groupby(same_partition, _topic_of)
            )
        for topic, partition, run in runs:
            key = (topic, partition)
            part = parts.get(key)
            handed = None
            if part is not None and part.ticket is None and key not in held:
                try:
                    handed = book.judge_run(key, _RunOffsets(run), list(map(_value_of, run)))
                except SchemaUnavailable:
                    handed = None  # record by record: the records before the one that waits go on
            if handed is None:
                result.extend(self._judge_each(run, held, touched))
                continue
            touched.add(key)
            count = handed.count(True)
            self.stats.handed += count
            self.stats.skipped += len(handed) - count
            result.extend(compress(run, handed))
        return result

    def _judge_each(
        self, messages: list[Message], held: set[TopicPartitionKey], touched: set[TopicPartitionKey]
    ) -> list[Message]:
        """The records that go to the service, judged one by one (events are passed on as they are)."""
        book = self._book
        parts = book.parts
        result: list[Message] = []
        for message in messages:
            if message.error() is not None:
                result.append(message)
                continue
            key = (message.topic(), message.partition())
            part = parts.get(key)
            if part is None or key in held:
                continue  # revoked meanwhile, or held below
            if part.ticket is not None:
                # Fetched before the pause took effect: put it back, it is read again once the view is current.
                self._consumer.seek(TopicPartition(key[0], key[1], message.offset()))
                self._consumer.pause([TopicPartition(key[0], key[1])])
                held.add(key)
                continue
            try:
                handed = book.judge(key, message.offset(), message.key(), message.headers(), message.value())
            except SchemaUnavailable as exc:
                # No verdict without the schema: the record and the rest of its partition wait (read again
                # from here once the pause ends); the service gets neither it nor anything after it.
                self._consumer.seek(TopicPartition(key[0], key[1], message.offset()))
                self._consumer.pause([TopicPartition(key[0], key[1])])
                held.add(key)
                if key not in self._registry_waits:
                    log.warning(
                        "waiting for the schema registry",
                        extra={"topic": key[0], "partition": key[1], "offset": message.offset(), "reason": str(exc)},
                    )
                self._registry_waits[key] = time.monotonic() + REGISTRY_RETRY_S
                self.stats.registry_waits += 1
                continue
            touched.add(key)
            if handed:
                result.append(message)
                self.stats.handed += 1
            else:
                self.stats.skipped += 1
        return result

    def poll(self, timeout: float = -1) -> Message | None:
        messages = self.consume(1, timeout)
        return messages[0] if messages else None

    # -- storing and committing on behalf of the service

    def _marked(self, offsets: list[TopicPartition]) -> list[TopicPartition]:
        stores = [self._book.service_store(tp.topic, tp.partition, tp.offset, tp.metadata) for tp in offsets]
        return [_offset(*s_) for s_ in _fields(stores)]

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        if message is not None:
            offsets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        self._consumer.store_offsets(offsets=self._marked(offsets or []))

    def commit(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None, asynchronous: bool = True
    ) -> Any:
        if message is not None:
            offsets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        if offsets is not None:
            return self._consumer.commit(offsets=self._marked(offsets), asynchronous=asynchronous)
        # What is stored, committed explicitly: while the guard re-reads after a handover, the stored offsets
        # are below the committed ones and a plain commit() would send nothing (librdkafka's _NO_OFFSET).
        stores = self._book.stored_offsets()
        if not stores:
            return self._consumer.commit(asynchronous=asynchronous)
        return self._consumer.commit(offsets=[_offset(*s_) for s_ in _fields(stores)], asynchronous=asynchronous)

    # -- progress: tail commits, guard records, the floor commit of quiet partitions

    def _progress(self) -> None:
        now = time.monotonic()
        self._producer.poll(0)
        book = self._book
        commits = book.take_guard_commits()
        if commits:
            # Every call: the service believes these are committed once it commits, and librdkafka would not
            # send them (see guard_book).
            try:
                self._consumer.commit(offsets=[_offset(*s_) for s_ in _fields(commits)], asynchronous=True)
            except KafkaException as exc:
                log.debug("the guard's own commit failed", extra={"error": str(exc)})
        # A changed handover view (a new H, a replay ending) is acted on at once rather than at the next
        # interval: its floor commit and acknowledgement are what the replay's end waits for.
        if now - self._last_progress < self.progress_interval and not self._news:
            return
        self._last_progress = now
        self._news = False
        for report in book.skip_reports():
            self._publish(
                GuardInfo(
                    report.replay_id,
                    report.topic,
                    report.partition,
                    report.first_skipped,
                    report.seen_until,
                    self.member,
                    now_ms(),
                )
            )
        for problem in book.problem_reports():
            # Once per partition and problem: the guard skips nothing here for this replay (at-least-once).
            log.warning(
                "guard cannot follow the replay on this partition and skips nothing for it",
                extra={
                    "topic": problem.topic,
                    "partition": problem.partition,
                    "replay_id": problem.replay_id,
                    "problem": problem.problem,
                },
            )
            if problem.replay_id:
                self._publish(
                    GuardInfo(
                        problem.replay_id,
                        problem.topic,
                        problem.partition,
                        problem.first_skipped,
                        problem.seen_until,
                        self.member,
                        now_ms(),
                        problem.problem,
                    )
                )
        for store in book.floor_commits(self._position):
            offsets = [TopicPartition(store.topic, store.partition, store.offset)]
            try:
                # Stored too, so a later automatic commit of the stored offset cannot move the group below H.
                self._consumer.store_offsets(offsets=offsets)
                self._consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                log.warning("committing the handover offset of a quiet partition failed", extra={"error": str(exc)})
                continue
            book.floor_done(store)
        with self._lock:
            pending = book.pending_acks()
            if pending != self._pending_handovers:
                self._ack_news = True
            self._pending_handovers = pending
        self.stats.active_partitions = sum(1 for p in book.parts.values() if p.rules.start is not None)

    def _position(self, key: TopicPartitionKey) -> int | None:
        found = self._consumer.position([TopicPartition(*key)])
        return found[0].offset if found and found[0].offset >= 0 else None

    def _publish(self, record: Any) -> None:
        key, value = encode(record)
        try:
            self._producer.produce(self.handover_topic, value=value, key=key, partition=0)
        except BufferError:
            self._producer.poll(0.1)

    # -- acknowledgements (in the follower's thread)

    def _tick(self) -> None:
        if time.monotonic() - self._last_ack_check < self.progress_interval and not self._ack_news:
            return
        self._last_ack_check = time.monotonic()
        with self._lock:
            self._ack_news = False
            pending = dict(self._pending_handovers)
        if not pending:
            return
        with self._follower.locked_view() as view:
            # Only while the replay still says this H: after a cleanup (tombstones) an ack would bring a key back.
            todo = {
                k: v
                for k, v in pending.items()
                if _handover_of(view, v[0], k) == v[1] and not _acknowledged(view, v[0], k, v[1])
            }
        if not todo:
            return
        try:
            if self._offsets is None:
                self._offsets = kafka_clients.GroupOffsetReader(self._reader_base, self.group_id)
            committed = {}
            for tp in self._offsets.committed([TopicPartition(t, p) for t, p in todo], timeout=15):
                if tp.error is None:
                    committed[(tp.topic, tp.partition)] = (
                        tp.offset if tp.offset >= 0 else None,
                        CommitMark.decode(tp.metadata),
                    )
        except Exception as exc:
            log.warning("reading the live group's offsets for acknowledgements failed", extra={"error": str(exc)})
            return
        for key, (replay_id, handover) in todo.items():
            offset, mark = committed.get(key, (None, None))
            if ack_due(handover, offset, mark):
                assert offset is not None
                self._publish(AckInfo(replay_id, key[0], key[1], handover, offset, self.member, now_ms()))
                self.stats.acks += 1
                log.info(
                    "handover acknowledged",
                    extra={
                        "replay_id": replay_id,
                        "topic": key[0],
                        "partition": key[1],
                        "handover_offset": handover,
                        "committed": offset,
                    },
                )
        self._producer.flush(10)

    # -- the rest of the Consumer API

    def close(self) -> None:
        self._closing = True
        try:
            self._consumer.close()
        finally:
            self._follower.stop()
            self._producer.flush(10)
            if self._offsets is not None:
                self._offsets.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


class _RunOffsets(Sequence[int]):
    """The offsets of a run's records, read only where asked: the run rules need the first, the last and one or
    two more, not every record's (a list of them was a tenth of the skipping guard's own cost per record)."""

    __slots__ = ("_run",)

    def __init__(self, run: list[Message]) -> None:
        self._run = run

    def __len__(self) -> int:
        return len(self._run)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [_offset_of(m) for m in self._run[index]]
        return _offset_of(self._run[index])


def _fields(stores: list[Store]) -> list[tuple[str, int, int, str | None]]:
    return [(s.topic, s.partition, s.offset, s.metadata) for s in stores]


def _offset(topic: str, partition: int, offset: int, metadata: str | None) -> TopicPartition:
    """A TopicPartition with commit metadata when there is some (confluent-kafka refuses metadata=None)."""
    if metadata is None:
        return TopicPartition(topic, partition, offset)
    return TopicPartition(topic, partition, offset, metadata=metadata)


def _handover_of(view: HandoverView, replay_id: str, key: TopicPartitionKey) -> int | None:
    part = view.replay(replay_id).partitions.get(key)
    return part.handover.offset if part is not None and part.handover is not None else None


def _acknowledged(view: HandoverView, replay_id: str, key: TopicPartitionKey, handover: int) -> bool:
    part = view.replay(replay_id).partitions.get(key)
    return part is not None and part.ack is not None and part.ack.offset == handover
