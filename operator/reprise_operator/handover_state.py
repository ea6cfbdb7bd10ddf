"""The operator's door to the handover topics: one tailing reader per Kafka cluster, shared by every replay.

The replay workers and the live side's guards write the handover protocol's records (see
`replay_worker/HANDOVER.md`); the operator only reads them to follow progress, and writes in two cases:
a forced handover when a replay is cancelled mid-flight (so the live side takes every partition back at
exactly what the replay processed), and tombstones at cleanup. Tailing instead of re-reading keeps the
load on Kafka constant whatever the number of replays.

Beside `kafka_admin.py` (the admin client), this is the only operator module that reaches Kafka: it opens
the worker's handover-topic clients, and no kind holds one (the import-linter contracts in pyproject.toml
keep it so). Its calls block on Kafka, so reconcile code uses the async face, `HandoverReaders.aio`, which
runs each of them on a worker thread and never on Kopf's event loop.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import threading
from typing import Mapping

from confluent_kafka import KafkaException

from replay_worker.bootstrap import BootstrapError, bootstrap_replay
from replay_worker.contract import SpecError, StartOlderThanRetention, WorkerSettings
from replay_worker.handover import ReplayHandover
from replay_worker.handover_topic import HandoverFollower, HandoverTopic, HandoverTopicError

from .kafka_admin import TopicPartitionKey, connection_key
from .metrics import HANDOVER_RECORDS_FAILED

#: How long a read waits for a new follower to catch up before the reconcile tries again at the next poll.
CATCH_UP_WAIT = 5.0


class HandoverBehind(RuntimeError):
    """The follower has not yet read what the handover topic held when it started: its view is older than
    what an earlier operator (or this one) may already have reported, so nothing may be reported from it."""


class HandoverReaders:
    """Per (cluster, handover topic): a follower tailing it and a topic handle for writes.

    A follower starts from the beginning of the topic. Until it has read up to where the topic ended when it
    started (its first sync), its view is older than the status a previous operator wrote: a restarted
    operator would report partitions handed over as pending and positions as not started, for one poll, and
    the lag metrics and alerts with it. So `replay` refuses (HandoverBehind) until that first sync is served;
    after it, the view only moves forward."""

    def __init__(self) -> None:
        self._followers: dict[tuple[str, str], HandoverFollower[int]] = {}
        self._caught_up_at: dict[tuple[str, str], int] = {}
        self._topics: dict[tuple[str, str], HandoverTopic] = {}
        self._ensured: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        #: The async face of this door: `await readers.aio.replay(...)` (see `AsyncHandoverReaders`).
        self.aio = AsyncHandoverReaders(self)

    def _key(self, bootstrap: str, config: Mapping[str, str], topic: str) -> tuple[str, str]:
        return (connection_key(bootstrap, config), topic)

    def _topic(self, bootstrap: str, config: Mapping[str, str], topic: str) -> HandoverTopic:
        """The write handle of one handover topic (opened once; it holds a Kafka producer)."""
        key = self._key(bootstrap, config, topic)
        with self._lock:
            handle = self._topics.get(key)
            if handle is None:
                handle = self._topics[key] = HandoverTopic(bootstrap, topic, dict(config), client_id="reprise-operator")
            return handle

    def ensure(self, bootstrap: str, config: Mapping[str, str], topic: str) -> None:
        """Create the handover topic if missing, once per process and cluster (not once per replay); make its
        producer meanwhile: made at the first teardown's tombstones instead, it held that Complete up by its
        connection and producer id, up to a second on a busy broker (benchmarks/end_to_end)."""
        key = self._key(bootstrap, config, topic)
        if key in self._ensured:
            return
        handle = self._topic(bootstrap, config, topic)
        handle.ensure()
        handle.producer  # noqa: B018 - the property makes the producer
        self._ensured.add(key)

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
        return len(self._topic(bootstrap, config, topic).force_handover(replay_id, offsets, by=by, reason=reason))

    def tombstone(self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str) -> int:
        """Delete every record of the replay (compaction then drops them); how many keys."""
        return self._topic(bootstrap, config, topic).tombstone(replay_id)

    def replay(
        self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str, wait: float = CATCH_UP_WAIT
    ) -> ReplayHandover:
        """What the handover topic says of one replay, as of the follower's last read; HandoverBehind while
        a new follower has not caught up with the topic (waiting up to `wait` seconds for it first)."""
        key = self._key(bootstrap, config, topic)
        with self._lock:
            follower = self._followers.get(key)
            if follower is None:
                follower = HandoverFollower(
                    bootstrap,
                    topic,
                    dict(config),
                    derive=lambda view: 0,
                    interval=0.2,
                    client_id="reprise-operator-follower",
                    failures=HANDOVER_RECORDS_FAILED,
                ).start()
                self._followers[key] = follower
                self._caught_up_at[key] = follower.request_sync()
            ticket = self._caught_up_at[key]
        if not follower.synced(ticket) and not follower.wait_synced(ticket, wait):
            raise HandoverBehind(
                f"reading handover topic {topic} from its start (a new reader{': ' + follower.error if follower.error else ''}); "
                "progress is reported once it has caught up"
            )
        with follower.locked_view() as view:
            return copy.deepcopy(view.replay(replay_id))

    def sync(self, bootstrap: str, config: Mapping[str, str], topic: str, timeout: float = 10.0) -> bool:
        """Wait until the follower has read everything written so far (before a decision that needs it)."""
        key = self._key(bootstrap, config, topic)
        with self._lock:
            follower = self._followers.get(key)
        if follower is None:
            return True
        return follower.wait_synced(follower.request_sync(), timeout)

    def close(self) -> None:
        with self._lock:
            for follower in self._followers.values():
                follower.stop()
            for handle in self._topics.values():
                handle.close()
            self._followers.clear()
            self._caught_up_at.clear()
            self._topics.clear()


class AsyncHandoverReaders:
    """The handover topics' door for reconcile code: the same calls as `HandoverReaders`, awaitable.

    Each call may block on Kafka (a new follower catching up, a flush of the records written), so it runs on a
    worker thread; that hop lives here, once, instead of in every reconcile step."""

    def __init__(self, readers: HandoverReaders) -> None:
        self._readers = readers

    async def ensure(self, bootstrap: str, config: Mapping[str, str], topic: str) -> None:
        await asyncio.to_thread(self._readers.ensure, bootstrap, config, topic)

    async def replay(
        self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str, wait: float = CATCH_UP_WAIT
    ) -> ReplayHandover:
        return await asyncio.to_thread(self._readers.replay, bootstrap, config, topic, replay_id, wait)

    async def sync(self, bootstrap: str, config: Mapping[str, str], topic: str, timeout: float = 10.0) -> bool:
        return await asyncio.to_thread(self._readers.sync, bootstrap, config, topic, timeout)

    async def bootstrap(self, settings: WorkerSettings, config: Mapping[str, str]) -> str | None:
        return await asyncio.to_thread(self._readers.bootstrap, settings, config)

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
        return await asyncio.to_thread(
            lambda: self._readers.force_handover(bootstrap, config, topic, replay_id, offsets, by=by, reason=reason)
        )

    async def tombstone(self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str) -> int:
        return await asyncio.to_thread(self._readers.tombstone, bootstrap, config, topic, replay_id)

    async def close(self) -> None:
        await asyncio.to_thread(self._readers.close)
