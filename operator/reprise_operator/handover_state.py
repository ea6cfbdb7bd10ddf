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


class HandoverReaders:
    """Per (cluster, handover topic): a follower tailing it and a topic handle for writes."""

    def __init__(self) -> None:
        self._followers: dict[tuple[str, str], HandoverFollower[int]] = {}
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

    def replay(self, bootstrap: str, config: Mapping[str, str], topic: str, replay_id: str) -> ReplayHandover:
        """What the handover topic says of one replay, as of the follower's last read."""
        key = self._key(bootstrap, config, topic)
        with self._lock:
            follower = self._followers.get(key)
            if follower is None:
                follower = HandoverFollower(
                    bootstrap, topic, dict(config), derive=lambda view: 0, interval=0.2, client_id="reprise-operator-follower"
                ).start()
                self._followers[key] = follower
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
            self._topics.clear()

