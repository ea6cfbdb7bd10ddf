"""End-to-end benchmark: from `kubectl apply` of a Handover Reconsume to Complete, against one bare loop
reading the same records; and how that time grows with the records and the replicas.

On the local platform (real API server, controller manager, broker; the node agent runs the pods as local
processes; the operator as a process with the chart's poll interval), one topic of `records` records of 1 KiB
in 12 partitions, half of them matching the replay's filter. A guarded live service (`baselines serve`, a
Deployment) has read the topic to its end. Each round applies a new Reconsume: mode Handover, start earliest,
3 replay replicas calling a no-op handler, `completion.drainedFor: 0s` (the hold a user chooses is not
Reprise's cost), and times it to phase Complete, next to one bare read loop (`baselines read`) of the same
topic, in the order turned each round. Target: the bare loop's wall time over the replay's at least 0.7x
(Reprise's machinery costs at most 30% on top of reading). The breakdown of each replay:

- plan: apply -> phase Running (the plan made, the replay's Deployment created, and the replay bootstrapped by
  the operator meanwhile), or to the first record read when a replica reads before Running is written (the
  pods start during the operator's bootstrap; pod start is then 0);
- pod start: -> the first record read by any replica (pods scheduled and started, the bootstrap read, group join);
- replay: -> the last partition finished (its handover offset committed and published);
- handover: -> the last acknowledgement of the live service's guard;
- drain: -> phase Draining (the operator saw every partition handed over; drainedFor is 0);
- teardown: -> phase Complete (the Deployment, the replay group and the handover records removed).
When one operator step goes from Running through Draining to Complete, the 0.1 s status poll never sees
Draining: drain shows as None and teardown counts from the last acknowledgement.

CPU: the replay pods' (getrusage of this process's reaped children: the node agent runs in this process),
the operator's and the broker's (/proc), per record. And where the CPU of a whole replay (apply to Complete and
the pods reaped) went, process by process (`EndToEnd.cpu_ledger`), each given to its owner (`CPU_OWNERS`):
Reprise's (replay pods, operator, the guarded live service), the platform's (broker, kube-apiserver, etcd,
kube-controller-manager, kube-scheduler, the node agent's threads), the benchmark's own (its status poll,
kubectl apply); and the neighbours' (the machine's busy time, /proc/stat, that none of these spent). The round
lines show it per replay, the report the median of the rounds by owner and by process, next to the read loop's
own CPU and the broker's during it.

Every part runs after a warm-up (`warm_up`): one read loop and replays until the broker's JIT is quiet, none
counted. The platform is fresh, and its broker compiles over its first replays what a user's long-running broker
compiled long ago.

Growth (`--parts growth`): time to Complete at 0.1x, 1x and 3x the records (3 replicas): a least-squares
line, its fixed part (target under 10 s) and how far the points lie from it; and replicas 1, 2 and 4 at 1x,
with the CPU seconds per record of each (must not grow with the replicas; on 2 cores the speed-up is bounded);
`--parts replicas` runs that second half alone. Each replica logs its own CPU when ready to read and at its
end (`replay role ready`, `replay role done`): the round lines show them, so a replica's fixed cost is seen apart
from its reading.

    python -m benchmarks.end_to_end [--records N] [--rounds R] [--parts ratio,growth|replicas]
    (REPRISE_BENCH_KEEP=1 keeps the work folder: the operator's, the pods' and the broker's logs)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from benchmarks import measure
from benchmarks.baselines import FILTER
from benchmarks.worker import PARTITIONS, fill, records_setting, rounds_setting
from local_platform.control_plane import ControlPlane
from local_platform.kafka_broker import KafkaBroker
from local_platform.node_agent import NodeAgent
from local_platform.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
LIVE_GROUP = "bench-live"
HANDOVER_TOPIC = "reprise.handover"
REPLICAS = 3
GROWTH_SIZES = (0.1, 1.0, 3.0)
REPLICA_COUNTS = (1, 2, 4)
#: The chart's `operator.pollInterval`: what a user runs.
POLL_INTERVAL = "5"
#: `replicas` is the second half of `growth` alone (replicas 1, 2 and 4 at 1x), for a quick look at it.
PARTS = ("ratio", "growth", "replicas")
TARGETS = {"end_to_end_vs_read_loop": (0.7, True), "growth_fixed_s": (10.0, False)}


class Platform:
    """Broker, control plane, node agent, CRDs, operator; stopped by PID in reverse order."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.broker = KafkaBroker(workdir / "kafka", heap="1g")
        self.control_plane = ControlPlane(workdir / "cp")
        self.agent: NodeAgent | None = None
        self.operator: OperatorProcess | None = None

    def __enter__(self) -> "Platform":
        try:
            self.broker.start()
            self.control_plane.start()
            self.agent = NodeAgent(self.control_plane.kubeconfig, self.workdir / "agent")
            self.agent.start()
            self.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
            self.operator = OperatorProcess(
                self.control_plane.kubeconfig, self.workdir / "operator.log", {"REPRISE_POLL_INTERVAL": POLL_INTERVAL}
            )
            self.operator.start()
            api = config.new_client_from_config(config_file=str(self.control_plane.kubeconfig))
            self.custom = client.CustomObjectsApi(api)
            self.core = client.CoreV1Api(api)
            self.apps = client.AppsV1Api(api)
            self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for part in (self.operator, self.agent, self.control_plane, self.broker):
            if part is not None:
                try:
                    part.stop()
                except Exception as exc:
                    print(f"stopping {type(part).__name__} failed: {exc}", flush=True)

    def kubectl(self, *args: str) -> resource.struct_rusage:
        """Run kubectl; returns its rusage (so its CPU can be taken out of the replay's)."""
        process = subprocess.Popen(
            [str(self.control_plane.kubectl), f"--kubeconfig={self.control_plane.kubeconfig}", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {process.stderr.read().decode()[-500:]}")  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]
        return usage


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _task_cpu(tid: int) -> float:
    """User + system CPU seconds of one thread of this process, from /proc/self/task."""
    return measure.stat_cpu(f"/proc/self/task/{tid}/stat") or 0.0


def _machine_busy() -> float:
    """CPU seconds the whole machine (every core) spent busy, from /proc/stat: user, nice, system, irq,
    softirq, steal."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


_TICK = os.sysconf("SC_CLK_TCK")
#: The broker's threads by what they do, from the start of their name (/proc/<pid>/task/*/comm: the JVM names
#: the OS thread after the Java thread, cut to 15 characters): the JIT compilers and the garbage collector are the
#: JVM's, the request threads (network and handlers) serve the clients, the group coordinator the groups, and
#: KRaft keeps the cluster's metadata whatever the clients do.
BROKER_THREADS = (
    ("C1 Compiler", "JIT compilers"),
    ("C2 Compiler", "JIT compilers"),
    ("GC Thread", "garbage collector"),
    ("G1 ", "garbage collector"),
    ("VM Thread", "garbage collector"),
    ("data-plane-kaf", "requests (network, handlers)"),
    ("group-coordina", "group coordinator"),
    ("transaction-lo", "transaction coordinator"),
    ("kafka-1-raft", "KRaft (metadata, controller)"),
    ("kafka-1-metada", "KRaft (metadata, controller)"),
    ("quorum-control", "KRaft (metadata, controller)"),
    ("controller-1", "KRaft (metadata, controller)"),
    ("broker-1-to-co", "KRaft (metadata, controller)"),
)


def broker_threads(pid: int | None) -> dict[str, float]:
    """CPU seconds so far of the broker's threads, summed by what they do (`BROKER_THREADS`; "other" for the
    rest). A thread that ended since is missing from the sums: the difference of two is a lower bound."""
    found: dict[str, float] = {}
    for name, cpu in measure.thread_cpu(pid).values():
        kind = next((k for prefix, k in BROKER_THREADS if name.startswith(prefix)), "other")
        found[kind] = found.get(kind, 0.0) + cpu
    return found


def _spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {
        k: round(after.get(k, 0.0) - before.get(k, 0.0), 2)
        for k in sorted(after, key=lambda k: before.get(k, 0.0) - after.get(k, 0.0))
    }


#: Who owns which process of a replay's run: Reprise's (what this project can make cheaper), the platform's (the
#: stand-ins for a cluster's control plane and kubelet, and the Kafka broker every Kafka client pays), and the
#: benchmark's own watching. The live service is the user's, its guard Reprise's: reported as one.
CPU_OWNERS = {
    "replay pods": "reprise",
    "operator": "reprise",
    "live service (guarded)": "reprise",
    "broker": "platform",
    "kube-apiserver": "platform",
    "etcd": "platform",
    "kube-controller-manager": "platform",
    "kube-scheduler": "platform",
    "node agent": "platform",
    "kubectl apply": "benchmark",
    "benchmark poll": "benchmark",
}


def _ts(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def _log_entries(path: Path | None, message: str) -> list[dict[str, Any]]:
    """The JSON log lines of `path` whose message starts with `message`."""
    if path is None or not path.exists():
        return []
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if message not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if str(entry.get("msg", "")).startswith(message):
            found.append(entry)
    return found


def _log_times(path: Path | None, message: str) -> list[float]:
    return [_ts(entry["ts"]) for entry in _log_entries(path, message)]


def _log_values(path: Path | None, message: str, field: str) -> list[float]:
    """`field` of every JSON log line whose message starts with `message`."""
    return [float(entry[field]) for entry in _log_entries(path, message) if field in entry]


class EndToEnd:
    def __init__(self, platform: Platform, records: int) -> None:
        self.platform = platform
        self.records = records
        self.env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'operator'}"}
        self.live_pod: str | None = None
        self._live_pid_cache: dict[str, list[int]] = {}

    @property
    def bootstrap(self) -> str:
        return self.platform.broker.bootstrap

    def topic(self, records: int) -> str:
        name = f"bench-e2e-{records}"
        self.platform.broker.create_topic(name, PARTITIONS)
        print(f"writing {records:,} records of 1 KiB into {name} ({PARTITIONS} partitions)", flush=True)
        fill(self.bootstrap, name, records)
        return name

    def start_live_service(self, topics: list[str]) -> None:
        """One guarded live service per topic, each with its own live group, read to the topic's end."""
        for topic in topics:
            name = f"live-{topic}"
            command = [
                "python",
                "-m",
                "benchmarks.baselines",
                "serve",
                "--bootstrap",
                self.bootstrap,
                "--topic",
                topic,
                "--group",
                f"{LIVE_GROUP}-{topic}",
                "--handover-topic",
                HANDOVER_TOPIC,
            ]
            self.platform.apps.create_namespaced_deployment(
                NAMESPACE,
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": name},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {
                            "metadata": {"labels": {"app": name}},
                            "spec": {
                                "containers": [{"name": "app", "image": "reprise-bench/live:1", "command": command}]
                            },
                        },
                    },
                },
            )
        for topic in topics:
            self._wait_caught_up(f"{LIVE_GROUP}-{topic}", topic)

    def _wait_caught_up(self, group: str, topic: str, timeout: float = 1800) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        probe = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group})
        try:
            partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            ends = [probe.get_watermark_offsets(tp, timeout=30)[1] for tp in partitions]
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    committed = [tp.offset for tp in probe.committed(partitions, timeout=30)]
                except KafkaException:  # the group's coordinator is still loading: ask again
                    committed = []
                if committed == ends:
                    return
                time.sleep(1)
            raise RuntimeError(f"the live group {group} did not catch up on {topic} within {timeout:.0f} s")
        finally:
            probe.close()

    def cpu_ledger(self, topic: str) -> dict[str, float]:
        """CPU seconds so far of every process (or thread) that works during a replay, by owner (`CPU_OWNERS`):
        the difference of two ledgers is a run's breakdown. The replay pods' come from getrusage of the reaped
        children (the node agent runs in this process), the node agent's from its threads in /proc/self/task,
        the rest from /proc/<pid>/stat; `machine` is every core's busy time, so what nobody here spent (the
        neighbours') shows too."""
        platform = self.platform
        assert platform.agent is not None and platform.operator is not None
        agent_threads = sum(
            _task_cpu(t.native_id)
            for t in threading.enumerate()
            if t.name.startswith("node-agent-") and t.native_id is not None
        )
        ledger = {
            "replay pods": _children_cpu(),
            "operator": measure.process_cpu(platform.operator.pid),
            "live service (guarded)": sum(measure.process_cpu(pid) for pid in self._live_pids(topic)),
            "broker": measure.process_cpu(platform.broker.pid),
            **{name: measure.process_cpu(pid) for name, pid in platform.control_plane.pids().items()},
            "node agent": agent_threads,
            "benchmark poll": _self_cpu() - agent_threads,
            "machine": _machine_busy(),
        }
        return ledger

    def _live_pids(self, topic: str) -> list[int]:
        assert self.platform.agent is not None
        if topic not in self._live_pid_cache:
            pods = self.platform.core.list_namespaced_pod(NAMESPACE, label_selector=f"app=live-{topic}").items
            self._live_pid_cache[topic] = [
                pid
                for pod in pods
                if (pid := self.platform.agent.container_pid(NAMESPACE, pod.metadata.name, "app")) is not None
            ]
        return self._live_pid_cache[topic]

    def read_loop(self, topic: str, records: int, name: str) -> measure.Sample:
        argv = [
            sys.executable,
            "-m",
            "benchmarks.baselines",
            "read",
            "--bootstrap",
            self.bootstrap,
            "--topic",
            topic,
            "--records",
            str(records),
            "--group",
            name,
        ]
        threads_before = broker_threads(self.platform.broker.pid)
        sample = measure.run_processes(
            [argv],
            records,
            env=self.env,
            broker_pid=self.platform.broker.pid,
            log=self.platform.workdir / f"{name}.log",
            cwd=REPO,
        )
        sample.reported["broker_threads_s"] = _spent(threads_before, broker_threads(self.platform.broker.pid))
        return sample

    def manifest(self, name: str, topic: str, replicas: int) -> dict[str, Any]:
        return {
            "apiVersion": "reprise.io/v1alpha1",
            "kind": "Reconsume",
            "metadata": {"name": name},
            "spec": {
                "kafka": {"bootstrapServers": self.bootstrap},
                "topics": [topic],
                "consumerGroup": f"{LIVE_GROUP}-{topic}",
                "mode": "Handover",
                "start": {"earliest": True},
                "filter": {"jsonFields": [{"path": c["path"], "values": [c["equals"]]} for c in FILTER["json"]]},
                "consumer": {
                    "template": {"spec": {"containers": [{"name": "worker", "image": "reprise-bench/worker:1"}]}},
                    "replicas": replicas,
                    "env": [{"name": "REPRISE_HANDLER", "value": "benchmarks.handlers:noop"}],
                },
                "completion": {"drainedFor": "0s"},
                "cleanup": {"deleteReplayGroup": True},
            },
        }

    def replay(self, name: str, topic: str, records: int, replicas: int, timeout: float = 3600) -> measure.Sample:
        """Apply, follow to Complete, wait for the replay's processes to be reaped; the Sample's `reported`
        holds the breakdown."""
        platform = self.platform
        assert platform.agent is not None and platform.operator is not None
        path = platform.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(self.manifest(name, topic, replicas)))
        live_pids = set(platform.agent.pids())
        ledger_before = self.cpu_ledger(topic)
        threads_before = broker_threads(platform.broker.pid)
        broker_before = measure.process_cpu(platform.broker.pid)
        operator_before = measure.process_cpu(platform.operator.pid)
        children_before = _children_cpu()
        began_wall, began = time.time(), time.monotonic()
        apply_usage = platform.kubectl("apply", "-n", NAMESPACE, "-f", str(path))
        phases: dict[str, float] = {}
        pods: set[str] = set()
        deadline = time.monotonic() + timeout
        while "Complete" not in phases:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} is not Complete after {timeout:.0f} s (phases {list(phases)})")
            obj = platform.custom.get_namespaced_custom_object("reprise.io", "v1alpha1", NAMESPACE, "reconsumes", name)
            phase = (obj.get("status") or {}).get("phase")
            if phase == "Failed":
                raise RuntimeError(f"{name} failed: {obj['status'].get('message')}")
            if phase:
                phases.setdefault(phase, time.time())
            if "Running" in phases and "Draining" not in phases:
                for pod in platform.core.list_namespaced_pod(
                    NAMESPACE, label_selector=f"reprise.io/replay={name}"
                ).items:
                    pods.add(pod.metadata.name)
            time.sleep(0.1)
        total = time.monotonic() - began
        reap_deadline = time.monotonic() + 60
        while set(platform.agent.pids()) - live_pids and time.monotonic() < reap_deadline:
            time.sleep(0.1)
        cpu = _children_cpu() - children_before - (apply_usage.ru_utime + apply_usage.ru_stime)
        broker_cpu = measure.process_cpu(platform.broker.pid) - broker_before
        operator_cpu = measure.process_cpu(platform.operator.pid) - operator_before
        ledger_after = self.cpu_ledger(topic)
        broker_threads_spent = _spent(threads_before, broker_threads(platform.broker.pid))
        spent = {who: ledger_after[who] - ledger_before.get(who, 0.0) for who in ledger_after}
        kubectl_cpu = apply_usage.ru_utime + apply_usage.ru_stime
        spent["replay pods"] -= kubectl_cpu
        spent["kubectl apply"] = kubectl_cpu
        machine = spent.pop("machine")
        cpu_breakdown = {who: round(value, 2) for who, value in sorted(spent.items(), key=lambda kv: -kv[1])}
        by_owner: dict[str, float] = {}
        for who, value in spent.items():
            owner = CPU_OWNERS.get(who, "platform")
            by_owner[owner] = by_owner.get(owner, 0.0) + value
        by_owner["neighbours (the machine's busy time nobody here spent)"] = machine - sum(spent.values())
        logs = [platform.agent.container_log(NAMESPACE, pod, "worker") for pod in pods]
        first_read = min((t for log in logs for t in _log_times(log, "first records read")), default=None)
        finished = max((t for log in logs for t in _log_times(log, "partition finished")), default=None)
        acked = max(_log_times(self._live_log(topic), "handover acknowledged"), default=None)
        # Each replica's CPU up to its first read (start, imports, bootstrap, clients) and in all.
        ready_cpu = [v for log in logs for v in _log_values(log, "replay role ready", "cpu_s")]
        done_cpu = [v for log in logs for v in _log_values(log, "replay role done", "cpu_s")]
        running, draining, complete = phases.get("Running"), phases.get("Draining"), phases["Complete"]
        if running is not None and first_read is not None:
            # Running is written after the operator's bootstrap, which runs while the pods start: a replica may
            # read first. The marks must stay in order, or pod start comes out negative.
            running = min(running, first_read)
        marks = [
            ("plan", running),
            ("pod_start", first_read),
            ("replay", finished),
            ("handover", acked),
            ("drain", draining),
            ("teardown", complete),
        ]
        breakdown: dict[str, float | None] = {}
        previous: float | None = began_wall
        for label, at in marks:
            breakdown[label] = round(at - previous, 2) if at is not None and previous is not None else None
            previous = at if at is not None else previous
        platform.kubectl("delete", "-n", NAMESPACE, "reconsume", name, "--wait=true")
        reported = {
            "total_s": round(total, 2),
            "breakdown_s": breakdown,
            "replicas": replicas,
            "pods": len(pods),
            "operator_cpu_s": round(operator_cpu, 2),
            "replica_ready_cpu_s": sorted(ready_cpu),
            "replica_cpu_s": sorted(done_cpu),
            "cpu_s_per_million_records": round((cpu + broker_cpu + operator_cpu) / records * 1e6, 2),
            "cpu_breakdown_s": cpu_breakdown,
            "cpu_by_owner_s": {owner: round(value, 2) for owner, value in by_owner.items()},
            "machine_busy_s": round(machine, 2),
            "broker_threads_s": broker_threads_spent,
        }
        return measure.Sample(records, total, cpu + operator_cpu, broker_cpu, reported)

    def _live_log(self, topic: str) -> Path | None:
        assert self.platform.agent is not None
        for pod in self.platform.core.list_namespaced_pod(NAMESPACE, label_selector=f"app=live-{topic}").items:
            return self.platform.agent.container_log(NAMESPACE, pod.metadata.name, "app")
        return None


def _line(index: int, samples: dict[str, measure.Sample]) -> None:
    parts = []
    for name, s in samples.items():
        detail = f" {s.reported.get('breakdown_s')}" if "breakdown_s" in s.reported else ""
        if s.reported.get("replica_cpu_s"):
            detail += (
                f" replica cpu s at ready {s.reported['replica_ready_cpu_s']}, at end {s.reported['replica_cpu_s']}"
            )
        if s.reported.get("cpu_breakdown_s"):
            detail += f" cpu s {s.reported['cpu_breakdown_s']}"
        parts.append(f"{name} {s.wall:.1f} s, {s.total_cpu_per_record_us:.1f} us/rec cpu{detail}")
    print(f"  round {index + 1}: " + "; ".join(parts), flush=True)


def cpu_medians(samples: list[measure.Sample]) -> dict[str, dict[str, float]]:
    """The median over the rounds of each line of the CPU breakdown (`cpu_breakdown_s`, `cpu_by_owner_s`)."""
    medians: dict[str, dict[str, float]] = {}
    for key in ("cpu_breakdown_s", "cpu_by_owner_s", "broker_threads_s"):
        names = {name for s in samples for name in s.reported.get(key, {})}
        medians[key] = {
            name: round(statistics.median([s.reported.get(key, {}).get(name, 0.0) for s in samples]), 2)
            for name in names
        }
        medians[key] = dict(sorted(medians[key].items(), key=lambda kv: -kv[1]))
    return medians


def bench_ratio(e2e: EndToEnd, topic: str, rounds: int) -> dict[str, Any]:
    records = e2e.records
    samples = measure.interleaved(
        rounds,
        {
            "read_loop": lambda i: e2e.read_loop(topic, records, f"bench-e2e-read-{i}"),
            "reconsume": lambda i: e2e.replay(f"e2e-{i}", topic, records, REPLICAS),
        },
        _line,
    )
    breakdowns = [s.reported["breakdown_s"] for s in samples["reconsume"]]
    return {
        "end_to_end_vs_read_loop": measure.speed_ratio(
            samples["read_loop"], samples["reconsume"], measure.per_record_wall
        ),
        "end_to_end_cpu_vs_read_loop": measure.speed_ratio(
            samples["read_loop"], samples["reconsume"], measure.per_record_cpu
        ),
        "breakdown_median_s": {
            k: statistics.median([b[k] for b in breakdowns if b.get(k) is not None] or [0]) for k in breakdowns[0]
        },
        "cpu_median_s": cpu_medians(samples["reconsume"]),
        "read_loop_cpu_median_s": {
            "read loop": round(statistics.median([s.cpu for s in samples["read_loop"]]), 2),
            "broker": round(statistics.median([s.broker_cpu for s in samples["read_loop"]]), 2),
            "broker_threads_s": cpu_medians(samples["read_loop"])["broker_threads_s"],
        },
        "runs": {name: [s.figures() for s in runs] for name, runs in samples.items()},
    }


def _growth(values: dict[str, float]) -> dict[str, float]:
    """Each value over the first (the same records each time, so the ratio is that of CPU per record)."""
    first = next(iter(values.values()))
    return {name: round(value / first, 3) for name, value in values.items()}


def _line_fit(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares t = fixed + per_record * n; and the largest distance of a point from the line, as a
    share of its time."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    fixed = mean_y - slope * mean_x
    worst = max(abs(y - (fixed + slope * x)) / y for x, y in points)
    return fixed, slope, worst


def bench_growth(e2e: EndToEnd, topics: dict[int, str], rounds: int, sizes_too: bool = True) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    by_size: dict[str, list[measure.Sample]] = {}
    if sizes_too:
        sizes = sorted(topics)
        by_size = measure.interleaved(
            rounds,
            {
                f"records_{size}": (lambda i, size=size: e2e.replay(f"grow-{size}-{i}", topics[size], size, REPLICAS))
                for size in sizes
            },
            _line,
        )
        medians = [(size, statistics.median([s.wall for s in by_size[f"records_{size}"]])) for size in sizes]
        fixed, slope, worst = _line_fit(medians)
        figures = {
            "time_to_complete_s": {str(size): round(t, 2) for size, t in medians},
            "growth_fixed_s": round(fixed, 2),
            "growth_us_per_record": round(slope * 1e6, 3),
            "growth_worst_point_off_line": round(worst, 3),
        }
    base = e2e.records
    by_replicas = measure.interleaved(
        rounds,
        {
            f"replicas_{count}": (lambda i, count=count: e2e.replay(f"reps-{count}-{i}", topics[base], base, count))
            for count in REPLICA_COUNTS
        },
        _line,
    )
    cpu = {name: measure.spread([s.total_cpu_per_record_us for s in runs]) for name, runs in by_replicas.items()}
    first = cpu[f"replicas_{REPLICA_COUNTS[0]}"]["median"]
    return {
        **figures,
        "replicas_cpu_us_per_record": cpu,
        "replicas_cpu_growth": {name: round(v["median"] / first, 3) for name, v in cpu.items()},
        "replicas_time_to_complete_s": {
            name: measure.spread([s.wall for s in runs]) for name, runs in by_replicas.items()
        },
        "replicas_cpu_median_s": {name: cpu_medians(runs) for name, runs in by_replicas.items()},
        # The same growth for Reprise's CPU alone and for the platform's alone (`CPU_OWNERS`): a replica's fixed
        # cost (its start) against the pods the platform schedules, starts and watches.
        **{
            f"replicas_{owner}_cpu_growth": _growth(
                {
                    name: statistics.median([s.reported["cpu_by_owner_s"][owner] for s in runs])
                    for name, runs in by_replicas.items()
                }
            )
            for owner in ("reprise", "platform")
        },
        "runs": {name: [s.figures() for s in runs] for name, runs in {**by_size, **by_replicas}.items()},
    }


#: A warm-up replay after which the broker's JIT compilers spent less than this (CPU seconds) ends the warm-up.
WARM_JIT_S = 0.15
#: Warm-up replays at most.
WARM_REPLAYS = 10


def warm_up(e2e: EndToEnd, topic: str) -> None:
    """One read loop, then replays until the broker's JIT is quiet (`WARM_JIT_S`, at most `WARM_REPLAYS`), none
    of them counted. A fresh broker compiles its fetch, group and transaction paths over its first replays, 1-2
    CPU-s of its JIT threads a replay for about ten of them (the CPU ledger's broker threads), on the two cores
    the replay runs on: what a user's long-running broker did long ago. Counted, it fell on the first rounds."""
    e2e.read_loop(topic, e2e.records, "bench-e2e-warm-up")
    for index in range(WARM_REPLAYS):
        sample = e2e.replay(f"warm-up-{index}", topic, e2e.records, REPLICAS)
        jit = sample.reported.get("broker_threads_s", {}).get("JIT compilers", 0.0)
        print(f"- warm-up replay {index + 1}: {sample.wall:.1f} s, the broker's JIT {jit:.2f} CPU-s", flush=True)
        if jit < WARM_JIT_S:
            return


def run(records: int | None = None, rounds: int | None = None, parts: list[str] | None = None) -> dict[str, Any]:
    records = records_setting(records)
    rounds = rounds_setting(rounds)
    parts = (
        parts
        or [p for p in (os.environ.get("REPRISE_BENCH_PARTS") or ",".join(PARTS)).split(",") if p in PARTS]
        or list(PARTS)
    )
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-e2e-"))
    began = time.monotonic()
    try:
        with Platform(workdir) as platform:
            e2e = EndToEnd(platform, records)
            sizes = sorted({int(records * f) for f in GROWTH_SIZES} if "growth" in parts else {records})
            topics = {size: e2e.topic(size) for size in sizes}
            e2e.start_live_service(list(topics.values()))
            warm_up(e2e, topics[records])
            figures: dict[str, Any] = {
                "records": records,
                "rounds": rounds,
                "replicas": REPLICAS,
                "poll_interval_s": float(POLL_INTERVAL),
            }
            if "ratio" in parts:
                print(f"- end to end: {rounds} rounds", flush=True)
                figures["ratio"] = bench_ratio(e2e, topics[records], rounds)
            if "growth" in parts:
                print(f"- growth: {rounds} rounds of sizes {sizes} and replicas {REPLICA_COUNTS}", flush=True)
                figures["growth"] = bench_growth(e2e, topics, rounds)
            elif "replicas" in parts:
                print(f"- growth: {rounds} rounds of replicas {REPLICA_COUNTS}", flush=True)
                figures["growth"] = bench_growth(e2e, topics, rounds, sizes_too=False)
        figures["seconds"] = round(time.monotonic() - began, 1)
        figures["meets_target"] = report(figures)
        return figures
    finally:
        if os.environ.get("REPRISE_BENCH_KEEP"):
            print(f"kept {workdir} (REPRISE_BENCH_KEEP)", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def report(figures: dict[str, Any]) -> bool:
    met = True
    print(f"end to end ({figures['records']:,} records, {figures['rounds']} rounds, median of rounds [min..max]):")
    ratio = figures.get("ratio")
    if ratio:
        value = ratio["end_to_end_vs_read_loop"]
        line = measure.verdict(value["median"], *TARGETS["end_to_end_vs_read_loop"])
        met &= line.startswith("ok")
        print(f"  {'end_to_end_vs_read_loop (wall)':<34} {line} [{value['min']:.3f}..{value['max']:.3f}]")
        cpu = ratio["end_to_end_cpu_vs_read_loop"]
        print(
            f"  {'end_to_end_cpu_vs_read_loop':<34}      {cpu['median']:.3f} (figure) [{cpu['min']:.3f}..{cpu['max']:.3f}]"
        )
        print(f"  breakdown (median s): {ratio['breakdown_median_s']}")
        print(f"  read loop CPU (median s): {ratio['read_loop_cpu_median_s']}")
        _print_cpu("reconsume", ratio["cpu_median_s"])
    growth = figures.get("growth")
    if growth and "growth_fixed_s" in growth:
        line = measure.verdict(growth["growth_fixed_s"], *TARGETS["growth_fixed_s"])
        met &= line.startswith("ok")
        print(
            f"  {'growth_fixed_s':<34} {line}; {growth['growth_us_per_record']} us per record; "
            f"time to Complete {growth['time_to_complete_s']}; worst point {growth['growth_worst_point_off_line']:.1%} "
            "off the line"
        )
    if growth:
        growths = growth["replicas_cpu_growth"]
        grows = any(v > 1.1 for v in growths.values())
        met &= not grows
        print(
            f"  {'replicas_cpu_growth':<34} {'MISS' if grows else 'ok  '} {growths} (<= 1.1 of one replica's CPU "
            "per record)"
        )
        for owner in ("reprise", "platform"):
            print(f"  {f'replicas_{owner}_cpu_growth':<34}      {growth[f'replicas_{owner}_cpu_growth']} (figure)")
        for name, medians in growth["replicas_cpu_median_s"].items():
            _print_cpu(name, medians)
    return met


def _print_cpu(name: str, medians: dict[str, dict[str, float]]) -> None:
    """A replay's CPU seconds (median of the rounds) by owner and by process."""
    print(f"  {name} CPU by owner (median s): {medians['cpu_by_owner_s']}")
    print(f"  {name} CPU by process (median s): {medians['cpu_breakdown_s']}")
    print(f"  {name} broker CPU by thread (median s): {medians['broker_threads_s']}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.end_to_end", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--parts", default=None, help=f"comma-separated, of {', '.join(PARTS)}")
    args = parser.parse_args()
    figures = run(args.records, args.rounds, args.parts.split(",") if args.parts else None)
    print(json.dumps(figures, indent=2, default=str))
    sys.exit(0 if figures["meets_target"] else 1)


if __name__ == "__main__":
    main()
