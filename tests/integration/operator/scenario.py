"""A live service on the local platform, for the operator's end-to-end tests.

The live service is a real Deployment whose pods the node agent runs as processes: a guarded consumer
(`tests.integration.replay_worker.live_service`) that appends `L <topic> <partition> <offset>` per record it
processes to a file in a shared folder. The replay consumers Reprise creates clone that Deployment and call
`tests.integration.replay_worker.sink:record`, which appends `R ...` lines to the same folder. A producer
thread keeps writing while the replay runs. `Ledger` reads the files back to check who processed what.
"""

from __future__ import annotations

import json

import yaml
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.fixtures.kube import wait_for

LIVE_IMAGE = "reprise-test/accounts:dev"
PARTITIONS = 3
HISTORY = 3000


def event_type_of(_n: int) -> bytes:
    """The `event-type` header of record n: one type here (handover_scenario mixes two)."""
    return b"UserUpdated"


def produce(
    bootstrap: str, topic: str, count: int, first: int = 0, event_type: Callable[[int], bytes] = event_type_of
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(first, first + count):
        producer.produce(
            topic,
            key=f"user-{i % 97}".encode(),
            value=json.dumps({"n": i}).encode(),
            headers=[("event-type", event_type(i))],
        )
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(30)


@dataclass
class KeepProducing:
    """A producer thread writing `rate` records per second until stopped: live traffic during the replay."""

    bootstrap: str
    topic: str
    rate: int = 40
    first: int = 1_000_000
    event_type: Callable[[int], bytes] = event_type_of
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    written: int = 0

    def __enter__(self) -> "KeepProducing":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        while not self._stop.wait(1.0 / self.rate):
            n = self.first + self.written
            producer.produce(
                self.topic,
                key=f"user-{n % 97}".encode(),
                value=json.dumps({"n": n}).encode(),
                headers=[("event-type", self.event_type(n))],
            )
            producer.poll(0)
            self.written += 1
        producer.flush(30)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


def handover_topic_of(namespace: str) -> str:
    """The handover topic the operator uses for resources in `namespace` (the chart's default template)."""
    from reprise_operator.shared.settings import OperatorSettings

    return OperatorSettings.from_env({}).handover_topic_for(namespace)


#: What a live Deployment sets for its guard with the chart's default `handoverTopic` (docs/security.md): its
#: namespace's handover topic, the one the operator gives the replay pods.
HANDOVER_TOPIC_ENV = [
    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    {"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover.$(POD_NAMESPACE)"},
]


def live_deployment(name: str, bootstrap: str, group: str, topic: str, out_dir: Path, replicas: int = 1) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "app",
                            "image": LIVE_IMAGE,
                            "command": [
                                "python",
                                "-m",
                                "tests.integration.replay_worker.live_service",
                                bootstrap,
                                group,
                                topic,
                                str(out_dir),
                            ],
                            "env": [{"name": "REPRISE_TEST_SINK_DIR", "value": str(out_dir)}, *HANDOVER_TOPIC_ENV],
                        }
                    ],
                },
            },
        },
    }


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)})
    return {tp.partition: f.result().offset for tp, f in futures.items()}


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    # Not AdminClient.list_consumer_group_offsets: librdkafka crashes on its error answers (kafka_admin.py).
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def group_state(bootstrap: str, group: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result()
    return getattr(description.state, "name", str(description.state))


def wait_caught_up(bootstrap: str, group: str, topic: str, partitions: int, timeout: float = 120) -> dict[int, int]:
    def caught_up():
        ends = end_offsets(bootstrap, topic, partitions)
        done = committed(bootstrap, group, topic, partitions)
        return ends if all(done.get(p, -1) >= ends[p] for p in ends) else None

    return wait_for(caught_up, timeout, f"group {group} to reach the end of {topic}", interval=0.5)


@dataclass
class Ledger:
    """Who processed which offset, read back from the live and replay files."""

    live: dict[int, Counter] = field(default_factory=dict)
    replay: dict[int, Counter] = field(default_factory=dict)

    @classmethod
    def read(cls, folder: Path, topic: str) -> "Ledger":
        ledger = cls()
        for path in folder.glob("*.log"):
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) != 4 or parts[1] != topic:
                    continue  # a torn last line of a killed process
                side = ledger.live if parts[0] == "L" else ledger.replay
                side.setdefault(int(parts[2]), Counter())[int(parts[3])] += 1
        return ledger

    def first_skipped(self, partition: int, end: int) -> int:
        """F: the first offset the live side did not process (where its guard started skipping)."""
        seen = self.live.get(partition, Counter())
        offset = 0
        while offset < end and seen[offset] > 0:
            offset += 1
        return offset


def wait_phase(kube, namespace: str, kind: str, name: str, phase: str, timeout: float, operator=None) -> dict:
    def current():
        out = kube.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
        if out.returncode != 0:
            return None
        body = json.loads(out.stdout)
        got = (body.get("status") or {}).get("phase")
        if got == "Failed" and phase != "Failed":
            raise AssertionError(f"{kind} {name} failed: {json.dumps(body.get('status'), indent=1)}")
        return body if got == phase else None

    deadline = time.monotonic() + timeout
    while True:
        try:
            found = current()
        except AssertionError:
            raise
        if found:
            return found
        if time.monotonic() > deadline:
            out = kube.kubectl("get", kind, name, "-n", namespace, "-o", "yaml", check=False).stdout
            log = "\n".join(operator.log().splitlines()[-40:]) if operator is not None else ""
            raise AssertionError(
                f"{kind} {name} did not reach {phase} within {timeout:.0f}s:\n{out}\noperator log:\n{log}"
            )
        time.sleep(0.5)


def get(kube, namespace: str, kind: str, name: str) -> dict | None:
    out = kube.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def conditions(body: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}


def apply(kube, namespace: str, obj: dict) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(obj))


def reconsume(name: str, bootstrap: str, topic: str, mode: str, live: str, sink: str, **extra) -> dict:
    spec = {
        "kafka": {"bootstrapServers": bootstrap},
        "topics": [topic],
        "consumerGroup": f"{live}-group",
        "mode": mode,
        "start": {"earliest": True},
        "completion": {"drainedFor": "2s"},
    }
    if mode == "Rewind":
        spec["liveDeployment"] = {"name": live}
    else:
        spec["consumer"] = {
            "deploymentRef": {"name": live},
            "replicas": 2,
            "env": [
                {"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"},
                {"name": "REPRISE_TEST_SINK_DIR", "value": sink},
                {"name": "REPRISE_BATCH_SIZE", "value": "100"},
            ],
        }
    spec.update(extra)
    return {"apiVersion": "reprise.io/v1alpha1", "kind": "Reconsume", "metadata": {"name": name}, "spec": spec}


def assert_children_gone(kube, kafka, namespace: str, name: str, group: str | None, topic: str) -> None:
    deployments = json.loads(
        kube.kubectl("get", "deployments", "-n", namespace, "-l", f"reprise.io/replay={name}", "-o", "json").stdout
    )
    assert deployments["items"] == [], "the standby Deployment must be deleted"
    if group is not None:
        assert group_state(kafka.bootstrap, group) in ("DEAD", "Dead"), f"replay group {group} must be deleted"
        assert committed(kafka.bootstrap, group, topic, PARTITIONS) == {}
