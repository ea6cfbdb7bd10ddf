"""One tenant floods the shared operator (security review H4): many Reconsumes, each with its own Secret and an
unreachable bootstrap string, while another namespace's replay runs. Shared by the integration test (a smaller
flood, `make test`) and the soak test (300 resources, `make soak`).

Every address is on loopback and refuses connections (a port nothing listens on), written in spellings that name
the same host:port (`127.0.0.1:1234`, `127.0.0.1:01234`, `LOCALHOST:1234`, duplicates in one list): the operator
must key its clients on what they connect to, not on how a tenant spelled it. The operator process's threads
(`/proc/<pid>/task`) and resident memory are sampled for the whole run.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.fixtures.kube import wait_for

from .scenario import KeepProducing, apply, reconsume, wait_phase


def closed_loopback_ports(count: int, first: int = 1100) -> list[int]:
    """Ports below 10000 on 127.0.0.1 that refuse a connection now (so a leading zero still fits the CRD's
    five digits)."""
    found: list[int] = []
    port = first
    while len(found) < count and port < 10_000:
        with socket.socket() as probe:
            probe.settimeout(0.2)
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                found.append(port)
        port += 7
    assert len(found) == count, f"only {len(found)} closed loopback ports found"
    return found


def spellings(port: int) -> list[str]:
    """Bootstrap strings that all name 127.0.0.1:<port> (localhost is loopback too)."""
    return [
        f"127.0.0.1:{port}",
        f"127.0.0.1:0{port}",
        f"LOCALHOST:{port}",
        f"localhost:0{port}",
        f"127.0.0.1:{port},127.0.0.1:{port}",
        f"LocalHost:{port},127.0.0.1:0{port}",
    ]


def flood_objects(count: int, ports: list[int]) -> list[dict]:
    """`count` Secrets with distinct content and as many Rewind Reconsumes, each naming its own Secret and one
    unreachable bootstrap string."""
    addresses = [s for port in ports for s in spellings(port)]
    objects: list[dict] = []
    for i in range(count):
        name = f"flood-{i:03d}"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "labels": {"reprise.io/kafka-client": "true"}},
                "stringData": {"client.id": f"tenant-a-{i}"},
            }
        )
        objects.append(
            {
                "apiVersion": "reprise.io/v1alpha1",
                "kind": "Reconsume",
                "metadata": {"name": name},
                "spec": {
                    "kafka": {
                        "bootstrapServers": addresses[i % len(addresses)],
                        "configFrom": {"secretRef": {"name": name}},
                    },
                    "topics": ["orders"],
                    "consumerGroup": f"group-{i}",
                    "mode": "Rewind",
                    "liveDeployment": {"name": "orders"},
                    "start": {"earliest": True},
                },
            }
        )
    return objects


def process_figures(pid: int) -> tuple[int, int]:
    """(threads, resident KiB) of a process, from /proc."""
    threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return threads, rss


@dataclass
class Sampler:
    """Samples a process's threads and RSS in a thread until stopped; keeps the first and the peaks."""

    pid: int
    first: tuple[int, int] = (0, 0)
    peak_threads: int = 0
    peak_rss_kib: int = 0
    last: tuple[int, int] = (0, 0)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "Sampler":
        self.first = self.last = process_figures(self.pid)
        self.peak_threads, self.peak_rss_kib = self.first
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                self.last = process_figures(self.pid)
            except (FileNotFoundError, ProcessLookupError):
                return  # the process died: the test reports it
            self.peak_threads = max(self.peak_threads, self.last[0])
            self.peak_rss_kib = max(self.peak_rss_kib, self.last[1])

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def report(self) -> str:
        return (
            f"threads {self.first[0]} at start, peak {self.peak_threads}, {self.last[0]} at end; "
            f"RSS {self.first[1] // 1024} MiB at start, peak {self.peak_rss_kib // 1024} MiB, {self.last[1] // 1024} MiB at end"
        )


@dataclass
class FloodResult:
    sampler: Sampler
    victim_complete: bool
    victim_seconds: float
    victim_error: str
    looked_at: int
    parked: int
    count: int

    def report(self) -> str:
        victim = (
            f"the other namespace's replay reached Complete after {self.victim_seconds:.0f}s"
            if self.victim_complete
            else f"the other namespace's replay did NOT complete ({self.victim_seconds:.0f}s): {self.victim_error[:300]}"
        )
        return (
            f"{self.count} flood resources, {self.looked_at} with a status, {self.parked} parked (NamespaceLimit); "
            f"{self.sampler.report()}; {victim}"
        )


def flood_status(kube, namespace: str) -> tuple[int, int]:
    """(resources with a status, resources parked with NamespaceLimit) in the flood's namespace."""
    items = json.loads(kube.kubectl("get", "reconsumes", "-n", namespace, "-o", "json").stdout)["items"]
    looked = [i for i in items if (i.get("status") or {}).get("conditions") or (i.get("status") or {}).get("phase")]
    parked = [
        i
        for i in looked
        if any(
            c.get("type") == "Waiting" and c.get("status") == "True" and c.get("reason") == "NamespaceLimit"
            for c in i["status"].get("conditions") or []
        )
    ]
    return len(looked), len(parked)


def run_flood(
    kube, kafka, operator, victim_namespace: str, topic: str, live_service: Path, count: int, victim_timeout: float
) -> FloodResult:
    """Flood one namespace with `count` resources, then run a Parallel replay in `victim_namespace` meanwhile;
    the figures of the operator process over the whole run. The flood's namespace is deleted at the end."""
    assert operator.pid is not None
    flood_ns = f"flood-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", flood_ns)
    try:
        with Sampler(operator.pid) as sampler:
            ports = closed_loopback_ports(max(1, count // 12))
            docs = "\n---\n".join(yaml.safe_dump(o) for o in flood_objects(count, ports))
            kube.kubectl("apply", "-n", flood_ns, "-f", "-", input=docs, timeout=300)
            # Every flood resource has been looked at (planning against its address, or parked) before the
            # other namespace's replay starts, so the replay runs while the flood holds whatever it holds.
            try:
                wait_for(lambda: flood_status(kube, flood_ns)[0] >= count, 120, "the operator to look at the flood")
            except AssertionError:
                pass  # reported below: how many it looked at
            began = time.monotonic()
            complete, error = False, ""
            with KeepProducing(kafka.bootstrap, topic):
                apply(
                    kube,
                    victim_namespace,
                    reconsume("victim", kafka.bootstrap, topic, "Parallel", "accounts", str(live_service)),
                )
                try:
                    wait_phase(kube, victim_namespace, "reconsume", "victim", "Complete", victim_timeout)
                    complete = True
                except AssertionError as exc:
                    error = str(exc)
            seconds = time.monotonic() - began
            looked, parked = flood_status(kube, flood_ns)
        return FloodResult(sampler, complete, seconds, error, looked, parked, count)
    finally:
        kube.kubectl("delete", "namespace", flood_ns, "--wait=false", "--ignore-not-found", check=False)


#: The bounds, over the operator process's figures when the flood starts: at most this many more threads
#: (a bounded number of Kafka clients of about 5 threads each, and the bounded Kafka pool) ...
MAX_EXTRA_THREADS = 200
#: ... and at most this much more resident memory (the chart's limit is 512 MiB for the whole process).
MAX_EXTRA_RSS_MIB = 150
#: The chart's default `limits.maxActivePerNamespace`: what the flood may have active, the rest parked.
PER_NAMESPACE = 20


def assert_bounded(result: FloodResult, flood: int) -> None:
    """What a flood of `flood` resources must leave: the other namespace's replay Complete, the operator's threads
    and memory within the bounds, and the excess over the namespace's limit parked."""
    sampler = result.sampler
    assert result.victim_complete, result.report()
    assert sampler.peak_threads - sampler.first[0] <= MAX_EXTRA_THREADS, result.report()
    assert (sampler.peak_rss_kib - sampler.first[1]) // 1024 <= MAX_EXTRA_RSS_MIB, result.report()
    assert result.parked >= flood - PER_NAMESPACE, (
        f"the excess over the namespace's limit must be parked: {result.report()}"
    )
