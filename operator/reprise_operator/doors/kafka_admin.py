"""The operator's only door to Kafka: one admin client per cluster, shared by every resource.

Everything here blocks (confluent-kafka's futures), so the async handlers call it through the Kafka pool
(`kafka_pool`: bounded, fair between namespaces), by way of each cluster's `aio` face. Requests are batched per call: one `list_offsets` request covers every partition
asked for, whatever the number of resources that asked, which keeps the admin load per poll cycle
independent of the number of replays on a cluster.

Connection settings come from `KafkaConnection` plus the librdkafka settings of the user's Secret; those
values are credentials and are never logged, put in status, or used in a cache key as plain text. The clients
are cached per connection (the bootstrap list in its normal form, `kafka_addresses`, and a hash of the
settings), at most `kafka_connections` of them, each closed when evicted or idle (`connection_cache`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Concatenate, Iterable, Mapping, ParamSpec, Sequence, TypeVar

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from replay_worker.contract import ClientType, client_refusal, settings_for

from ..shared.connection_cache import ConnectionCache, Retirable
from ..rules.kafka_addresses import normal_bootstrap
from ..shared.kafka_pool import KafkaPool
from ..shared.metrics import KAFKA_ADMIN_REQUESTS

TopicPartitionKey = tuple[str, int]

#: librdkafka's own log lines (a broker it cannot resolve, a reconnect) come through Python logging under this
#: name, not raw on stderr: the operator's log shows them at their level, the plugin keeps them off the terminal.
LIBRDKAFKA_LOG = logging.getLogger("reprise_operator.librdkafka")
log = logging.getLogger("reprise.kafka_admin")

#: Seconds any one admin request may take before it is treated as a temporary error.
REQUEST_TIMEOUT_S = 15.0
#: Committed-offset readers kept open per connection (one per consumer group being followed), by default.
MAX_OFFSET_READERS = 64
#: Distinct `cluster` label values of the request counter; further clusters count under "other". The label is a
#: bootstrap list, which tenants choose: unbounded, it grew the metrics (and every scrape) without end.
MAX_CLUSTER_LABELS = 16


class KafkaUnavailable(RuntimeError):
    """A temporary failure talking to Kafka: the caller backs off and retries."""

    #: The Kafka error code, when Kafka gave one.
    code: int | None = None


#: Errors of a cluster in motion: a partition whose leader is being elected (a topic created a moment ago), a
#: coordinator that moves or loads, a broker away. librdkafka does not mark every one of them retriable on
#: every path (a NOT_LEADER_FOR_PARTITION of a topic being created reached reconcile raw, with a traceback).
TRANSIENT_CODES = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)


#: A leader epoch the client holds that is not the partition's (its metadata is behind).
STALE_LEADER_EPOCH = frozenset({KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH})


def retriable_error(exc: BaseException) -> str | None:
    """The name of the error when `exc` is a Kafka error of a cluster in motion (`TRANSIENT_CODES`, or one
    librdkafka marks retriable), else None. Such an error is transient: the caller retries it like
    KafkaUnavailable, with one line, not a traceback."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if isinstance(error, KafkaError) and (error.retriable() or error.code() in TRANSIENT_CODES):
        return str(error.name())
    return None


class ClientRefused(ValueError):
    """librdkafka refused a client's settings when it was built. The message names the key at most, never
    the value: librdkafka's own may quote it (`Invalid value "<value>" for configuration property ...`)."""


def _built(make: Any, config: Mapping[str, Any]) -> Any:
    """`make(config)` (a client class), with a refusal of its settings as `ClientRefused`."""
    try:
        return make(dict(config))
    except (KafkaException, TypeError, ValueError) as exc:
        raise ClientRefused(client_refusal(str(exc)) or "the Kafka client refused the Secret's settings") from None


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
        if error is not None and retriable_error(exc) is None:
            raise
        unavailable = KafkaUnavailable(f"{what}: {exc}")
        unavailable.code = error.code() if error is not None else None
        raise unavailable from None
    except TimeoutError:
        raise KafkaUnavailable(f"{what}: no answer within {REQUEST_TIMEOUT_S:.0f}s") from None


P = ParamSpec("P")
R = TypeVar("R")


def _while_open(method: Callable[Concatenate["KafkaCluster", P], R]) -> Callable[Concatenate["KafkaCluster", P], R]:
    """Hold the connection open for the call; a connection already retired (evicted) is a temporary error, and
    the next reconcile gets a fresh one."""

    @functools.wraps(method)
    def call(self: "KafkaCluster", *args: P.args, **kwargs: P.kwargs) -> R:
        if not self.enter():
            raise KafkaUnavailable("the operator closed this Kafka connection to make room for others; retrying")
        try:
            return method(self, *args, **kwargs)
        finally:
            self.leave()

    return call


class KafkaCluster(Retirable):
    """Admin operations on one Kafka cluster. Thread-safe: confluent-kafka's AdminClient is."""

    def __init__(
        self,
        bootstrap_servers: str,
        client_config: Mapping[str, str] | None = None,
        *,
        pool: KafkaPool | None = None,
        offset_readers: int = MAX_OFFSET_READERS,
        metric_label: str | None = None,
    ):
        super().__init__()
        config = dict(client_config or {})
        config["bootstrap.servers"] = bootstrap_servers
        config.setdefault("client.id", "reprise-operator")
        self.bootstrap_servers = bootstrap_servers
        self._config = config
        self._admin_config: dict[str, Any] = {**settings_for("admin", config), "logger": LIBRDKAFKA_LOG}
        self._admin: AdminClient | None = _built(AdminClient, self._admin_config)
        self._readers: dict[str, Consumer] = {}
        self._max_readers = offset_readers
        self._metric_label = metric_label if metric_label is not None else bootstrap_servers
        self._snapshot_lock = threading.Lock()
        self._snapshot: dict[TopicPartitionKey, int] = {}
        self._snapshot_at = 0.0
        self._interest: dict[TopicPartitionKey, float] = {}
        #: How many requests this client has sent; the benchmark reads it per poll cycle.
        self.requests_sent = 0
        self._lock = threading.Lock()
        #: The async face of this door: `await cluster.aio.end_offsets(keys)` (see `AsyncKafkaCluster`).
        self.aio = AsyncKafkaCluster(self, pool)

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.requests_sent += n
        KAFKA_ADMIN_REQUESTS.labels(self._metric_label).inc(n)

    @property
    def _client(self) -> AdminClient:
        admin = self._admin
        if admin is None:  # only after `close`, which waits for every call holding the connection
            raise KafkaUnavailable("this Kafka connection is closed; retrying")
        return admin

    def close(self) -> None:
        """Drop the admin client and close the offset readers (the last call out, once retired)."""
        with self._lock:
            readers, self._readers = list(self._readers.values()), {}
            self._admin = None  # confluent-kafka has no close for it: the last reference destroys it
        for reader in readers:
            reader.close()

    # -- topics -------------------------------------------------------------------------------

    @_while_open
    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """Partition numbers of each existing topic; a missing topic is absent from the answer."""
        self._count()
        try:
            metadata = self._client.list_topics(timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaUnavailable(f"listing topics: {exc}") from None
        found: dict[str, list[int]] = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            if meta is not None and meta.error is None:
                found[topic] = sorted(meta.partitions)
        return found

    @_while_open
    def ensure_topic(
        self, name: str, partitions: int, config: Mapping[str, str] | None = None, replication_factor: int | None = None
    ) -> bool:
        """Create the topic unless it exists; True when this call created it. Replication: the broker's
        default unless given."""
        self._count()
        replicas = replication_factor if replication_factor is not None else -1
        futures = self._client.create_topics(
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

    @_while_open
    def delete_topic(self, name: str) -> None:
        """Delete the topic; an absent topic is not an error."""
        self._count()
        futures = self._client.delete_topics([name], request_timeout=REQUEST_TIMEOUT_S)
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
        futures = self._client.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S)
        answer: dict[TopicPartitionKey, OffsetAtTime] = {}
        for tp, future in futures.items():
            try:
                info = _result(future, what)
            except KafkaUnavailable as exc:
                if exc.code in STALE_LEADER_EPOCH:
                    self._new_admin_client({t for t, _ in specs})
                raise
            except KafkaException as exc:
                # In a batch shared by many replays, one deleted topic must not fail all the others.
                if skip_missing and exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise
            ts = info.timestamp if info.timestamp is not None and info.timestamp >= 0 else None
            answer[(tp.topic, tp.partition)] = OffsetAtTime(info.offset, ts)
        return answer

    def _new_admin_client(self, topics: set[str]) -> None:
        """Start again with a new admin client. Seen under load on the local platform: after the partitions' leader
        epoch moved on (a broker briefly fenced by its controller), every ListOffsets of the shared admin client
        was refused with FENCED_LEADER_EPOCH for minutes (its cached epoch was never refreshed), while a new
        client's succeeded at once. Calls under way finish on the old client; the next ones use the new one. A
        connection already closed (evicted from the cache) gets none."""
        if self._admin is None:
            return
        log.warning("Kafka refused a stale leader epoch of %s: a new admin client", ", ".join(sorted(topics)))
        self._admin = AdminClient(self._admin_config)

    @_while_open
    def end_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The offset the next record of each partition will get (the high watermark)."""
        specs = {key: OffsetSpec.latest() for key in partitions}
        return {k: v.offset for k, v in self._list_offsets(specs, "listing end offsets").items()}

    @_while_open
    def start_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The log-start offset of each partition: records below it were deleted by retention."""
        specs = {key: OffsetSpec.earliest() for key in partitions}
        return {k: v.offset for k, v in self._list_offsets(specs, "listing log-start offsets").items()}

    @_while_open
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

    @_while_open
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

    @_while_open
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
                reader = _built(
                    Consumer,
                    {
                        **settings_for("consumer", self._config),
                        "group.id": group,
                        "enable.auto.commit": False,
                        "client.id": "reprise-operator-offsets",
                        "logger": LIBRDKAFKA_LOG,
                    },
                )
            self._readers[group] = reader  # most recently used last
            while len(self._readers) > self._max_readers:
                self._readers.pop(next(iter(self._readers))).close()
            return reader

    @_while_open
    def forget_group(self, group: str) -> None:
        """Close the offset reader of a group that is gone."""
        with self._lock:
            reader = self._readers.pop(group, None)
        if reader is not None:
            reader.close()

    @_while_open
    def describe_group(self, group: str) -> GroupDescription:
        self._count()
        futures = self._client.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)
        desc = _result(futures[group], f"describing group {group}")
        state = getattr(desc.state, "name", str(desc.state))
        members = tuple(f"{m.client_id}@{m.host}" for m in (desc.members or []))
        return GroupDescription(group, _state_name(state), members)

    @_while_open
    def alter_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Set the group's committed offsets; Kafka refuses unless the group is Empty or Dead."""
        self._count()
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        )
        futures = self._client.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)
        result = _result(futures[group], f"altering offsets of group {group}")
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise KafkaException(tp.error)

    @_while_open
    def delete_group(self, group: str) -> None:
        """Delete the group and its committed offsets; an absent group is not an error."""
        self.forget_group(group)
        self._count()
        futures = self._client.delete_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)
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

    confluent-kafka's admin futures block, so each call runs on a thread of the Kafka pool, in the share of the
    namespace whose reconcile asks (`kafka_pool`); that hop lives here, once, instead of in every reconcile step
    (`await cluster.aio.partitions(topics)`). Without a pool (the plugin), on asyncio's default threads."""

    def __init__(self, cluster: KafkaCluster, pool: KafkaPool | None = None) -> None:
        self._cluster = cluster
        self._pool = pool

    async def call(self, fn: Callable[..., R], *args: Any) -> R:
        """`fn(*args)` off the event loop, in the pool when there is one (a blocking plan over this cluster)."""
        if self._pool is None:
            return await asyncio.to_thread(fn, *args)
        return await self._pool.run(fn, *args)

    async def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        return await self.call(self._cluster.partitions, list(topics))

    async def ensure_topic(
        self, name: str, partitions: int, config: Mapping[str, str] | None = None, replication_factor: int | None = None
    ) -> bool:
        return await self.call(self._cluster.ensure_topic, name, partitions, config, replication_factor)

    async def delete_topic(self, name: str) -> None:
        await self.call(self._cluster.delete_topic, name)

    async def end_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return await self.call(self._cluster.end_offsets, list(partitions))

    async def start_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return await self.call(self._cluster.start_offsets, list(partitions))

    async def offsets_for_time(
        self, partitions: Iterable[TopicPartitionKey], timestamp_ms: int
    ) -> dict[TopicPartitionKey, OffsetAtTime | None]:
        return await self.call(self._cluster.offsets_for_time, list(partitions), timestamp_ms)

    async def shared_end_offsets(
        self, partitions: Iterable[TopicPartitionKey], max_age: float
    ) -> dict[TopicPartitionKey, int]:
        return await self.call(self._cluster.shared_end_offsets, list(partitions), max_age)

    async def committed_offsets(
        self, group: str, partitions: Iterable[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, int]:
        return await self.call(self._cluster.committed_offsets, group, list(partitions))

    async def describe_group(self, group: str) -> GroupDescription:
        return await self.call(self._cluster.describe_group, group)

    async def alter_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        await self.call(self._cluster.alter_offsets, group, offsets)

    async def delete_group(self, group: str) -> None:
        await self.call(self._cluster.delete_group, group)


class KafkaClusters:
    """The registry of admin clients: one per cluster connection (the bootstrap list in its normal form and the
    settings), made on first use, at most `limit` of them; the least recently used, and any unused for
    `idle_seconds`, is retired (closed once no call uses it, on a pool thread: destroying a client may block)."""

    def __init__(
        self,
        pool: KafkaPool | None = None,
        *,
        limit: int = 32,
        idle_seconds: float = 600.0,
        offset_readers: int = MAX_OFFSET_READERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._offset_readers = offset_readers
        self._cache: ConnectionCache[str, KafkaCluster] = ConnectionCache(limit, idle_seconds, self._retire, clock)
        self._labels: dict[str, str] = {}
        self._lock = threading.Lock()

    def _retire(self, cluster: KafkaCluster) -> None:
        if self._pool is None:
            cluster.retire()
        else:
            self._pool.background(cluster.retire)

    def _label(self, bootstrap: str) -> str:
        with self._lock:
            if bootstrap not in self._labels and len(self._labels) < MAX_CLUSTER_LABELS:
                self._labels[bootstrap] = bootstrap
            return self._labels.get(bootstrap, "other")

    def get(self, bootstrap_servers: str, client_config: Mapping[str, str] | None = None) -> KafkaCluster:
        bootstrap = normal_bootstrap(bootstrap_servers)
        key = connection_key(bootstrap, client_config or {})
        return self._cache.get(
            key,
            lambda: KafkaCluster(
                bootstrap,
                client_config,
                pool=self._pool,
                offset_readers=self._offset_readers,
                metric_label=self._label(bootstrap),
            ),
        )

    def sweep(self) -> int:
        """Retire the connections unused for the idle time; how many."""
        return self._cache.sweep()

    def all(self) -> list[KafkaCluster]:
        return self._cache.values()

    def __len__(self) -> int:
        return len(self._cache)


# ------------------------------------------------------------------------------------------ topic records

#: Seconds any one bounded read or single write of a topic may take (Debezium's signal and notification topics).
IO_TIMEOUT_S = 15.0


def _client_config(bootstrap: str, config: Mapping[str, str], client_id: str, client: ClientType) -> dict[str, Any]:
    return {
        **settings_for(client, config),
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "logger": LIBRDKAFKA_LOG,
    }


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
    producer = _built(
        Producer, {**_client_config(bootstrap, config, client_id, "producer"), "enable.idempotence": True}
    )
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
    consumer = _built(
        Consumer,
        {
            **_client_config(bootstrap, config, client_id, "consumer"),
            "group.id": client_id,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        },
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
