"""A lake, a service and the checks for the LakeReplay end-to-end tests.

- `lake` (session): a generated lake (`spark_app.lakegen`: 30k events over 6 days, partitioned by day, written
  under three schema versions), made once by `python -m spark_app.lakegen` in a process of its own (stopped by
  its PID), with the latest schema next to it.
- `lake_replay(...)`: a LakeReplay manifest over that lake, its drain consumers calling `lake_sink:record`.
- `Sink`: what the drain and continuation consumers processed, read back from the sink files.
- `watch(...)`: follows a LakeReplay to a phase, remembering every Spark state and phase it went through.
- `assert_lake_children_gone(...)`: the SparkApplication, the drain Deployment and its pods, the backfill topic
  and the drain group are gone.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from local_platform import processes
from spark_app.lakegen import LATEST_SCHEMA, LakeSpec, expected_records

from .scenario import LIVE_IMAGE, apply, group_state

LAKE = LakeSpec(rows=30_000, days=6, keys=200)
SCHEMA_CONFIGMAP = "events-schema"
SCHEMA_KEY = "latest.json"
HANDLER = "tests.integration.operator.lake_sink:record"


@dataclass(frozen=True)
class Lake:
    uri: str
    spec: LakeSpec

    def expected(self, start: datetime | None, end: datetime) -> dict[str, tuple[int, dict]]:
        """event_id -> (row number, record in the latest schema) of every row with start <= ts < end."""
        return {r["event_id"]: (n, r) for n, r in expected_records(self.spec, start, end)}


@pytest.fixture(scope="session")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    folder = tmp_path_factory.mktemp("lake")
    uri = f"file://{folder}/events"
    argv = [
        sys.executable,
        "-m",
        "spark_app.lakegen",
        "--rows",
        str(LAKE.rows),
        "--days",
        str(LAKE.days),
        "--keys",
        str(LAKE.keys),
        "--out",
        uri,
    ]
    process = processes.start("lake generator", argv, folder / "lakegen.log")
    try:
        code = process.popen.wait(timeout=600)
        assert code == 0, f"the lake generator failed ({code}):\n{process.log_tail(40)}"
    finally:
        process.stop()
    yield Lake(uri, LAKE)


def schema_configmap(kube, namespace: str) -> None:
    apply(
        kube,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": SCHEMA_CONFIGMAP},
            "data": {SCHEMA_KEY: json.dumps(LATEST_SCHEMA)},
        },
    )


def service_template(sink: Path) -> dict:
    """A pod template of a service image the node agent runs; the clone replaces its command with the worker."""
    return {
        "metadata": {"labels": {"app": "accounts"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": LIVE_IMAGE,
                    "command": ["python", "-c", "pass"],
                    "env": [{"name": "REPRISE_TEST_SINK_DIR", "value": str(sink)}],
                }
            ]
        },
    }


def lake_replay(
    name: str,
    bootstrap: str,
    lake: Lake,
    spark_version: str,
    *,
    to: str,
    consumer: dict,
    start: str | None = None,
    filter_: str | None = None,
    partitions: int | None = 3,
    **extra: Any,
) -> dict:
    source: dict[str, Any] = {
        "uri": lake.uri,
        "format": "parquet",
        "timestampColumn": "ts",
        "keyColumn": "user_id",
        "partitionColumn": "dt",
        "to": to,
        "schema": {"configMapRef": {"name": SCHEMA_CONFIGMAP, "key": SCHEMA_KEY}},
    }
    if start is not None:
        source["from"] = start
    if filter_ is not None:
        source["filter"] = filter_
    spec: dict[str, Any] = {
        "kafka": {"bootstrapServers": bootstrap},
        "source": source,
        "backfillTopic": {"partitions": partitions} if partitions else {},
        "spark": {
            "image": "reprise-spark:dev",
            "sparkVersion": spark_version,
            "driver": {"cores": 1, "memory": "1g"},
            "executor": {"instances": 1, "cores": 1, "memory": "1g"},
        },
        "consumer": consumer,
        "drainGroup": f"{name}-lake",
        "completion": {"drainedFor": "2s"},
    }
    spec.update(extra)
    return {"apiVersion": "reprise.io/v1alpha1", "kind": "LakeReplay", "metadata": {"name": name}, "spec": spec}


def drain_consumer(sink: Path | None = None, deployment: str | None = None, replicas: int = 1) -> dict:
    """spec.consumer: a clone of `deployment`, or of `service_template(sink)`, calling the lake sink."""
    consumer: dict[str, Any] = {
        "replicas": replicas,
        "env": [
            {"name": "REPRISE_HANDLER", "value": HANDLER},
            {"name": "REPRISE_BATCH_SIZE", "value": "500"},
        ],
    }
    if deployment is not None:
        consumer["deploymentRef"] = {"name": deployment}
    else:
        assert sink is not None
        consumer["template"] = service_template(sink)
    return consumer


@dataclass(frozen=True)
class Processed:
    topic: str
    partition: int
    offset: int
    key: str | None
    value: Any
    headers: dict[str, str]
    wall_ns: int


@dataclass
class Sink:
    rows: list[Processed] = field(default_factory=list)

    @classmethod
    def read(cls, folder: Path) -> "Sink":
        sink = cls()
        for path in sorted(folder.glob("lake-*.jsonl")):
            for line in path.read_text().splitlines():
                try:
                    sink.rows.append(Processed(*json.loads(line)))
                except (ValueError, TypeError):
                    continue  # a torn last line of a killed process
        return sink

    def of_topic(self, topic: str) -> list[Processed]:
        return [r for r in self.rows if r.topic == topic]

    def event_counts(self, topic: str) -> Counter:
        return Counter(r.value["event_id"] for r in self.of_topic(topic))


@dataclass
class Watched:
    body: dict
    phases: list[str]
    spark_states: list[str]
    conditions_seen: set[tuple[str, str, str]]


def get(kube, namespace: str, kind: str, name: str) -> dict | None:
    out = kube.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def watch(
    kube,
    namespace: str,
    name: str,
    phase: str,
    timeout: float,
    operator=None,
    spark=None,
    watched: Watched | None = None,
) -> Watched:
    """Poll the LakeReplay until `phase`, remembering phases, Spark states and conditions on the way."""
    seen = watched or Watched({}, [], [], set())
    deadline = time.monotonic() + timeout
    while True:
        body = get(kube, namespace, "lakereplay", name)
        if body is not None:
            seen.body = body
            status = body.get("status") or {}
            got = status.get("phase")
            if got and (not seen.phases or seen.phases[-1] != got):
                seen.phases.append(got)
            state = (status.get("spark") or {}).get("state")
            if state and (not seen.spark_states or seen.spark_states[-1] != state):
                seen.spark_states.append(state)
            for c in status.get("conditions") or []:
                seen.conditions_seen.add((c["type"], c["status"], c["reason"]))
            if got == "Failed" and phase != "Failed":
                raise AssertionError(
                    f"LakeReplay {name} failed: {json.dumps(status, indent=1)}\n"
                    f"{_logs(operator, spark, namespace, name)}"
                )
            if got == phase:
                return seen
        if time.monotonic() > deadline:
            raise AssertionError(
                f"LakeReplay {name} did not reach {phase} within {timeout:.0f}s (phases "
                f"{seen.phases}, Spark {seen.spark_states}):\n{json.dumps(seen.body.get('status'), indent=1)}\n"
                f"{_logs(operator, spark, namespace, name)}"
            )
        time.sleep(0.5)


def _logs(operator, spark, namespace: str, name: str) -> str:
    text = ""
    if operator is not None:
        text += "operator log:\n" + "\n".join(operator.log().splitlines()[-40:]) + "\n"
    if spark is not None:
        path = spark.log_path(namespace, f"{name}-spark")
        if path is not None and path.exists():
            text += f"spark log ({path}):\n" + "\n".join(path.read_text(errors="replace").splitlines()[-40:])
        controller = getattr(spark, "controller", None)
        if controller is not None and controller.controller_log.exists():
            app = f'"name":"{name}-spark","namespace":"{namespace}"'
            states = [
                line
                for line in controller.controller_log.read_text(errors="replace").splitlines()
                if app in line and "newState" in line
            ]
            text += f"\nSpark operator ({controller.controller_log}):\n" + "\n".join(states[-20:])
    return text


def topic_exists(bootstrap: str, topic: str) -> bool:
    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics


def assert_lake_children_gone(kube, kafka, namespace: str, name: str, status: dict) -> None:
    children = status["children"]
    assert get(kube, namespace, "sparkapplication", children["sparkApplication"]) is None, (
        "the SparkApplication must be deleted"
    )
    pods = json.loads(
        kube.kubectl(
            "get", "pods", "-n", namespace, "-l", f"reprise.io/replay={name},reprise.io/kind=lakereplay", "-o", "json"
        ).stdout
    )["items"]
    assert pods == [], "the drain pods must be gone"
    assert get(kube, namespace, "deployment", children["deployment"]) is None, "the drain Deployment must be deleted"
    assert not topic_exists(kafka.bootstrap, children["backfillTopic"]), "the backfill topic must be deleted"
    assert group_state(kafka.bootstrap, children["replayGroup"]) in ("DEAD", "Dead"), "the drain group must be deleted"


def produce_events(bootstrap: str, topic: str, events: list[dict]) -> None:
    """Events as a live service's upstream wrote them: keyed by user, timestamped with their event time."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i, event in enumerate(sorted(events, key=lambda e: (e["ts"], e["event_id"]))):
        value = json.dumps({**event, "ts": event["ts"].isoformat()})
        producer.produce(
            topic, key=event["user_id"].encode(), value=value.encode(), timestamp=int(event["ts"].timestamp() * 1000)
        )
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)


def in_key_order(rows: list[Processed]) -> bool:
    """Each key's records, in the order of their partition's offsets, are in (day, event time, seq) order."""
    by_key: dict[str, list[Processed]] = {}
    for row in sorted(rows, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(row.key or "", []).append(row)
    for records in by_key.values():
        if len({r.partition for r in records}) != 1:
            return False
        order = [(r.headers["reprise-origin"], r.value["ts"], int(r.headers["reprise-seq"])) for r in records]
        if order != sorted(order):
            return False
    return True
