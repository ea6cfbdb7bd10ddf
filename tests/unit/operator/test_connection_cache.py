"""The operator's Kafka connections are bounded in number and closed when idle (security review H4): the cache's
rules with plain values, then the admin-client registry with real clients against a loopback port nothing
listens on (their threads are counted in /proc, so a client that was dropped but not destroyed fails)."""

from __future__ import annotations

import socket
from pathlib import Path

from reprise_operator.shared.connection_cache import ConnectionCache, ConnectionRetired, Retirable
from reprise_operator.doors.kafka_admin import KafkaClusters, KafkaUnavailable


class Conn(Retirable):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cache(limit: int = 2, idle: float = 60.0) -> tuple[ConnectionCache[str, Conn], Clock]:
    clock = Clock()
    return ConnectionCache(limit, idle, lambda c: c.retire(), clock), clock


def test_the_least_recently_used_connection_is_closed_beyond_the_limit() -> None:
    connections, _ = cache(limit=2)
    a = connections.get("a", lambda: Conn("a"))
    b = connections.get("b", lambda: Conn("b"))
    assert connections.get("a", lambda: Conn("a2")) is a, "a hit returns the cached connection"
    c = connections.get("c", lambda: Conn("c"))
    assert b.closed and not a.closed and not c.closed, "b was the least recently used"
    assert len(connections) == 2
    assert connections.get("b", lambda: Conn("b2")).name == "b2", "an evicted connection is made anew"


def test_a_connection_unused_for_the_idle_time_is_closed() -> None:
    connections, clock = cache(limit=10, idle=60.0)
    a = connections.get("a", lambda: Conn("a"))
    clock.now = 30.0
    b = connections.get("b", lambda: Conn("b"))
    clock.now = 61.0
    assert connections.sweep() == 1
    assert a.closed and not b.closed
    clock.now = 200.0
    connections.get("c", lambda: Conn("c"))  # a get sweeps too
    assert b.closed and len(connections) == 1


def test_a_connection_in_use_is_closed_by_its_last_call_not_under_it() -> None:
    connections, _ = cache(limit=1)
    a = connections.get("a", lambda: Conn("a"))
    with a.in_use():
        connections.get("b", lambda: Conn("b"))  # evicts a while a call uses it
        assert a.retired and not a.closed, "closed under a running call"
    assert a.closed, "the last call out closes it"
    try:
        with a.in_use():
            raise AssertionError("a retired connection must refuse new calls")
    except ConnectionRetired:
        pass


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def threads() -> int:
    return len(list(Path("/proc/self/task").iterdir()))


def test_many_connections_keep_only_the_bound_of_clients_and_their_threads() -> None:
    port = closed_port()
    clusters = KafkaClusters(limit=3, idle_seconds=600.0)
    before = threads()
    spellings = [f"127.0.0.1:{port}", f"127.0.0.1:0{port}", f"LOCALHOST:{port},localhost:{port}"]
    made = [clusters.get(spellings[i % 3], {"client.id": f"tenant-{i}"}) for i in range(40)]
    assert len(clusters) == 3, "the registry holds at most its limit"
    assert made[0] is not made[1]
    assert clusters.get(f"127.0.0.1:0{port}", {"client.id": "tenant-39"}) is made[39], "one key for every spelling"
    assert made[39].bootstrap_servers in (f"127.0.0.1:{port}", f"localhost:{port}")
    try:
        made[0].partitions(["orders"])
        raise AssertionError("an evicted connection must not be used")
    except KafkaUnavailable as exc:
        assert "make room" in str(exc)
    del made
    # librdkafka's threads of the 37 evicted clients are gone; the 3 cached ones keep theirs (about 5 each).
    assert threads() - before <= 3 * 8, f"{threads() - before} threads more than before"


def test_the_cluster_label_of_the_request_counter_is_bounded() -> None:
    from reprise_operator.doors.kafka_admin import MAX_CLUSTER_LABELS
    from reprise_operator.shared.metrics import REGISTRY

    port = closed_port()
    clusters = KafkaClusters(limit=2)
    for i in range(MAX_CLUSTER_LABELS + 10):
        cluster = clusters.get(f"127.0.0.{i + 1}:{port}")  # loopback, nothing listens
        cluster._count()  # what every request does
    # Only this test's clusters (its closed port), and "other": other tests of the same process count too.
    labels = {
        sample.labels["cluster"]
        for family in REGISTRY.collect()
        if family.name == "reprise_kafka_admin_requests"
        for sample in family.samples
        if sample.labels["cluster"] == "other" or sample.labels["cluster"].endswith(f":{port}")
    }
    assert len(labels) <= MAX_CLUSTER_LABELS + 1, "tenant-chosen addresses must not grow the label without end"
    assert "other" in labels
