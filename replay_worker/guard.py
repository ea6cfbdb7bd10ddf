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

With no replay active, the cost is one dictionary lookup per batch and, when automatic offset storing is on,
one `store_offsets` call per batch (the guard stores instead of librdkafka, so it never stores a record it
skipped).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from . import kafka_clients
from .handover import AckInfo, ActiveHandover, CommitMark, GuardInfo, GuardPartition, HandoverView, Verdict, ack_due, encode
from .handover_topic import DEFAULT_TOPIC, HandoverFollower, now_ms

log = logging.getLogger("replay_worker.guard")

TopicPartitionKey = tuple[str, int]

#: Settings of the service's consumer that the guard's own clients (reader, producer, admin) reuse.
_CONNECTION_PREFIXES = ("bootstrap.servers", "security.protocol", "sasl.", "ssl.", "ssl_", "oauthbearer",
                        "client.dns.lookup", "broker.address.family", "socket.", "reconnect.", "api.version",
                        "broker.version.fallback", "logger", "client.rack")


def connection_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a consumer's config that says where Kafka is and how to authenticate."""
    return {k: v for k, v in config.items() if k.startswith(_CONNECTION_PREFIXES)}


@dataclass
class _Partition:
    """One assigned partition: the protocol state plus what the service was handed and has stored."""

    rules: GuardPartition
    #: Sync ticket the follower must reach before the partition is released; None once released.
    ticket: int | None = None
    #: Offset after the last record handed to the service.
    handed_until: int | None = None
    #: Highest offset the service stored or committed (or the guard stored for it).
    stored_until: int | None = None
    #: Offset after the last record seen (handed or skipped) in the current batch.
    published_seen: int | None = None
    #: Skipped records at the tail stored by the guard, to be committed by the guard.
    tail_commit: TopicPartition | None = None


@dataclass
class GuardStats:
    """Counts for the service's own metrics."""

    skipped: int = 0
    handed: int = 0
    seeks: int = 0
    acks: int = 0
    active_partitions: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class GuardedConsumer:
    """A confluent-kafka consumer for a live service, guarded for handovers (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any], *, handover_topic: str = DEFAULT_TOPIC,
                 member: str | None = None, sync_timeout: float = 60.0, progress_interval: float = 1.0) -> None:
        if "group.id" not in config:
            raise ValueError("GuardedConsumer needs group.id: the guard acts for one live group")
        self.group_id = str(config["group.id"])
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
        self._admin = AdminClient(kafka_clients.admin_config(base))
        self._parts: dict[TopicPartitionKey, _Partition] = {}
        self._assigned: frozenset[TopicPartitionKey] = frozenset()
        self._pending_handovers: dict[TopicPartitionKey, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._seen_version = -1
        self.sync_timeout = sync_timeout
        self.progress_interval = progress_interval
        self._last_progress = 0.0
        self.stats = GuardStats()
        group = self.group_id
        self._follower: HandoverFollower[dict[TopicPartitionKey, ActiveHandover]] = HandoverFollower(
            bootstrap, handover_topic, self._connection, lambda view: view.active_for(group),
            interval=0.1, on_tick=self._tick, client_id=f"reprise-guard-{self.member}-follower").start()
        self._user_callbacks: dict[str, Callable[..., Any] | None] = {}
        self._last_ack_check = 0.0

    # -- subscription and rebalances

    def subscribe(self, topics: list[str], on_assign: Callable[..., Any] | None = None,
                  on_revoke: Callable[..., Any] | None = None, on_lost: Callable[..., Any] | None = None) -> None:
        self._user_callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if partitions:
            # Hold the new partitions until the handover view is at least as new as the moment of this
            # assignment: the previous owner may have acted on state this replica has not read yet.
            consumer.pause(partitions)
            committed = self._committed(consumer, partitions)
            ticket = self._follower.request_sync()
            for tp in partitions:
                key = (tp.topic, tp.partition)
                rules = GuardPartition(tp.topic, tp.partition)
                offset, mark = committed.get(key, (None, None))
                rules.restore(offset, mark)
                self._parts[key] = _Partition(rules, ticket=ticket, stored_until=offset)
            self._assigned = frozenset(self._parts)
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
            self._parts.pop((tp.topic, tp.partition), None)
        self._assigned = frozenset(self._parts)

    def _committed(self, consumer: Consumer, partitions: list[TopicPartition]) -> dict[TopicPartitionKey, tuple[int | None, CommitMark | None]]:
        deadline = time.monotonic() + 60.0
        while True:
            try:
                found = consumer.committed([TopicPartition(tp.topic, tp.partition) for tp in partitions], timeout=15)
                failed = [tp for tp in found if tp.error is not None]
                if failed:
                    raise KafkaException(failed[0].error)
                break
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise
                log.warning("reading the live group's committed offsets failed, retrying", extra={"error": str(exc)})
                time.sleep(0.5)
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None, CommitMark.decode(tp.metadata))
                for tp in found}

    # -- the state the handover topic gives

    def _refresh(self) -> None:
        """Release partitions whose sync is done and apply state changes; seek back where the rules say."""
        follower = self._follower
        version = follower.version
        snapshot = follower.snapshot
        changed = version != self._seen_version
        self._seen_version = version
        released = []
        for key, part in self._parts.items():
            if part.ticket is not None:
                if not follower.synced(part.ticket):
                    continue
                part.ticket = None
                released.append(key)
            elif not changed:
                continue
            target = part.rules.update(snapshot.get(key))
            if target is not None:
                self._seek(key, target)
        if released:
            self._consumer.resume([TopicPartition(t, p) for t, p in released])
        self.stats.active_partitions = sum(1 for p in self._parts.values() if p.rules.start is not None)

    def _seek(self, key: TopicPartitionKey, target: int) -> None:
        part = self._parts[key]
        self.stats.seeks += 1
        log.info("guard seeks back to the handover offset", extra={"topic": key[0], "partition": key[1], "offset": target,
                                                                    "replay_id": part.rules.replay_id or part.rules.reread_replay})
        self._consumer.seek(TopicPartition(key[0], key[1], target))

    # -- consuming

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        # The inner wait is cut in slices so that partitions waiting for the handover view are released,
        # and state changes applied, while the service blocks here; the caller's timeout is kept.
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            self._refresh()
            left = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
            messages = self._consumer.consume(num_messages, left)
            if messages:
                break
            self._progress()
            if deadline is not None and time.monotonic() >= deadline:
                return messages
        parts = self._parts
        guarded = any(p.rules.start is not None or p.rules.reread_until is not None or p.ticket is not None
                      for p in parts.values())
        if not guarded:
            if self._auto_store:
                self._store_last(messages)
            if time.monotonic() - self._last_progress >= self.progress_interval:
                self._progress()
            return messages
        result: list[Message] = []
        held: set[TopicPartitionKey] = set()
        touched: dict[TopicPartitionKey, _Partition] = {}
        for message in messages:
            if message.error() is not None:
                result.append(message)
                continue
            key = (message.topic(), message.partition())
            part = parts.get(key)
            if part is None:
                continue  # revoked meanwhile
            if key in held:
                continue
            if part.ticket is not None:
                # Fetched before the pause took effect: put it back, it is read again once the view is current.
                self._consumer.seek(TopicPartition(key[0], key[1], message.offset()))
                self._consumer.pause([TopicPartition(key[0], key[1])])
                held.add(key)
                continue
            touched[key] = part
            if part.rules.verdict(message.offset(), message.key(), message.headers(), message.value()) is Verdict.PROCESS:
                result.append(message)
                part.handed_until = message.offset() + 1
                self.stats.handed += 1
            else:
                self.stats.skipped += 1
        for key, part in touched.items():
            self._store_after_batch(key, part)
        self._progress()
        return result

    def poll(self, timeout: float = -1) -> Message | None:
        messages = self.consume(1, timeout)
        return messages[0] if messages else None

    def _store_last(self, messages: list[Message]) -> None:
        last: dict[TopicPartitionKey, int] = {}
        for message in messages:
            if message.error() is None:
                last[(message.topic(), message.partition())] = message.offset()
        offsets = []
        for (topic, partition), offset in last.items():
            part = self._parts.get((topic, partition))
            if part is not None:
                part.handed_until = part.stored_until = offset + 1
            offsets.append(TopicPartition(topic, partition, offset + 1))
        if offsets:
            self._consumer.store_offsets(offsets=offsets)

    def _store_after_batch(self, key: TopicPartitionKey, part: _Partition) -> None:
        """Store what may be committed for this partition now, with the guard's mark.

        With automatic storing, everything handed is stored (as librdkafka would on return from consume).
        Skipped records at the tail are stored too (with the mark that says they were skipped) once the
        service has stored everything it was handed, so the live group's committed offset shows how far
        the live side has got, and the replay can tell when it has caught up."""
        rules = part.rules
        seen = rules.seen_until
        if self._auto_store and part.handed_until is not None:
            part.stored_until = max(part.stored_until or 0, part.handed_until)
        everything_stored = part.handed_until is None or (part.stored_until or 0) >= part.handed_until
        target = part.stored_until
        if everything_stored and seen is not None and (target is None or seen > target):
            target = seen
        if target is None or (not self._auto_store and target == part.stored_until):
            return
        mark = rules.commit_mark(target)
        offset = _offset(key[0], key[1], target, mark.encode() if mark else None)
        self._consumer.store_offsets(offsets=[offset])
        # Skipped records at the tail: a service that commits only after handling records would never
        # commit them, so the guard does (see `_progress`). Any later store supersedes it.
        part.tail_commit = offset if part.handed_until is None or target > part.handed_until else None
        part.stored_until = target

    # -- storing and committing on behalf of the service

    def _marked(self, offsets: list[TopicPartition]) -> list[TopicPartition]:
        result = []
        for tp in offsets:
            part = self._parts.get((tp.topic, tp.partition))
            mark = part.rules.commit_mark(tp.offset) if part is not None and tp.offset >= 0 else None
            if part is not None and tp.offset >= 0:
                part.stored_until = max(part.stored_until or 0, tp.offset)
                if part.tail_commit is not None and tp.offset >= part.tail_commit.offset:
                    part.tail_commit = None
            result.append(_offset(tp.topic, tp.partition, tp.offset, mark.encode() if mark else tp.metadata))
        return result

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        if message is not None:
            offsets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        self._consumer.store_offsets(offsets=self._marked(offsets or []))

    def commit(self, message: Message | None = None, offsets: list[TopicPartition] | None = None,
               asynchronous: bool = True) -> Any:
        if message is not None:
            offsets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        if offsets is not None:
            return self._consumer.commit(offsets=self._marked(offsets), asynchronous=asynchronous)
        return self._consumer.commit(asynchronous=asynchronous)

    # -- progress: guard records, the floor commit of quiet partitions

    def _progress(self) -> None:
        now = time.monotonic()
        self._producer.poll(0)
        if now - self._last_progress < self.progress_interval:
            return
        self._last_progress = now
        pending: dict[TopicPartitionKey, tuple[str, int]] = {}
        tails = [part.tail_commit for part in self._parts.values() if part.tail_commit is not None]
        if tails:
            # By calling consume() again the service is done with what it was handed before (the same
            # assumption librdkafka's automatic offset store makes), so these offsets are safe to commit.
            try:
                self._consumer.commit(offsets=tails, asynchronous=True)
            except KafkaException as exc:
                log.debug("committing skipped records failed", extra={"error": str(exc)})
            for part in self._parts.values():
                part.tail_commit = None
        for key, part in self._parts.items():
            rules = part.rules
            if part.ticket is not None:
                continue
            if rules.handover is None and rules.first_skipped is not None and rules.replay_id is not None \
                    and rules.seen_until is not None and rules.seen_until != part.published_seen:
                self._publish(GuardInfo(rules.replay_id, key[0], key[1], rules.first_skipped, rules.seen_until,
                                        self.member, now_ms()))
                part.published_seen = rules.seen_until
            if rules.pending_ack and rules.replay_id is not None and rules.handover is not None:
                pending[key] = (rules.replay_id, rules.handover)
                self._floor_commit(key, part)
        with self._lock:
            self._pending_handovers = pending

    def _floor_commit(self, key: TopicPartitionKey, part: _Partition) -> None:
        if part.handed_until is not None and (part.stored_until or 0) < part.handed_until:
            return  # the service still works on records it was handed
        position = part.rules.seen_until
        if position is None:
            found = self._consumer.position([TopicPartition(*key)])
            position = found[0].offset if found and found[0].offset >= 0 else None
        target = part.rules.floor_commit(position)
        if target is None:
            return
        try:
            # Stored too, so a later automatic commit of the stored offset cannot move the group back below H.
            self._consumer.store_offsets(offsets=[TopicPartition(key[0], key[1], target)])
            self._consumer.commit(offsets=[TopicPartition(key[0], key[1], target)], asynchronous=False)
        except KafkaException as exc:
            log.warning("committing the handover offset of a quiet partition failed", extra={"error": str(exc)})
            return
        part.stored_until = target
        part.rules.floor_committed = True

    def _publish(self, record: Any) -> None:
        key, value = encode(record)
        try:
            self._producer.produce(self.handover_topic, value=value, key=key, partition=0)
        except BufferError:
            self._producer.poll(0.1)

    # -- acknowledgements (in the follower's thread)

    def _tick(self) -> None:
        if time.monotonic() - self._last_ack_check < self.progress_interval:
            return
        self._last_ack_check = time.monotonic()
        with self._lock:
            pending = dict(self._pending_handovers)
        if not pending:
            return
        with self._follower.locked_view() as view:
            todo = {k: v for k, v in pending.items() if not _acknowledged(view, v[0], k, v[1])}
        if not todo:
            return
        request = [ConsumerGroupTopicPartitions(self.group_id, [TopicPartition(t, p) for t, p in todo])]
        try:
            futures = self._admin.list_consumer_group_offsets(request, request_timeout=10)
            committed = {}
            for future in futures.values():
                for tp in future.result(timeout=15).topic_partitions:
                    if tp.error is None:
                        committed[(tp.topic, tp.partition)] = (tp.offset if tp.offset >= 0 else None,
                                                               CommitMark.decode(tp.metadata))
        except Exception as exc:
            log.warning("reading the live group's offsets for acknowledgements failed", extra={"error": str(exc)})
            return
        for key, (replay_id, handover) in todo.items():
            offset, mark = committed.get(key, (None, None))
            if ack_due(handover, offset, mark):
                assert offset is not None
                self._publish(AckInfo(replay_id, key[0], key[1], handover, offset, self.member, now_ms()))
                self.stats.acks += 1
                log.info("handover acknowledged", extra={"replay_id": replay_id, "topic": key[0], "partition": key[1],
                                                         "handover_offset": handover, "committed": offset})
        self._producer.flush(10)

    # -- the rest of the Consumer API

    def close(self) -> None:
        try:
            self._consumer.close()
        finally:
            self._follower.stop()
            self._producer.flush(10)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def _offset(topic: str, partition: int, offset: int, metadata: str | None) -> TopicPartition:
    """A TopicPartition with commit metadata when there is some (confluent-kafka refuses metadata=None)."""
    if metadata is None:
        return TopicPartition(topic, partition, offset)
    return TopicPartition(topic, partition, offset, metadata=metadata)


def _acknowledged(view: HandoverView, replay_id: str, key: TopicPartitionKey, handover: int) -> bool:
    part = view.replay(replay_id).partitions.get(key)
    return part is not None and part.ack is not None and part.ack.offset == handover
