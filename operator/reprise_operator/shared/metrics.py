"""The operator's Prometheus metrics and its `/metrics` + `/healthz` endpoint.

Metric names are the contract with the chart's PrometheusRule and Grafana dashboard; a test checks the
alert expressions against `METRIC_NAMES`. Labels name resources, never settings: no Secret value can
reach a label.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily

REGISTRY = CollectorRegistry(auto_describe=True)

RECONCILE_ERRORS = Counter(
    "reprise_reconcile_errors",
    "Reconcile steps that failed, by kind and reason (temporary errors are retried).",
    ["kind", "reason"],
    registry=REGISTRY,
)
REPLAY_LAG = Gauge(
    "reprise_replay_lag_records",
    "Records a running replay still has to process, summed over its partitions.",
    ["kind", "namespace", "name"],
    registry=REGISTRY,
)
REPLAY_ETA = Gauge(
    "reprise_replay_eta_seconds",
    "Estimated seconds until a running replay has no lag, from its recent rate.",
    ["kind", "namespace", "name"],
    registry=REGISTRY,
)
REPLAY_PROCESSED = Gauge(
    "reprise_replay_processed_records",
    "Records a replay has processed so far (throughput is its rate).",
    ["kind", "namespace", "name"],
    registry=REGISTRY,
)
REPLAY_PROGRESS_AGE = Gauge(
    "reprise_replay_progress_unchanged_seconds",
    "Seconds since a running replay's processed count last moved (stall detection).",
    ["kind", "namespace", "name"],
    registry=REGISTRY,
)
HANDOVER_PENDING = Gauge(
    "reprise_handover_partitions_pending",
    "Partitions of a Handover replay not yet acknowledged by the live side.",
    ["namespace", "name"],
    registry=REGISTRY,
)
BARRIER_REMAINING = Gauge(
    "reprise_backfill_barrier_remaining_records",
    "Records a downstream group still has to consume before a Backfill's barrier passes.",
    ["namespace", "name", "group"],
    registry=REGISTRY,
)
BARRIER_STALLED = Gauge(
    "reprise_backfill_barrier_stalled",
    "1 while a downstream group of a Backfill is stalled (committed offset unchanged with lag).",
    ["namespace", "name", "group"],
    registry=REGISTRY,
)
HANDOVER_RECORDS_FAILED = Counter(
    "reprise_handover_follower_records_failed",
    "Handover-topic records the operator's follower could not apply, by topic and reason (a malformed record's"
    " wire code, or apply-error); the records after them are applied.",
    ["topic", "reason"],
    registry=REGISTRY,
)
KAFKA_ADMIN_REQUESTS = Counter(
    "reprise_kafka_admin_requests",
    "Admin requests sent to Kafka, by cluster bootstrap address.",
    ["cluster"],
    registry=REGISTRY,
)


class PhaseCollector:
    """`reprise_replays{kind,phase}`: how many resources are in each phase, from the operator's memory."""

    def __init__(self) -> None:
        self._phases: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    def set(self, kind: str, namespace: str, name: str, phase: str) -> None:
        with self._lock:
            self._phases[(kind, namespace, name)] = phase

    def forget(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._phases.pop((kind, namespace, name), None)
        REPLAY_GROUPS.forget(kind, namespace, name)
        for gauge in (REPLAY_LAG, REPLAY_ETA, REPLAY_PROCESSED, REPLAY_PROGRESS_AGE):
            try:
                gauge.remove(kind, namespace, name)
            except KeyError:
                pass

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("reprise_replays", "Reprise resources by kind and phase.", labels=["kind", "phase"])
        counts: dict[tuple[str, str], int] = {}
        with self._lock:
            for (kind, _, _), phase in self._phases.items():
                counts[(kind, phase)] = counts.get((kind, phase), 0) + 1
        for (kind, phase), count in sorted(counts.items()):
            family.add_metric([kind, phase], count)
        yield family


PHASES = PhaseCollector()
REGISTRY.register(PHASES)


class ReplayGroupCollector:
    """`reprise_replay_consumer_group{consumergroup,namespace,role,kind,name} 1`: the consumer groups a replay
    moves on purpose (`replay_groups`), so lag alerts can leave a sanctioned replay alone. No `job` or
    `instance` label: the scrape target's would win and rename ours `exported_*`."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def set(self, kind: str, namespace: str, name: str, groups: Iterable[tuple[str, str]]) -> None:
        """The (group, role) pairs of one resource now; none forgets it."""
        with self._lock:
            listed = sorted(set(groups))
            if listed:
                self._groups[(kind, namespace, name)] = listed
            else:
                self._groups.pop((kind, namespace, name), None)

    def forget(self, kind: str, namespace: str, name: str) -> None:
        self.set(kind, namespace, name, ())

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "reprise_replay_consumer_group",
            "1 for each consumer group a running replay moves on purpose, by role (live, replay, drain, downstream).",
            labels=["consumergroup", "namespace", "role", "kind", "name"],
        )
        with self._lock:
            for (kind, namespace, name), groups in sorted(self._groups.items()):
                for group, role in groups:
                    family.add_metric([group, namespace, role, kind, name], 1)
        yield family


REPLAY_GROUPS = ReplayGroupCollector()
REGISTRY.register(REPLAY_GROUPS)

#: Every metric family the operator exports, as Prometheus exposes them (counters get `_total`).
METRIC_NAMES = frozenset(
    {
        "reprise_replays",
        "reprise_reconcile_errors_total",
        "reprise_replay_lag_records",
        "reprise_replay_eta_seconds",
        "reprise_replay_processed_records",
        "reprise_replay_progress_unchanged_seconds",
        "reprise_handover_partitions_pending",
        "reprise_backfill_barrier_remaining_records",
        "reprise_backfill_barrier_stalled",
        "reprise_kafka_admin_requests_total",
        "reprise_handover_follower_records_failed_total",
        "reprise_replay_consumer_group",
    }
)


class Heartbeat:
    """The liveness signal: the operator's loop touches it; `/healthz` fails when it goes stale."""

    def __init__(self, stale_after: float) -> None:
        self.stale_after = stale_after
        self._last = time.monotonic()
        #: True while this replica waits for the leader Lease: it runs no loop yet, and must not be
        #: restarted by its liveness probe for waiting (the Lease renewal exits the process if it fails).
        self.standby = True

    def beat(self) -> None:
        self.standby = False
        self._last = time.monotonic()

    def healthy(self) -> bool:
        return self.standby or time.monotonic() - self._last < self.stale_after


def serve(port: int, healthy: Callable[[], bool]) -> ThreadingHTTPServer:
    """Serve `/metrics` and `/healthz` on `port` in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path.startswith("/metrics"):
                body, status, kind = generate_latest(REGISTRY), 200, CONTENT_TYPE_LATEST
            elif self.path.startswith("/healthz"):
                ok = healthy()
                body, status, kind = (b"ok\n" if ok else b"stale\n"), (200 if ok else 503), "text/plain"
            else:
                body, status, kind = b"not found\n", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # scrapes every few seconds are not news
            return

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
