"""Prometheus metrics of the worker, and its HTTP endpoint: `/metrics`, liveness `/healthz`, `/readyz`.

Counters: consumed, matched, delivered, filtered out (skipped), dead-lettered, poison skipped. Gauges per
partition: position, end offset, lag, and the handover state (0 replaying, 1 finished). Liveness means the
consume loop went round recently; a worker stuck in a handler or a dead loop stops answering 200, and
Kubernetes restarts it (which resumes from committed offsets).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

#: Values of `reprise_worker_partition_state`.
PARTITION_STATES = {"replaying": 0, "finished": 1, "paused": 2}


class WorkerMetrics:
    """One registry per worker (tests run several in a process)."""

    def __init__(self, replay_id: str, member: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"replay": replay_id, "member": member}
        self._labels = labels

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, list(labels), registry=self.registry)

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, [*labels, *extra], registry=self.registry)

        self.consumed = counter("reprise_worker_records_consumed", "Records read from the source topics").labels(
            **labels
        )
        self.matched = counter("reprise_worker_records_matched", "Records that matched the filter").labels(**labels)
        self.delivered = counter(
            "reprise_worker_records_delivered", "Records handed to the handler or forwarded"
        ).labels(**labels)
        self.skipped = counter("reprise_worker_records_skipped", "Records the filter did not match").labels(**labels)
        self.dead_lettered = counter(
            "reprise_worker_records_dead_lettered", "Poison records sent to the dead-letter topic"
        ).labels(**labels)
        self.poison_skipped = counter(
            "reprise_worker_records_poison_skipped", "Poison records counted and skipped (no DLQ)"
        ).labels(**labels)
        self.bytes = counter("reprise_worker_bytes_consumed", "Key and value bytes read").labels(**labels)
        self.commits = counter("reprise_worker_commits", "Offset commits (or committed transactions)").labels(**labels)
        self.rebalances = counter("reprise_worker_rebalances", "Partitions assigned, revoked or lost").labels(**labels)
        self.errors = counter("reprise_worker_errors", "Errors the loop recovered from").labels(**labels)
        self._position = gauge(
            "reprise_worker_partition_position", "Next offset the replay processes", ("topic", "partition")
        )
        self._end = gauge(
            "reprise_worker_partition_end", "End offset (high watermark) last seen", ("topic", "partition")
        )
        self._lag = gauge(
            "reprise_worker_partition_lag", "Records left to the end (or to the stop offset)", ("topic", "partition")
        )
        self._state = gauge(
            "reprise_worker_partition_state",
            "0 replaying, 1 finished (handed over / drained), 2 paused",
            ("topic", "partition"),
        )
        self.registry_waiting = gauge(
            "reprise_worker_schema_registry_waiting",
            "1 while a batch waits for the schema registry (unreachable: its records are not judged yet)",
        ).labels(**labels)
        self.finished_partitions = gauge(
            "reprise_worker_partitions_finished", "Partitions finished in this replay"
        ).labels(**labels)
        self.assigned_partitions = gauge(
            "reprise_worker_partitions_assigned", "Partitions assigned to this replica"
        ).labels(**labels)
        #: Each partition gauge's child per partition, made on its first value: `labels()` checks the label
        #: names (sorting them) and builds the label values on every call, which at a commit per batch and
        #: partition was most of a batch's own cost outside the records (callgrind).
        self._children: dict[tuple[str, int], dict[Gauge, Gauge]] = {}
        self.heartbeat = time.monotonic()

    def _child(self, gauge: Gauge, topic: str, partition: int) -> Gauge:
        children = self._children.setdefault((topic, partition), {})
        child = children.get(gauge)
        if child is None:
            child = children[gauge] = gauge.labels(**self._labels, topic=topic, partition=str(partition))
        return child

    def position(self, topic: str, partition: int, position: int) -> None:
        """`partition(topic, partition, position=position)`, for the commit of every batch."""
        self._child(self._position, topic, partition).set(position)

    def partition(
        self,
        topic: str,
        partition: int,
        *,
        position: int | None = None,
        end: int | None = None,
        state: str | None = None,
    ) -> None:
        if position is not None:
            self._child(self._position, topic, partition).set(position)
        if end is not None:
            self._child(self._end, topic, partition).set(end)
        if position is not None and end is not None:
            self._child(self._lag, topic, partition).set(max(0, end - position))
        if state is not None:
            self._child(self._state, topic, partition).set(PARTITION_STATES[state])

    def forget(self, topic: str, partition: int) -> None:
        """A partition left this replica: its gauges are someone else's now."""
        self._children.pop((topic, partition), None)
        labels = {**self._labels, "topic": topic, "partition": str(partition)}
        for gauge in (self._position, self._end, self._lag, self._state):
            try:
                gauge.remove(*labels.values())
            except KeyError:
                pass

    def beat(self) -> None:
        self.heartbeat = time.monotonic()

    def render(self) -> bytes:
        return generate_latest(self.registry)


#: How often the serving thread looks for a stop between requests. `stop()` waits for that look, and a pod's
#: teardown waits for its process to end: at socketserver's default (0.5 s) a replica's exit waited 0.25 s on
#: average for it (benchmarks/end_to_end's teardown). Twenty looks a second cost nothing measurable.
SHUTDOWN_LOOK_S = 0.05


class HealthServer:
    """Serves `/metrics`, `/healthz` (the loop beat within `stale_after` seconds) and `/readyz`."""

    def __init__(
        self,
        port: int,
        render: Callable[[], bytes],
        alive: Callable[[], bool],
        ready: Callable[[], bool],
        host: str = "0.0.0.0",
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, outer.render(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = outer.alive()
                    self._reply(200 if ok else 503, b"ok\n" if ok else b"stale\n", "text/plain")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._reply(200 if ok else 503, b"ready\n" if ok else b"not ready\n", "text/plain")
                else:
                    self._reply(404, b"not found\n", "text/plain")

            def _reply(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass  # scrapes and probes every few seconds would flood the JSON log

        self.render, self.alive, self.ready = render, alive, ready
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(SHUTDOWN_LOOK_S,), name="reprise-metrics", daemon=True
        )

    def start(self) -> "HealthServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
