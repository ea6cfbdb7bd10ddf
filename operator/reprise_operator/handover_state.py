"""The operator's view of the handover topics: one tailing reader per Kafka cluster, shared by every replay.

The replay workers and the live side's guards write the handover protocol's records (see
`replay_worker/HANDOVER.md`); the operator only reads them to follow progress, and writes in two cases:
a forced handover when a replay is cancelled mid-flight (so the live side takes every partition back at
exactly what the replay processed), and tombstones at cleanup. Tailing instead of re-reading keeps the
load on Kafka constant whatever the number of replays.
"""

from __future__ import annotations

import copy
import threading
from typing import Mapping

from replay_worker.handover import ReplayHandover
from replay_worker.handover_topic import HandoverFollower, HandoverTopic

from .kafka_admin import connection_key

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

    def _key(self, bootstrap: str, config: Mapping[str, str], topic: str) -> tuple[str, str]:
        return (connection_key(bootstrap, config), topic)

    def topic(self, bootstrap: str, config: Mapping[str, str], topic: str) -> HandoverTopic:
        key = self._key(bootstrap, config, topic)
        with self._lock:
            handle = self._topics.get(key)
            if handle is None:
                handle = self._topics[key] = HandoverTopic(bootstrap, topic, dict(config), client_id="reprise-operator")
            return handle

    def ensure(self, bootstrap: str, config: Mapping[str, str], topic: str) -> None:
        """Create the handover topic if missing, once per process and cluster (not once per replay)."""
        key = self._key(bootstrap, config, topic)
        if key in self._ensured:
            return
        self.topic(bootstrap, config, topic).ensure()
        self._ensured.add(key)

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
