"""The operator's only door to Kafka: one admin client per cluster, shared by every resource.

Everything here blocks (confluent-kafka's futures), so the async handlers call it through
`asyncio.to_thread`. Requests are batched per call: one `list_offsets` request covers every partition
asked for, whatever the number of resources that asked, which keeps the admin load per poll cycle
independent of the number of replays on a cluster.

Connection settings come from `KafkaConnection` plus the librdkafka settings of the user's Secret; those
values are credentials and are never logged, put in status, or used in a cache key as plain text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from replay_worker.contract import ClientType, settings_for

from .metrics import KAFKA_ADMIN_REQUESTS

TopicPartitionKey = tuple[str, int]

#: Seconds any one admin request may take before it is treated as a temporary error.
REQUEST_TIMEOUT_S = 15.0
#: Committed-offset readers kept open (one per consumer group being followed).
MAX_OFFSET_READERS = 512


class KafkaUnavailable(RuntimeError):
    """A temporary failure talking to Kafka: the caller backs off and retries."""


@dataclass(frozen=True)
class OffsetAtTime:
    """What `offsets_for_times` found: the first offset at or after a time, and that record's timestamp."""

    offset: int
    timestamp_ms: int | None


@dataclass(frozen=True)
class GroupDescription:
    """A consumer group's state (`Empty`, `Stable`, `Dead`, ...) and its members' client ids and hosts."""

    group_id: str
    state: str
    members: tuple[str, ...]


def connection_key(bootstrap_servers: str, client_config: Mapping[str, str]) -> str:
    """A cache key for one cluster connection that does not reveal the settings it hashes."""
    digest = hashlib.sha256(json.dumps(sorted(client_config.items())).encode()).hexdigest()[:16]
    return f"{bootstrap_servers}#{digest}"


def _result(future, what: str):
    try:
        return future.result(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError | None = exc.args[0] if exc.args else None
        if (
            error is not None
            and not error.retriable()
            and error.code()
            not in (
                KafkaError._TIMED_OUT,
                KafkaError._TRANSPORT,
                KafkaError._ALL_BROKERS_DOWN,
                # A group coordinator that is moving or still loading (a broker that just started answers a
                # group describe with NOT_COORDINATOR, which librdkafka does not mark retriable).
                KafkaError.NOT_COORDINATOR,
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                KafkaError.COORDINATOR_NOT_AVAILABLE,
            )
        ):
            raise
        raise KafkaUnavailable(f"{what}: {exc}") from None
    except TimeoutError:
        raise KafkaUnavailable(f"{what}: no answer within {REQUEST_TIMEOUT_S:.0f}s") from None


class KafkaCluster:
    """Admin operations on one Kafka cluster. Thread-safe: confluent-kafka's AdminClient is."""

    def __init__(self, bootstrap_servers: str, client_config: Mapping[str, str] | None = None):
        config = dict(client_config or {})
        config["bootstrap.servers"] = bootstrap_servers
        config.setdefault("client.id", "reprise-operator")
        self.bootstrap_servers = bootstrap_servers
        self._config = config
        self._admin = AdminClient(settings_for("admin", config))
        self._readers: dict[str, Consumer] = {}
        self._snapshot_lock = threading.Lock()
        self._snapshot: dict[TopicPartitionKey, int] = {}
        self._snapshot_at = 0.0
        self._interest: dict[TopicPartitionKey, float] = {}
        #: How many requests this client has sent; the benchmark reads it per poll cycle.
        self.requests_sent = 0
        self._lock = threading.Lock()
        #: The async face of this door: `await cluster.aio.end_offsets(keys)` (see `AsyncKafkaCluster`).
        self.aio = AsyncKafkaCluster(self)

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.requests_sent += n
        KAFKA_ADMIN_REQUESTS.labels(self.bootstrap_servers).inc(n)

    # -- topics -------------------------------------------------------------------------------

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """Partition numbers of each existing topic; a missing topic is absent from the answer."""
        self._count()
        try:
            metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaUnavailable(f"listing topics: {exc}") from None
        found: dict[str, list[int]] = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            if meta is not None and meta.error is None:
                found[topic] = sorted(meta.partitions)
        return found

    def ensure_topic(
        self, name: str, partitions: int, config: Mapping[str, str] | None = None, replication_factor: int | None = None
    ) -> bool:
        """Create the topic unless it exists; True when this call created it. Replication: the broker's
        default unless given."""
        self._count()
        replicas = replication_factor if replication_factor is not None else -1
        futures = self._admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=replicas, config=dict(config or {}))],
            request_timeout=REQUEST_TIMEOUT_S,
        )
        try:
            _result(futures[name], f"creating topic {name}")
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise
        return True

    def delete_topic(self, name: str) -> None:
        """Delete the topic; an absent topic is not an error."""
        self._count()
        futures = self._admin.delete_topics([name], request_timeout=REQUEST_TIMEOUT_S)
        try:
            _result(futures[name], f"deleting topic {name}")
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return
            raise

    # -- offsets ------------------------------------------------------------------------------

    def _list_offsets(
        self, specs: Mapping[TopicPartitionKey, OffsetSpec], what: str, skip_missing: bool = False
    ) -> dict[TopicPartitionKey, OffsetAtTime]:
        if not specs:
            return {}
        self._count()
        request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
        futures = self._admin.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S)
        answer: dict[TopicPartitionKey, OffsetAtTime] = {}
        for tp, future in futures.items():
            try:
                info = _result(future, what)
            except KafkaException as exc:
                # In a batch shared by many replays, one deleted topic must not fail all the others.
                if skip_missing and exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise
            ts = info.timestamp if info.timestamp is not None and info.timestamp >= 0 else None
            answer[(tp.topic, tp.partition)] = OffsetAtTime(info.offset, ts)
        return answer

    def end_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The offset the next record of each partition will get (the high watermark)."""
        specs = {key: OffsetSpec.latest() for key in partitions}
        return {k: v.offset for k, v in self._list_offsets(specs, "listing end offsets").items()}

    def start_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The log-start offset of each partition: records below it were deleted by retention."""
        specs = {key: OffsetSpec.earliest() for key in partitions}
        return {k: v.offset for k, v in self._list_offsets(specs, "listing log-start offsets").items()}

    def offsets_for_time(
        self, partitions: Iterable[TopicPartitionKey], timestamp_ms: int
    ) -> dict[TopicPartitionKey, OffsetAtTime | None]:
        """The earliest offset whose timestamp is >= `timestamp_ms`; None where no record is that new.

        Kafka answers -1 ("no offset") when no record is that new: callers treat that partition's
        start as its end offset (REFERENCE.md section 1).
        """
        specs = {key: OffsetSpec.for_timestamp(timestamp_ms) for key in partitions}
        found = self._list_offsets(specs, "looking up offsets by time")
        return {k: (v if v.offset >= 0 else None) for k, v in found.items()}

    def shared_end_offsets(
        self, partitions: Iterable[TopicPartitionKey], max_age: float
    ) -> dict[TopicPartitionKey, int]:
        """End offsets for a follower, from one batched request per `max_age` for every follower of this cluster.

        Each caller registers the partitions it follows; the first caller after the snapshot went stale
        refreshes it for all registered partitions at once, so a poll cycle costs one request whatever the
        number of replays. Partitions nobody asked for during three refreshes are dropped.
        """
        wanted = set(partitions)
        with self._snapshot_lock:
            now = time.monotonic()
            for key in wanted:
                self._interest[key] = now
            fresh = now - self._snapshot_at < max_age and wanted <= self._snapshot.keys()
            if not fresh:
                horizon = now - 3 * max(max_age, 1.0)
                self._interest = {k: t for k, t in self._interest.items() if t >= horizon}
                specs = {key: OffsetSpec.latest() for key in self._interest}
                found = self._list_offsets(specs, "listing end offsets", skip_missing=True)
                self._snapshot = {k: v.offset for k, v in found.items()}
                self._snapshot_at = time.monotonic()
            missing = wanted - self._snapshot.keys()
            if missing:
                self._snapshot_at = 0.0  # ask again next time
                raise KafkaUnavailable(f"no end offset for {', '.join(f'{t}/{p}' for t, p in sorted(missing)[:3])}")
            return {key: self._snapshot[key] for key in wanted}

    # -- consumer groups ----------------------------------------------------------------------

    def committed_offsets(self, group: str, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The group's committed offsets of `partitions`; partitions it never committed are absent.

        Asked through a consumer that carries the group id but never joins the group, not through the
        admin API: librdkafka (2.15 and 2.16 at least) crashes the process in ListConsumerGroupOffsets
        when the broker answers with an error, which a loading or moving group coordinator does.
        """
        keys = list(partitions)
        if not keys:
            return {}
        self._count()
        reader = self._offset_reader(group)
        try:
            found = reader.committed([TopicPartition(t, p) for t, p in keys], timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaUnavailable(f"reading committed offsets of group {group}: {exc}") from None
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.error is None and tp.offset >= 0}

    def _offset_reader(self, group: str) -> Consumer:
        with self._lock:
            reader = self._readers.pop(group, None)
            if reader is None:
                reader = Consumer(
                    {
                        **settings_for("consumer", self._config),
                        "group.id": group,
                        "enable.auto.commit": False,
                        "client.id": "reprise-operator-offsets",
                    }
                )
            self._readers[group] = reader  # most recently used last
            while len(self._readers) > MAX_OFFSET_READERS:
                self._readers.pop(next(iter(self._readers))).close()
            return reader

    def forget_group(self, group: str) -> None:
        """Close the offset reader of a group that is gone."""
        with self._lock:
            reader = self._readers.pop(group, None)
        if reader is not None:
            reader.close()

    def describe_group(self, group: str) -> GroupDescription:
        self._count()
        futures = self._admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)
        desc = _result(futures[group], f"describing group {group}")
        state = getattr(desc.state, "name", str(desc.state))
        members = tuple(f"{m.client_id}@{m.host}" for m in (desc.members or []))
        return GroupDescription(group, _state_name(state), members)

    def alter_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Set the group's committed offsets; Kafka refuses unless the group is Empty or Dead."""
        self._count()
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        )
        futures = self._admin.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)
        result = _result(futures[group], f"altering offsets of group {group}")
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise KafkaException(tp.error)

    def delete_group(self, group: str) -> None:
        """Delete the group and its committed offsets; an absent group is not an error."""
        self.forget_group(group)
        self._count()
        futures = self._admin.delete_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)
        try:
            _result(futures[group], f"deleting group {group}")
        except KafkaException as exc:
            if exc.args and exc.args[0].code() in (KafkaError.GROUP_ID_NOT_FOUND,):
                return
            raise


def _state_name(state: str) -> str:
    """`ConsumerGroupState.EMPTY` -> `Empty`, the spelling Kafka's tools and docs use."""
    mapping = {
        "EMPTY": "Empty",
        "STABLE": "Stable",
        "DEAD": "Dead",
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
        "UNKNOWN": "Unknown",
    }
    return mapping.get(state.upper(), state)


class AsyncKafkaCluster:
    """The Kafka door for reconcile code: the same calls as `KafkaCluster`, awaitable.

    confluent-kafka's admin futures block, so each call runs on a worker thread; that hop lives here, once,
    instead of in every reconcile step (`await cluster.aio.partitions(topics)`)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self._cluster = cluster

    async def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        return await asyncio.to_thread(self._cluster.partitions, list(topics))

    async def ensure_topic(
        self, name: str, partitions: int, config: Mapping[str, str] | None = None, replication_factor: int | None = None
    ) -> bool:
        return await asyncio.to_thread(self._cluster.ensure_topic, name, partitions, config, replication_factor)

    async def delete_topic(self, name: str) -> None:
        await asyncio.to_thread(self._cluster.delete_topic, name)

    async def end_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return await asyncio.to_thread(self._cluster.end_offsets, list(partitions))

    async def start_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return await asyncio.to_thread(self._cluster.start_offsets, list(partitions))

    async def offsets_for_time(
        self, partitions: Iterable[TopicPartitionKey], timestamp_ms: int
    ) -> dict[TopicPartitionKey, OffsetAtTime | None]:
        return await asyncio.to_thread(self._cluster.offsets_for_time, list(partitions), timestamp_ms)

    async def shared_end_offsets(
        self, partitions: Iterable[TopicPartitionKey], max_age: float
    ) -> dict[TopicPartitionKey, int]:
        return await asyncio.to_thread(self._cluster.shared_end_offsets, list(partitions), max_age)

    async def committed_offsets(
        self, group: str, partitions: Iterable[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, int]:
        return await asyncio.to_thread(self._cluster.committed_offsets, group, list(partitions))

    async def describe_group(self, group: str) -> GroupDescription:
        return await asyncio.to_thread(self._cluster.describe_group, group)

    async def alter_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        await asyncio.to_thread(self._cluster.alter_offsets, group, offsets)

    async def delete_group(self, group: str) -> None:
        await asyncio.to_thread(self._cluster.delete_group, group)


class KafkaClusters:
    """The registry of admin clients: one per cluster connection, created on first use."""

    def __init__(self) -> None:
        self._clusters: dict[str, KafkaCluster] = {}
        self._lock = threading.Lock()

    def get(self, bootstrap_servers: str, client_config: Mapping[str, str] | None = None) -> KafkaCluster:
        key = connection_key(bootstrap_servers, client_config or {})
        with self._lock:
            cluster = self._clusters.get(key)
            if cluster is None:
                cluster = KafkaCluster(bootstrap_servers, client_config)
                self._clusters[key] = cluster
            return cluster

    def all(self) -> list[KafkaCluster]:
        with self._lock:
            return list(self._clusters.values())


# ------------------------------------------------------------------------------------------ topic records

#: Seconds any one bounded read or single write of a topic may take (Debezium's signal and notification topics).
IO_TIMEOUT_S = 15.0


def _client_config(bootstrap: str, config: Mapping[str, str], client_id: str, client: ClientType) -> dict[str, Any]:
    return {**settings_for(client, config), "bootstrap.servers": bootstrap, "client.id": client_id}


def produce_one(
    bootstrap: str,
    config: Mapping[str, str],
    topic: str,
    *,
    key: bytes | str | None,
    value: bytes | str | None,
    headers: Sequence[tuple[str, str | bytes | None]],
    partition: int,
    client_id: str,
) -> int:
    """Produce one record and wait for its acknowledgement; its offset (Debezium's signals)."""
    producer = Producer({**_client_config(bootstrap, config, client_id, "producer"), "enable.idempotence": True})
    delivered: dict[str, Any] = {}

    def on_delivery(error: Any, message: Any) -> None:
        delivered["error"], delivered["offset"] = error, (message.offset() if message is not None else None)

    try:
        producer.produce(
            topic, key=key, value=value, headers=list(headers), partition=partition, on_delivery=on_delivery
        )
        if producer.flush(IO_TIMEOUT_S) or "offset" not in delivered:
            raise TimeoutError(f"the signal to {topic} was not acknowledged within {IO_TIMEOUT_S:.0f}s")
        if delivered["error"] is not None:
            raise RuntimeError(f"sending the signal to {topic} failed: {delivered['error'].str()}")
        return int(delivered["offset"])
    finally:
        producer.flush(1)


@dataclass(frozen=True)
class TopicRead:
    """Records read from a topic and where to continue next time."""

    records: tuple[tuple[int, int, bytes | None, bytes | None], ...]
    next_offsets: Mapping[int, int]


def read_topic(
    bootstrap: str,
    config: Mapping[str, str],
    topic: str,
    since_ms: int | None = None,
    from_offsets: Mapping[int, int] | None = None,
    *,
    client_id: str,
) -> TopicRead:
    """Every record of `topic` from `from_offsets` (else from the first record at or after `since_ms`, else
    from the beginning) up to the end offsets as of the call: (partition, offset, key, value) each.

    A bounded read with `assign()` and no consumer group: nothing is committed anywhere."""
    consumer = Consumer(
        {
            **_client_config(bootstrap, config, client_id, "consumer"),
            "group.id": client_id,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=IO_TIMEOUT_S)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return TopicRead((), dict(from_offsets or {}))
        partitions = sorted(found.partitions)
        ends: dict[int, int] = {}
        starts: dict[int, int] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=IO_TIMEOUT_S, cached=False)
            ends[p] = high
            starts[p] = low
        if from_offsets:
            starts.update({p: max(starts[p], o) for p, o in from_offsets.items() if p in starts})
        elif since_ms is not None:
            at = consumer.offsets_for_times(
                [TopicPartition(topic, p, since_ms) for p in partitions], timeout=IO_TIMEOUT_S
            )
            for tp in at:
                starts[tp.partition] = tp.offset if tp.offset >= 0 else ends[tp.partition]
        todo = {p for p in partitions if starts[p] < ends[p]}
        records: list[tuple[int, int, bytes | None, bytes | None]] = []
        if todo:
            consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
            deadline = time.monotonic() + IO_TIMEOUT_S
            while todo and time.monotonic() < deadline:
                for message in consumer.consume(500, 0.2):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            todo.discard(message.partition())
                        continue
                    # A consumed record always has its partition and offset (only errors lack them).
                    p, offset = message.partition(), message.offset()
                    assert p is not None and offset is not None
                    if offset < ends[p]:
                        records.append((p, offset, message.key(), message.value()))
                    if offset + 1 >= ends[p]:
                        todo.discard(p)
            if todo:
                raise TimeoutError(f"reading {topic} did not reach its end within {IO_TIMEOUT_S:.0f}s")
        return TopicRead(tuple(records), {p: ends[p] for p in partitions})
    finally:
        consumer.close()
