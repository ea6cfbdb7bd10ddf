"""What every demo shares: the platform `make run` started, the examples as manifests, and a live view.

`connect()` finds the running local platform (its state file) or says to start `make run`; `Cluster` runs the
platform's kubectl and knows its Kafka bootstrap; `follow()` prints a resource's status line each time it
changes until the resource is Complete or Failed, calling back on the way (to approve a plan, say); `example()`
reads a manifest of `examples/` as it is, so a demo shows exactly which fields, if any, it changes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from local_platform.platform import read_state

REPO = Path(__file__).resolve().parents[2]
#: Files the demos' services and handlers share (they run as local processes on the node agent).
WORKDIR = REPO / ".reprise" / "demo"
FINISHED = ("Complete", "Failed")


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


class Cluster:
    """The local platform of `make run`: its kubectl, kubeconfig and Kafka bootstrap."""

    def __init__(self, state: dict) -> None:
        self.kubectl_path = state["kubectl"]
        self.kubeconfig = state["kubeconfig"]
        self.bootstrap = state["bootstrap"]
        self.state = state
        #: Where the pods a demo makes reach Kafka: on the real node the bridge's address of the host, not loopback.
        self.pod_bootstrap = state.get("pod_bootstrap") or state["bootstrap"]
        #: `make run NODE=real`: pods are containers of images on a kubelet + containerd (containers.py).
        self.real_node = state.get("node_kind") == "real"

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args], input=input, capture_output=True, text=True
        )
        if check and proc.returncode != 0:
            raise SystemExit(f"demo: kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def apply(self, namespace: str, obj: dict) -> None:
        self.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))

    def get(self, namespace: str, kind: str, name: str) -> dict | None:
        out = self.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found")
        return json.loads(out) if out.strip() else None

    def fresh(self, namespace: str, kind: str, name: str) -> None:
        """The namespace exists and holds no `kind/name` of an earlier run (its finalizer has run)."""
        self.kubectl("create", "namespace", namespace, check=False)
        self.kubectl("delete", kind, name, "-n", namespace, "--ignore-not-found", "--wait=true", "--timeout=180s")

    def secret(self, namespace: str, name: str, settings: dict[str, str]) -> None:
        """A Kafka client Secret (librdkafka settings) for `spec.kafka.configFrom`, labelled for the operator."""
        metadata = {"name": name, "labels": {"reprise.io/kafka-client": "true"}}
        self.apply(namespace, {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "stringData": settings})

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 4})  # not its info lines on exit


def connect() -> Cluster:
    state = read_state()
    if not state or not state.get("bootstrap"):
        print("reprise: no local platform is running: start `make run` in another shell first", file=sys.stderr)
        raise SystemExit(2)
    cluster = Cluster(state)
    say(f"Kafka at {cluster.bootstrap}, kubeconfig {cluster.kubeconfig}")
    prometheus = (state.get("urls") or {}).get("prometheus")
    if prometheus:  # the chart's alerts, evaluated while the demo runs
        say(f"Prometheus at {prometheus}: curl -s {prometheus}/api/v1/alerts (RepriseReplayStalled, lag alerts, ...)")
    WORKDIR.mkdir(parents=True, exist_ok=True)
    return cluster


def example(name: str) -> dict:
    """examples/<name>.yaml as it is in the repository."""
    return yaml.safe_load((REPO / "examples" / f"{name}.yaml").read_text())


def create_topic(cluster: Cluster, topic: str, partitions: int, config: dict[str, str] | None = None) -> bool:
    """Create `topic` unless it exists; True when it was created now."""
    admin = cluster.admin()
    if topic in admin.list_topics(timeout=10).topics:
        return False
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result()
    return True


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None, list, int | None]]) -> int:
    """(key, value, headers, timestamp ms or None) records, flushed; returns how many."""
    # log_level 3: a short-lived producer's warnings on close ("Failed to acquire idempotence PID ... destroyed")
    # are not the demo's story; errors still show.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True, "log_level": 3})
    count = 0
    for key, value, headers, timestamp in records:
        extra = {"timestamp": timestamp} if timestamp is not None else {}
        while True:
            try:
                producer.produce(topic, key=key, value=value, headers=headers, **extra)
                break
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.1)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)
    return count


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "reprise-demo-ends"})
    try:
        for attempt in range(30):
            try:
                return {
                    p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
                }
            except KafkaException:  # a topic created a moment ago has no leader yet
                if attempt == 29:
                    raise
                time.sleep(1)
        raise AssertionError("unreachable")
    finally:
        reader.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (partitions it never committed are left out)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        reader.close()


def lag(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    ends, done = end_offsets(bootstrap, topic, partitions), committed(bootstrap, group, topic, partitions)
    return sum(end - done.get(p, 0) for p, end in ends.items())


def wait_caught_up(bootstrap: str, group: str, topics: dict[str, int], what: str) -> None:
    """Until `group` has committed the end of every partition of `topics` ({topic: partitions})."""
    shown = None
    while True:
        try:
            remaining = sum(lag(bootstrap, group, t, n) for t, n in topics.items())
        except Exception as exc:  # the group coordinator is still being elected
            say(f"  waiting for the group coordinator ({exc})")
            remaining = -1
        if remaining == 0:
            return
        if remaining > 0 and remaining != shown:
            say(f"  {what}: lag {remaining:,}")
            shown = remaining
        time.sleep(2)


def follow(
    cluster: Cluster,
    namespace: str,
    kind: str,
    name: str,
    describe: Callable[[dict], str],
    on_status: Callable[[dict], None] | None = None,
    interval: float = 2.0,
) -> dict:
    """Print `describe(status)` each time it changes until the resource is Complete or Failed; returns its body.

    `on_status(body)` runs at every look (to approve a plan, start a consumer ...)."""
    last = None
    while True:
        body = cluster.get(namespace, kind, name)
        if body is None:
            raise SystemExit(f"demo: {kind}/{name} in {namespace} is gone")
        status = body.get("status") or {}
        line = f"  phase {status.get('phase', '-'):<10} {describe(status)}"
        if line != last:
            say(line)
            last = line
        if on_status is not None:
            on_status(body)
        if status.get("phase") in FINISHED:
            if status.get("phase") == "Failed":
                failed = next((c for c in status.get("conditions") or [] if c.get("type") == "Failed"), {})
                say(f"  Failed: {failed.get('reason')}: {failed.get('message')}")
            return body
        time.sleep(interval)


def show_plan(status: dict) -> None:
    """The per-partition plan of a resource at PlanReady, one line each."""
    for p in (status.get("plan") or {}).get("partitions") or []:
        say(
            f"    plan {p.get('topic')}[{p.get('partition')}]: offsets {p.get('startOffset')} to {p.get('endOffset')} "
            f"({p.get('records', '-')} records)"
        )


def approve_at_plan_ready(cluster: Cluster, namespace: str, kind: str, name: str) -> Callable[[dict], None]:
    """An `on_status` for `follow`: at PlanReady, show the plan and approve it, once."""
    approved = {"done": False}

    def approve(body: dict) -> None:
        status = body.get("status") or {}
        if status.get("phase") == "PlanReady" and not approved["done"]:
            planned = next(
                (c.get("message") for c in status.get("conditions") or [] if c.get("type") == "PlanReady"), ""
            )
            say(f"    plan: {planned}")
            show_plan(status)
            say(f"  approving: kubectl annotate -n {namespace} {kind}/{name} reprise.io/approve=true")
            cluster.kubectl("annotate", "-n", namespace, f"{kind}/{name}", "reprise.io/approve=true", "--overwrite")
            approved["done"] = True

    return approve


def check(ok: bool, passed: str, failed: str) -> bool:
    say(f"check {'passed' if ok else 'FAILED'}: {passed if ok else failed}")
    return ok


def run(main: Callable[[Cluster], bool]) -> None:
    """The demo's entry point: connect, run, and exit 0 only when it ended Complete with its check passing."""
    began = time.monotonic()
    ok = main(connect())
    say(f"{'done' if ok else 'FAILED'} in {time.monotonic() - began:.0f}s")
    raise SystemExit(0 if ok else 1)
