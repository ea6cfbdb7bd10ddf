"""The operator's door to the handover topics: one tailing reader per Kafka cluster, shared by every replay.

The replay workers and the live side's guards write the handover protocol's records (see
`replay_worker/HANDOVER.md`); the operator only reads them to follow progress, and writes in two cases:
a forced handover when a replay is cancelled mid-flight (so the live side takes every partition back at
exactly what the replay processed), and tombstones at cleanup. Tailing instead of re-reading keeps the
load on Kafka constant whatever the number of replays.

Beside `kafka_admin.py` (the admin client), this is the only operator module that reaches Kafka: it opens
the worker's handover-topic clients, and no kind holds one (the import-linter contracts in pyproject.toml
keep it so). Its calls block on Kafka, so reconcile code uses the async face, `HandoverReaders.aio`, which
runs each of them on the Kafka pool (`kafka_pool`) and never on Kopf's event loop.

A reader holds a follower thread with a whole copy of the topic, and a producer: they are cached per connection
(the bootstrap list in its normal form, `kafka_addresses`, the settings' hash and the topic), at most
`handover_readers` of them, and closed when evicted or idle (`connection_cache`, security review H4).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, TypeVar

from confluent_kafka import KafkaException

from replay_worker.replay.bootstrap import BootstrapError, bootstrap_replay
from replay_worker.contract import SpecError, StartOlderThanRetention, WorkerSettings
from replay_worker.protocol.handover import ReplayHandover
from replay_worker.topic.handover_topic import HandoverFollower, HandoverTopic, HandoverTopicError

from ..shared.connection_cache import ConnectionCache, Retirable
from ..rules.kafka_addresses import normal_bootstrap
from .kafka_admin import TopicPartitionKey, connection_key
from ..shared.kafka_pool import KafkaPool
from ..shared.metrics import HANDOVER_RECORDS_FAILED

T = TypeVar("T")

#: How long a read waits for a new follower to catch up before the reconcile tries again at the next poll.
CATCH_UP_WAIT = 5.0


class HandoverBehind(RuntimeError):
    """The follower has not yet read what the handover topic held when it started: its view is older than
    what an earlier operator (or this one) may already have reported, so nothing may be reported from it."""


class _HandoverConnection(Retirable):
    """One cached reader of one handover topic: its follower (made at the first read), its write handle (made at
    the first write) and whether the topic was ensured."""

    def __init__(self, bootstrap: str, config: Mapping[str, str], topic: str) -> None:
        super().__init__()
        self.bootstrap, self.config, self.topic = bootstrap, dict(config), topic
        self.lock = threading.Lock()
        self.follower: HandoverFollower[int] | None = None
        self.caught_up_at = 0
        self.handle: HandoverTopic | None = None
        self.ensured = False

    def write_handle(self) -> HandoverTopic:
        """The write handle (opened once; it holds a Kafka producer)."""
        with self.lock:
            if self.handle is None:
                self.handle = HandoverTopic(self.bootstrap, self.topic, self.config, client_id="reprise-operator")
            return self.handle

    def reader(self) -> tuple[HandoverFollower[int], int]:
        """The follower, started at the first call, and the ticket of its first sync."""
        with self.lock:
            if self.follower is None:
                self.follower = HandoverFollower(
                    self.bootstrap,
                    self.topic,
                    self.config,
                    derive=lambda view: 0,
                    interval=0.2,
                    client_id="reprise-operator-follower",
                    failures=HANDOVER_RECORDS_FAILED,
                ).start()
                self.caught_up_at = self.follower.request_sync()
            return self.follower, self.caught_up_at

    def close(self) -> None:
        with self.lock:
            follower, handle = self.follower, self.handle
        if follower is not None:
            follower.stop()
        if handle is not None:
            handle.close()


class HandoverReaders:
    """Per (cluster, handover topic): a follower tailing it and a topic handle for writes.

    A follower starts from the beginning of the topic. Until it has read up to where the topic ended when it
    started (its first sync), its view is older than the status a previous operator wrote: a restarted
    operator would report partitions handed over as pending and positions as not started, for one poll, and
    the lag metrics and alerts with it. So `replay` refuses (HandoverBehind) until that first sync is served;
    after it, the view only moves forward. A reader evicted from the cache starts over the same way."""

    def __init__(
        self,
        pool: KafkaPool | None = None,
        *,
        limit: int = 16,
        idle_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._cache: ConnectionCache[tuple[str, str], _HandoverConnection] = ConnectionCache(
            limit, idle_seconds, self._retire, clock
        )
        #: The async face of this door: `await readers.aio.replay(...)` (see `AsyncHandoverReaders`).
        self.aio = AsyncHandoverReaders(self, pool)

    def _retire(self, connection: _HandoverConnection) -> None:
        if self._pool is None:
            connection.retire()
        else:
            self._pool.background(connection.retire)

    @contextmanager
    def _use(self, bootstrap: str, config: Mapping[str, str], topic: str) -> Iterator[_HandoverConnection]:
        """The cached connection of (cluster, topic), held open for the block."""
        normal = normal_bootstrap(bootstrap)
        key = (connection_key(normal, config), topic)
        while True:
            connection = self._cache.get(key, lambda: _HandoverConnection(normal, config, topic))
            if connection.enter():
                break  # else it was evicted between the two lines: the next get makes a new one
        try:
            yield connection
        finally:
            connection.leave()

    def ensure(self, bootstrap: str, config: Mapping[str, str], topic: str) -> None:
        """Create the handover topic if missing, once per process and cluster (not once per replay); make its
        producer meanwhile: made at the first teardown's tombstones instead, it held that Complete up by its
        connection and producer id, up to a second on a busy broker (benchmarks/end_to_end)."""
        with self._use(bootstrap, config, topic) as connection:
            if connection.ensured:
                return
            handle = connection.write_handle()
            handle.ensure()
            handle.producer  # noqa: B018 - the property makes the producer
            connection.ensured = True

    def bootstrap(self, settings: WorkerSettings, config: Mapping[str, str], timeout: float = 15.0) -> str | None:
        """Bootstrap the replay as its replicas would (the same settings, the same transaction), once, before
        they start; None when done, else why not. A failure is not the operator's to report: every replica
        bootstraps on start anyway (protocol step 5.1), so it then resolves the start as before and says what
        is wrong in its own way. Done here, the replicas only read the result: no `init_transactions` race in
        which each new replica fences the one before it and retries after a back-off, and no replica joins the
        replay group long before the others (each join is a rebalance of the whole group)."""
        settings = dataclasses.replace(settings, member_name="reprise-operator")
        try:
            bootstrap_replay(settings, dict(config), timeout=timeout, attempts=1, look_first=False)
        except (KafkaException, BootstrapError, HandoverTopicError, SpecError, StartOlderThanRetention) as exc:
            return str(exc)
        return None

    def force_handover(
        self,
        bootstrap: str,
        config: Mapping[str, str],
        topic: str,
        replay_id: str,
        offsets: Mapping[TopicPartitionKey, int],
        *,
        by: str,
        reason: str,
    ) -> int:
        """Publish the handover offset of every partition of the replay that has none yet, at `offsets` (the
        replay group's committed offsets, once it is stopped); how many were published."""
        with self._use(bootstrap, config, topic) as connection:
            return len(connection.write_handle().force_handover(replay_id, offsets, by=by, reason=reason))

    def tombstone(self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str) -> int:
        """Delete every record of the replay (compaction then drops them); how many keys."""
        with self._use(bootstrap, config, topic) as connection:
            return connection.write_handle().tombstone(replay_id)

    def replay(
        self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str, wait: float = CATCH_UP_WAIT
    ) -> ReplayHandover:
        """What the handover topic says of one replay, as of the follower's last read; HandoverBehind while
        a new follower has not caught up with the topic (waiting up to `wait` seconds for it first)."""
        with self._use(bootstrap, config, topic) as connection:
            follower, ticket = connection.reader()
            if not follower.synced(ticket) and not follower.wait_synced(ticket, wait):
                raise HandoverBehind(
                    f"reading handover topic {topic} from its start (a new reader{': ' + follower.error if follower.error else ''}); "
                    "progress is reported once it has caught up"
                )
            with follower.locked_view() as view:
                return copy.deepcopy(view.replay(replay_id))

    def sync(self, bootstrap: str, config: Mapping[str, str], topic: str, timeout: float = 10.0) -> bool:
        """Wait until the follower has read everything written so far (before a decision that needs it)."""
        with self._use(bootstrap, config, topic) as connection:
            follower = connection.follower
            if follower is None:
                return True
            return follower.wait_synced(follower.request_sync(), timeout)

    def sweep(self) -> int:
        """Retire the readers unused for the idle time; how many."""
        return self._cache.sweep()

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        for connection in self._cache.clear():
            connection.retire()


class AsyncHandoverReaders:
    """The handover topics' door for reconcile code: the same calls as `HandoverReaders`, awaitable.

    Each call may block on Kafka (a new follower catching up, a flush of the records written), so it runs on a
    thread of the Kafka pool, in the share of the namespace whose reconcile asks; that hop lives here, once,
    instead of in every reconcile step. Without a pool, on asyncio's default threads."""

    def __init__(self, readers: HandoverReaders, pool: KafkaPool | None = None) -> None:
        self._readers = readers
        self._pool = pool

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            return await asyncio.to_thread(fn, *args)
        return await self._pool.run(fn, *args)

    async def ensure(self, bootstrap: str, config: Mapping[str, str], topic: str) -> None:
        await self._call(self._readers.ensure, bootstrap, config, topic)

    async def replay(
        self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str, wait: float = CATCH_UP_WAIT
    ) -> ReplayHandover:
        return await self._call(self._readers.replay, bootstrap, config, topic, replay_id, wait)

    async def sync(self, bootstrap: str, config: Mapping[str, str], topic: str, timeout: float = 10.0) -> bool:
        return await self._call(self._readers.sync, bootstrap, config, topic, timeout)

    async def bootstrap(self, settings: WorkerSettings, config: Mapping[str, str]) -> str | None:
        return await self._call(self._readers.bootstrap, settings, config)

    async def force_handover(
        self,
        bootstrap: str,
        config: Mapping[str, str],
        topic: str,
        replay_id: str,
        offsets: Mapping[TopicPartitionKey, int],
        *,
        by: str,
        reason: str,
    ) -> int:
        return await self._call(
            lambda: self._readers.force_handover(bootstrap, config, topic, replay_id, offsets, by=by, reason=reason)
        )

    async def tombstone(self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str) -> int:
        return await self._call(self._readers.tombstone, bootstrap, config, topic, replay_id)

    async def close(self) -> None:
        await self._call(self._readers.close)
