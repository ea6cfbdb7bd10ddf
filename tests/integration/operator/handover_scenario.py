"""A Handover Reconsume across service languages on the local platform, for the end-to-end tests under faults.

The live service is the JVM example `examples/accounts-jvm` (built by Maven into a local image,
`local_platform/jvm_image.py`), the Go example `examples/seed003-go` (built by `go build`,
`local_platform/go_image.py`) or the Python test service (`tests.integration.replay_worker.live_service`); the
replay consumers run the Java or the Go replay role (the service's own image, `consumer.entrypoint: Service`) or
Reprise's Python worker (`entrypoint: ReplayWorker`, calling `tests.integration.replay_worker.sink:record`).
`run_handover` takes the language of each side. All of them append what they processed to files in one folder
(one file per process); `GroupLedger` reads them back, knowing nothing of Kafka or Reprise, and
`check_exactly_once` holds them to the protocol's promise under faults:

- from the first offset the live group skipped on (F), no record is processed by both groups;
- no record from F on is lost;
- a record processed twice by one group is in the ledger of a process that was killed (its uncommitted batch),
  and no killed process accounts for more repeats than its batches allow.

Faults (`Fault`) are injected at points of the replay: `kill -9` of a live or a replay replica (the node agent
restarts it, as a kubelet would), and a rebalance of the live group (a fourth replica joins).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


from tests.fixtures.kube import wait_for

from reprise_operator.shared.constants import replay_group_name

from .scenario import (
    HANDOVER_TOPIC_ENV,
    PARTITIONS,
    KeepProducing,
    apply,
    assert_children_gone,
    live_deployment,
    produce,
    wait_caught_up,
    wait_phase,
)

JVM_IMAGE = "reprise-examples/accounts-jvm:dev"
#: What the image's ENTRYPOINT is (examples/accounts-jvm/Dockerfile); the node agent runs only what the pod says.
JVM_COMMAND = ["java", "-cp", "/app/accounts-jvm.jar:/app/lib/*", "io.reprise.examples.accounts.AccountsService"]
#: Small JVMs on shared cores: C1 only and the serial collector start faster and use less CPU.
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx192m -Xss512k"
#: What matches the replay's filter (the other event type is processed by the live group alone).
MATCHING, OTHER = b"UserUpdated", b"UserLoggedIn"
LIVE_BATCH = 50
REPLAY_BATCH = 50
GO_IMAGE = "reprise-examples/seed003-go:dev"
#: What the Go image runs (`local_platform/go_image.py` builds the example into `/app/seed003-go`).
GO_COMMAND = ["/app/seed003-go"]
#: The Go service's librdkafka auto-commit interval: what a `kill -9` of a live replica may leave uncommitted.
GO_AUTO_COMMIT_MS = 500


def event_type(n: int) -> bytes:
    return OTHER if n % 4 == 3 else MATCHING


def produce_events(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    produce(bootstrap, topic, count, first, event_type=event_type)


def keep_producing_events(bootstrap: str, topic: str) -> KeepProducing:
    """Live traffic while the replay runs, of both event types, until stopped."""
    return KeepProducing(bootstrap, topic, event_type=event_type)


# ------------------------------------------------------------------------------------------ workloads


def jvm_container(bootstrap: str, group: str, topic: str, ledger: Path) -> dict:
    return {
        "name": "app",
        "image": JVM_IMAGE,
        "command": list(JVM_COMMAND),
        "env": [
            {"name": "ACCOUNTS_BOOTSTRAP_SERVERS", "value": bootstrap},
            {"name": "ACCOUNTS_GROUP", "value": group},
            {"name": "ACCOUNTS_TOPIC", "value": topic},
            {"name": "ACCOUNTS_LEDGER_DIR", "value": str(ledger)},
            {"name": "ACCOUNTS_BATCH", "value": str(LIVE_BATCH)},
            {"name": "ACCOUNTS_SESSION_TIMEOUT_MS", "value": "6000"},
            {"name": "JAVA_TOOL_OPTIONS", "value": JAVA_OPTIONS},
            *HANDOVER_TOPIC_ENV,
        ],
    }


def jvm_live_deployment(name: str, bootstrap: str, group: str, topic: str, ledger: Path, replicas: int = 3) -> dict:
    return service_deployment(name, jvm_container(bootstrap, group, topic, ledger), replicas)


def go_live_deployment(name: str, bootstrap: str, group: str, topic: str, ledger: Path, replicas: int = 3) -> dict:
    return service_deployment(name, go_container(bootstrap, group, topic, ledger), replicas)


def go_container(bootstrap: str, group: str, topic: str, ledger: Path) -> dict:
    """The Go example: live it runs the guard; started with REPRISE_* (`entrypoint: Service`), `replay.Main`."""
    return {
        "name": "app",
        "image": GO_IMAGE,
        "command": list(GO_COMMAND),
        "env": [
            {"name": "BOOTSTRAP_SERVERS", "value": bootstrap},
            {"name": "GROUP_ID", "value": group},
            {"name": "TOPIC", "value": topic},
            {"name": "LEDGER_DIR", "value": str(ledger)},
            {"name": "AUTO_COMMIT_INTERVAL_MS", "value": str(GO_AUTO_COMMIT_MS)},
            *HANDOVER_TOPIC_ENV,
        ],
    }


def service_deployment(name: str, container: dict, replicas: int = 3) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 10, "containers": [container]},
            },
        },
    }


def python_live_deployment(name: str, bootstrap: str, group: str, topic: str, ledger: Path, replicas: int = 3) -> dict:
    body = live_deployment(name, bootstrap, group, topic, ledger, replicas)
    body["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "LIVE_BATCH", "value": str(LIVE_BATCH)})
    return body


SERVICE_CONTAINERS = {"java": jvm_container, "go": go_container}


def service_replay_consumer(
    language: str, bootstrap: str, live_group: str, topic: str, ledger: Path, *, clone: str | None
) -> dict:
    """The Java or Go replay role: the service's own image and command (`entrypoint: Service`)."""
    consumer: dict = {
        "entrypoint": "Service",
        "replicas": 3,
        "env": [{"name": "REPRISE_BATCH_SIZE", "value": str(REPLAY_BATCH)}],
    }
    if clone:
        consumer["deploymentRef"] = {"name": clone}
    else:  # the live service is in another language: the template runs this language's image
        container = SERVICE_CONTAINERS[language](bootstrap, live_group, topic, ledger)
        consumer["template"] = {"spec": {"containers": [container]}}
    return consumer


def python_replay_consumer(ledger: Path) -> dict:
    """Reprise's Python worker (`entrypoint: ReplayWorker`) in Reprise's own image, calling the test sink."""
    return {
        "template": {"spec": {"containers": [{"name": "worker", "image": "reprise-test/worker:dev"}]}},
        "replicas": 3,
        "env": [
            {"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"},
            {"name": "REPRISE_TEST_SINK_DIR", "value": str(ledger)},
            {"name": "REPRISE_BATCH_SIZE", "value": str(REPLAY_BATCH)},
        ],
    }


def handover_reconsume(
    name: str, bootstrap: str, topic: str, live_group: str, consumer: dict, records_per_second: int
) -> dict:
    consumer = json.loads(json.dumps(consumer))
    consumer["env"].append({"name": "REPRISE_MAX_RECORDS_PER_SECOND", "value": str(records_per_second)})
    return {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Reconsume",
        "metadata": {"name": name},
        "spec": {
            # session.timeout.ms etc. for the replay consumers come from the Secret, as in production.
            "kafka": {"bootstrapServers": bootstrap, "configFrom": {"secretRef": {"name": "replay-kafka-client"}}},
            "topics": [topic],
            "consumerGroup": live_group,
            "mode": "Handover",
            "start": {"earliest": True},
            "filter": {"headers": {"event-type": [MATCHING.decode()]}},
            "consumer": consumer,
            "completion": {"drainedFor": "3s"},
        },
    }


def replay_client_secret(kube, namespace: str) -> None:
    """Client settings of the replay consumers: a dead replica's partitions move after 6 s, not 45 s."""
    apply(
        kube,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "replay-kafka-client", "labels": {"reprise.io/kafka-client": "true"}},
            "stringData": {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"},
        },
    )


# ------------------------------------------------------------------------------------------ the ledger


_PID = re.compile(r"-(\d+)\.log$")


@dataclass
class GroupLedger:
    """Who processed which offset: {side: {partition: Counter(offset)}} with side L (live) or R (replay), and
    the lines of each process (by PID) for the repeats."""

    sides: dict[str, dict[int, Counter]] = field(default_factory=lambda: {"L": {}, "R": {}})
    by_process: dict[int, list[tuple[str, int, int]]] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)

    @classmethod
    def read(cls, folder: Path, topic: str, live_group: str | None = None) -> "GroupLedger":
        """Lines `side topic partition offset [group]` (Java, Python) or, with `live_group`, the Go example's
        `group topic partition offset`, whose side is L for `live_group` and R for any other group."""
        ledger = cls()
        for path in folder.glob("*.log"):
            found = _PID.search(path.name)
            pid = int(found.group(1)) if found else -1
            # Only whole lines: a killed process may leave a torn last one, without its newline.
            for line in path.read_text(errors="replace").split("\n")[:-1]:
                parts = line.split()
                if live_group is not None and len(parts) == 4 and parts[0] not in ("L", "R"):
                    side = "L" if parts[0] == live_group else "R"
                    parts = [side, parts[1], parts[2], parts[3], parts[0]]
                # Java: `side topic partition offset group`; the Python test sinks: `side topic partition offset`.
                if len(parts) not in (4, 5) or parts[0] not in ("L", "R") or parts[1] != topic:
                    continue
                try:
                    partition, offset = int(parts[2]), int(parts[3])
                except ValueError:
                    continue
                if len(parts) == 5:
                    ledger.groups.add(parts[4])
                ledger.sides[parts[0]].setdefault(partition, Counter())[offset] += 1
                ledger.by_process.setdefault(pid, []).append((parts[0], partition, offset))
        return ledger

    def count(self, side: str) -> int:
        return sum(sum(c.values()) for c in self.sides[side].values())

    def first_skipped(self, partition: int, end: int) -> int:
        """F: the first offset the live group did not process (where its guard started skipping)."""
        seen = self.sides["L"].get(partition, Counter())
        offset = 0
        while offset < end and seen[offset] > 0:
            offset += 1
        return offset


@dataclass
class Verdict:
    """The figures of one run, for the assertion messages and the report."""

    first_skipped: dict[int, int]
    ends: dict[int, int]
    live_records: int
    replay_records: int
    after_boundary: int = 0
    both: list[tuple[int, int]] = field(default_factory=list)
    lost: list[tuple[int, int]] = field(default_factory=list)
    repeats: dict[str, int] = field(default_factory=lambda: {"L": 0, "R": 0})
    unexplained_repeats: list[tuple[str, int, int]] = field(default_factory=list)
    repeats_by_killed: dict[int, int] = field(default_factory=dict)

    def summary(self) -> str:
        return (
            f"live {self.live_records} replay {self.replay_records} records; from F on: {self.after_boundary} "
            f"offsets, both {len(self.both)}, lost {len(self.lost)}; repeats live {self.repeats['L']} replay "
            f"{self.repeats['R']} (by killed process {self.repeats_by_killed}), unexplained "
            f"{len(self.unexplained_repeats)}; F {self.first_skipped} ends {self.ends}"
        )


def check_exactly_once(ledger: GroupLedger, ends: dict[int, int], killed: set[int]) -> Verdict:
    verdict = Verdict(
        {p: ledger.first_skipped(p, ends[p]) for p in ends}, dict(ends), ledger.count("L"), ledger.count("R")
    )
    for p, end in ends.items():
        live, replay = ledger.sides["L"].get(p, Counter()), ledger.sides["R"].get(p, Counter())
        for offset in range(verdict.first_skipped[p], end):
            verdict.after_boundary += 1
            if live[offset] and replay[offset]:
                verdict.both.append((p, offset))
            if not live[offset] and not replay[offset]:
                verdict.lost.append((p, offset))
    killed_lines = {pid: set(lines) for pid, lines in ledger.by_process.items() if pid in killed}
    for side in ("L", "R"):
        for p, counts in ledger.sides[side].items():
            for offset, n in counts.items():
                if n < 2:
                    continue
                verdict.repeats[side] += n - 1
                owners = [pid for pid, lines in killed_lines.items() if (side, p, offset) in lines]
                if not owners:
                    verdict.unexplained_repeats.append((side, p, offset))
                for pid in owners[:1]:
                    verdict.repeats_by_killed[pid] = verdict.repeats_by_killed.get(pid, 0) + n - 1
    return verdict


def assert_exactly_once(verdict: GroupLedger | Verdict, *, per_killed_process: int) -> None:
    assert isinstance(verdict, Verdict)
    assert not verdict.both, (
        f"{len(verdict.both)} records processed by both groups, e.g. {verdict.both[:5]}: {verdict.summary()}"
    )
    assert not verdict.lost, f"{len(verdict.lost)} records lost, e.g. {verdict.lost[:5]}: {verdict.summary()}"
    assert not verdict.unexplained_repeats, (
        f"repeats outside a killed process's batch, e.g. {verdict.unexplained_repeats[:5]}: {verdict.summary()}"
    )
    over = {pid: n for pid, n in verdict.repeats_by_killed.items() if n > per_killed_process}
    assert not over, f"killed processes repeated more than their uncommitted batches ({per_killed_process}): {over}"
    assert any(verdict.first_skipped[p] < verdict.ends[p] for p in verdict.ends), "the guard never skipped"


# ------------------------------------------------------------------------------------------ faults


@dataclass(frozen=True)
class Fault:
    """One fault at one point of the replay: `when` is running | replaying | handing-over, `action` is
    kill-live | kill-replay | rebalance."""

    when: str
    action: str

    def __str__(self) -> str:
        return f"{self.action}@{self.when}"


def pods(kube, namespace: str, selector: str) -> list[dict]:
    found = kube.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
    return [p for p in json.loads(found.stdout)["items"] if not p["metadata"].get("deletionTimestamp")]


def running_pid(pod: dict) -> int | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if "running" in (status.get("state") or {}):
            found = re.match(r"reprise-agent://(\d+)$", status.get("containerID") or "")
            if found:
                return int(found.group(1))
    return None


def kill_one(kube, namespace: str, selector: str) -> int:
    """`kill -9` of the process of one running replica (the node agent starts it again)."""

    def target():
        for pod in sorted(pods(kube, namespace, selector), key=lambda p: p["metadata"]["name"]):
            pid = running_pid(pod)
            if pid is not None:
                return pid
        return None

    pid = wait_for(target, 60, f"a running pod of {selector}")
    os.kill(pid, signal.SIGKILL)
    return pid


def reached(kube, namespace: str, name: str, ledger_dir: Path, topic: str, when: str, live_group: str) -> bool:
    if when == "running":
        return True
    if when == "replaying":
        return GroupLedger.read(ledger_dir, topic, live_group).count("R") >= 2 * REPLAY_BATCH
    if when == "handing-over":
        body = json.loads(kube.kubectl("get", "reconsume", name, "-n", namespace, "-o", "json").stdout)
        parts = ((body.get("status") or {}).get("progress") or {}).get("partitions") or []
        return any(p.get("handoverOffset") is not None for p in parts) or body["status"].get("phase") != "Running"
    raise ValueError(when)


def inject(
    kube,
    namespace: str,
    name: str,
    live: str,
    ledger_dir: Path,
    topic: str,
    faults: tuple[Fault, ...],
    killed: set[int],
    live_group: str,
) -> list[str]:
    """Inject `faults` in order, each once its point is reached; returns what was done."""
    done = []
    for fault in faults:
        wait_for(
            lambda: reached(kube, namespace, name, ledger_dir, topic, fault.when, live_group),
            240,
            f"the point {fault.when}",
            interval=0.3,
        )
        if fault.action == "kill-live":
            killed.add(kill_one(kube, namespace, f"app={live}"))
        elif fault.action == "kill-replay":
            killed.add(kill_one(kube, namespace, f"reprise.io/replay={name}"))
        elif fault.action == "rebalance":
            kube.kubectl("scale", "deployment", live, "-n", namespace, "--replicas=4")
        else:
            raise ValueError(fault.action)
        done.append(f"{fault} at {time.strftime('%H:%M:%S')}")
    return done


# ------------------------------------------------------------------------------------------ one run


HISTORY = 4500
LIVE_GROUP = "accounts-live"
#: Throttle of each replay replica: slow enough that the faults land while the guard skips.
RATE = 120
LIVE_DEPLOYMENTS = {"java": jvm_live_deployment, "go": go_live_deployment, "python": python_live_deployment}

#: Fault timings run by `make test`; tests/soak runs more.
EARLY = (Fault("running", "kill-live"), Fault("replaying", "kill-replay"), Fault("replaying", "rebalance"))
LATE = (Fault("replaying", "rebalance"), Fault("handing-over", "kill-replay"), Fault("handing-over", "kill-live"))


def run_handover(
    kube,
    kafka,
    operator,
    namespace: str,
    topic: str,
    ledger: Path,
    *,
    live: str,
    replay: str,
    faults: tuple[Fault, ...],
) -> str:
    """One Handover with `live` (java | go | python) guarding and `replay` (java | go | python) replaying;
    returns the figures. Fails on any breach of exactly-once."""
    kafka.create_topic(topic, PARTITIONS)
    produce_events(kafka.bootstrap, topic, HISTORY)
    apply(kube, namespace, LIVE_DEPLOYMENTS[live]("accounts", kafka.bootstrap, LIVE_GROUP, topic, ledger))
    wait_caught_up(kafka.bootstrap, LIVE_GROUP, topic, PARTITIONS, timeout=240)
    replay_client_secret(kube, namespace)
    if replay == "python":
        consumer = python_replay_consumer(ledger)
    else:
        consumer = service_replay_consumer(
            replay, kafka.bootstrap, LIVE_GROUP, topic, ledger, clone="accounts" if live == replay else None
        )
    killed: set[int] = set()
    with keep_producing_events(kafka.bootstrap, topic) as producer:
        apply(kube, namespace, handover_reconsume("handover", kafka.bootstrap, topic, LIVE_GROUP, consumer, RATE))
        wait_phase(kube, namespace, "reconsume", "handover", "Running", 60, operator)
        done = inject(kube, namespace, "handover", "accounts", ledger, topic, faults, killed, LIVE_GROUP)
        finished = wait_phase(kube, namespace, "reconsume", "handover", "Complete", 420, operator)
    assert producer.written > 0
    ends = wait_caught_up(kafka.bootstrap, LIVE_GROUP, topic, PARTITIONS, timeout=180)
    verdict = check_exactly_once(GroupLedger.read(ledger, topic, LIVE_GROUP), ends, killed)
    # A killed process repeats at most what it processed and did not commit: a batch per partition it held (a
    # replay role may have one more batch's commit in flight).
    assert_exactly_once(verdict, per_killed_process=2 * max(LIVE_BATCH, REPLAY_BATCH) * PARTITIONS)
    status = finished["status"]
    assert all(p["state"] == "HandedOver" for p in status["progress"]["partitions"])
    ledger_now = GroupLedger.read(ledger, topic, LIVE_GROUP)
    for p in status["progress"]["partitions"]:
        # Where the guard skipped (F before the end), the replay covered [F, H): H is past F.
        if verdict.first_skipped[p["partition"]] < ends[p["partition"]]:
            assert p["handoverOffset"] > verdict.first_skipped[p["partition"]], (p, verdict.summary())
        assert ledger_now.sides["R"].get(p["partition"]), f"the replay processed nothing of partition {p}"
    assert_children_gone(kube, kafka, namespace, "handover", replay_group_name(namespace, "handover"), topic)
    figures = f"{live} guard / {replay} replay, faults {done}, killed {sorted(killed)}: {verdict.summary()}"
    print(figures)
    return figures
