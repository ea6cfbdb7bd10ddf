"""Operator benchmarks on the local platform (real API server, controller manager, broker; the operator as a
process). Figures, not assertions: `make bench` prints them next to their targets.

- apply -> standby Deployment created, over 50 Reconsumes: p50 <= 1 s, p99 <= 3 s;
- 200 Reconsumes in flight: operator RSS <= 300 MiB, and Kafka admin requests per poll cycle at 200 in
  flight compared with 20 in flight (the ratio must stay near 1: the load does not grow with the count);
- lag zero (plus drainedFor) -> Complete: at most two poll intervals.

The in-flight replays use a pod template whose image the node agent does not run, so 200 of them cost the
machine nothing but the operator's own work.

    python -m benchmarks.operator [--count 200] [--latency-count 50]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from kubernetes import client, config, watch

from local_platform.kafka_broker import KafkaBroker
from local_platform.control_plane import ControlPlane
from local_platform.node_agent import NodeAgent
from local_platform.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
POLL_INTERVAL = 2.0


def _reconsume(name: str, bootstrap: str, topic: str) -> dict:
    return {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Reconsume",
        "metadata": {"name": name},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap},
            "topics": [topic],
            "consumerGroup": "bench-live",
            "mode": "Parallel",
            "start": {"earliest": True},
            "consumer": {
                "template": {"spec": {"containers": [{"name": "idle", "image": "bench/idle:1"}]}},
                "env": [{"name": "REPRISE_HANDLER", "value": "bench.handler:handle"}],
            },
        },
    }


def _metric(port: int, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Bench:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.broker = KafkaBroker(workdir / "kafka")
        self.control_plane = ControlPlane(workdir / "cp")
        self.agent: NodeAgent | None = None
        self.operator: OperatorProcess | None = None

    def __enter__(self) -> "Bench":
        self.broker.start()
        self.control_plane.start()
        self.agent = NodeAgent(self.control_plane.kubeconfig, self.workdir / "agent")
        self.agent.start()
        kubectl = str(self.control_plane.kubectl)
        import subprocess

        subprocess.run(
            [
                kubectl,
                f"--kubeconfig={self.control_plane.kubeconfig}",
                "apply",
                "--server-side",
                "-f",
                str(REPO / "crds"),
            ],
            check=True,
            capture_output=True,
        )
        self.operator = OperatorProcess(
            self.control_plane.kubeconfig, self.workdir / "operator.log", {"REPRISE_POLL_INTERVAL": str(POLL_INTERVAL)}
        )
        self.operator.start()
        self.api = config.new_client_from_config(config_file=str(self.control_plane.kubeconfig))
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        return self

    def __exit__(self, *_: object) -> None:
        for part in (self.operator, self.agent, self.control_plane, self.broker):
            if part is not None:
                try:
                    part.stop()
                except Exception:
                    pass

    def namespace(self, name: str) -> str:
        self.core.create_namespace({"metadata": {"name": name}})
        return name

    def create(self, namespace: str, body: dict) -> None:
        self.custom.create_namespaced_custom_object("reprise.io", "v1alpha1", namespace, "reconsumes", body)


def latency(bench: Bench, topic: str, count: int) -> dict:
    """Seconds from each create call returning to its Deployment appearing in a watch."""
    ns = bench.namespace("bench-latency")
    seen: dict[str, float] = {}
    done = threading.Event()

    def watch_deployments() -> None:
        w = watch.Watch()
        for event in w.stream(bench.apps.list_namespaced_deployment, ns, timeout_seconds=600):
            if event["type"] == "ADDED":
                seen.setdefault(event["object"].metadata.labels.get("reprise.io/replay", ""), time.monotonic())
            if done.is_set() or len(seen) >= count:
                w.stop()

    watcher = threading.Thread(target=watch_deployments, daemon=True)
    watcher.start()
    time.sleep(1)
    created: dict[str, float] = {}
    for i in range(count):
        name = f"lat-{i}"
        bench.create(ns, _reconsume(name, bench.broker.bootstrap, topic))
        created[name] = time.monotonic()
        time.sleep(0.2)  # an apply every 200 ms: a team applying a batch of manifests
    deadline = time.monotonic() + 120
    while len(seen) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    done.set()
    delays = [seen[n] - created[n] for n in created if n in seen]
    return {
        "created": count,
        "deployments_seen": len(delays),
        "p50_s": round(_percentile(delays, 0.5), 3) if delays else None,
        "p99_s": round(_percentile(delays, 0.99), 3) if delays else None,
        "target": "p50 <= 1 s, p99 <= 3 s",
    }


def in_flight(bench: Bench, topic: str, count: int, label: str) -> dict:
    """Operator RSS and admin requests per poll cycle with `count` Reconsumes running."""
    ns = bench.namespace(f"bench-{label}")
    for i in range(count):
        bench.create(ns, _reconsume(f"r-{i}", bench.broker.bootstrap, topic))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        items = bench.custom.list_namespaced_custom_object("reprise.io", "v1alpha1", ns, "reconsumes")["items"]
        if sum(1 for i in items if (i.get("status") or {}).get("phase") == "Running") >= count:
            break
        time.sleep(1)
    time.sleep(3 * POLL_INTERVAL)
    port = bench.operator.metrics_port  # type: ignore[union-attr]
    window = 6 * POLL_INTERVAL
    before = _metric(port, "reprise_kafka_admin_requests_total")
    time.sleep(window)
    after = _metric(port, "reprise_kafka_admin_requests_total")
    per_cycle = (after - before) / (window / POLL_INTERVAL)
    return {
        "in_flight": count,
        "admin_requests_per_cycle": round(per_cycle, 1),
        "operator_rss_mib": round(_rss_mib(bench.operator.pid), 1),
    }  # type: ignore[union-attr, arg-type]


def completion_delay(bench: Bench, drained_for: float = 2.0) -> dict:
    """Poll intervals from "the replay group reached its goal" (+ drainedFor) to phase Complete.

    A Parallel replay with real worker pods on a quiet topic whose live group sits at the end: the replay
    stops every partition at the live group's offsets (its handover records appear), and the operator must
    then complete within two poll intervals once drainedFor has passed."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from replay_worker.topic.handover_topic import HandoverTopic

    topic = "bench-complete"
    bench.broker.create_topic(topic, 3)
    producer = Producer({"bootstrap.servers": bench.broker.bootstrap})
    for i in range(3000):
        producer.produce(topic, key=str(i).encode(), value=json.dumps({"user": f"u-{i}", "locale": "et"}).encode())
    producer.flush(30)
    live = Consumer({"bootstrap.servers": bench.broker.bootstrap, "group.id": "bench-live-complete"})
    ends = [
        TopicPartition(topic, p, live.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]) for p in range(3)
    ]
    live.commit(offsets=ends, asynchronous=False)
    live.close()
    ns = bench.namespace("bench-complete")
    body = _reconsume("complete", bench.broker.bootstrap, topic)
    body["spec"]["consumerGroup"] = "bench-live-complete"
    body["spec"]["completion"] = {"drainedFor": f"{drained_for:g}s"}
    body["spec"]["consumer"] = {
        "template": {"spec": {"containers": [{"name": "worker", "image": "reprise-bench/worker:1"}]}},
        "env": [
            {"name": "REPRISE_HANDLER", "value": "examples.accounts_service.handlers:apply_batch"},
            {"name": "ACCOUNTS_DB", "value": str(bench.workdir / "accounts.sqlite")},
        ],
    }
    bench.create(ns, body)
    handover = HandoverTopic(bench.broker.bootstrap)
    reached = completed = None
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and completed is None:
            obj = bench.custom.get_namespaced_custom_object("reprise.io", "v1alpha1", ns, "reconsumes", "complete")
            status = obj.get("status") or {}
            if reached is None and status.get("phase") == "Running":
                rid = f"{ns}/complete/{obj['metadata']['uid'][:8]}"
                state = handover.read_replay(rid)
                if state.planned and state.all_handed_over:
                    reached = time.monotonic()
            if status.get("phase") == "Complete":
                completed = time.monotonic()
            time.sleep(0.1)
    finally:
        handover.close()
    if reached is None or completed is None:
        return {"error": "the replay did not complete within 180 s"}
    intervals = (completed - reached - drained_for) / POLL_INTERVAL
    return {
        "poll_interval_s": POLL_INTERVAL,
        "drained_for_s": drained_for,
        "goal_to_complete_s": round(completed - reached, 2),
        "poll_intervals_after_drained_for": round(intervals, 2),
        "target": "<= 2 poll intervals",
    }


def run(count: int | None = None, latency_count: int | None = None) -> dict:
    quick = os.environ.get("REPRISE_BENCH_QUICK") == "1"
    count = count or (20 if quick else 200)
    latency_count = latency_count or (10 if quick else 50)
    with tempfile.TemporaryDirectory(prefix="reprise-bench-operator-") as tmp, Bench(Path(tmp)) as bench:
        topic = "bench-operator"
        bench.broker.create_topic(topic, 3)
        results = {"completion": completion_delay(bench)}
        results["latency"] = latency(bench, topic, latency_count)
        small = in_flight(bench, topic, max(1, count // 10), "small")
        large = in_flight(bench, topic, count, "large")  # cumulative: small + large are in flight
        large["in_flight"] += small["in_flight"]
        results["in_flight_small"] = small
        results["in_flight_large"] = large
        results["admin_requests_growth"] = round(
            large["admin_requests_per_cycle"] / max(small["admin_requests_per_cycle"], 1e-9), 2
        )
        results["targets"] = "RSS <= 300 MiB at 200 in flight; admin requests per cycle ratio (large/small) ~1"
        lat, done = results["latency"], results["completion"]
        results["meets_target"] = bool(
            lat.get("p50_s") is not None
            and lat["p50_s"] <= 1.0
            and lat["p99_s"] <= 3.0
            and large["operator_rss_mib"] <= 300
            and results["admin_requests_growth"] <= 1.5
            and done.get("poll_intervals_after_drained_for", 99) <= 2.0
        )
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--latency-count", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(run(args.count, args.latency_count), indent=2))


if __name__ == "__main__":
    main()
