"""`kubectl reprise` end to end: the real kubectl finds the plugin on the PATH (bin/kubectl-reprise, as a user of
the checkout would put it there) and runs it against the real API server, the real broker and the operator as
a process. What the plugin says is checked against what the operator then does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.fixtures.kube import wait_for

from .scenario import PARTITIONS, apply, committed, group_state, produce, reconsume, wait_caught_up, wait_phase

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def kubectl_reprise(
    kube, *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`kubectl reprise ARGS` through kubectl's plugin lookup; kubectl passes no flags of its own to a plugin,
    so the cluster comes from KUBECONFIG, as for a user."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "REPRISE_KAFKA_BOOTSTRAP_ALIASES"},
        "KUBECONFIG": str(kube.kubeconfig),
        "PATH": f"{REPO / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "REPRISE_PYTHON": sys.executable,
        **(env or {}),
    }
    return subprocess.run(
        [str(kube.control_plane.kubectl), "reprise", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def write_manifest(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / f"{body['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def rcs(kube, namespace: str, name: str) -> dict | None:
    out = kube.kubectl("get", "reconsume", name, "-n", namespace, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def test_plan_agrees_offset_for_offset_with_the_operators_plan(kube, kafka, operator, namespace, topic_name, tmp_path):
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, 1500)
    time.sleep(1.0)  # records before and after the start time, so the start falls inside every partition
    start = datetime.now(timezone.utc)
    time.sleep(1.0)
    produce(kafka.bootstrap, topic_name, 1500, first=1500)
    body = reconsume(
        "plan-first",
        kafka.bootstrap,
        topic_name,
        "Parallel",
        "accounts",
        str(tmp_path),
        approval="Manual",
        start={"timestamp": start.strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"},
    )
    manifest = write_manifest(tmp_path, body)

    shown = kubectl_reprise(kube, "plan", "-f", str(manifest), "-n", namespace, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    planned = json.loads(shown.stdout)["plan"]
    assert rcs(kube, namespace, "plan-first") is None, "plan must not create the resource"
    table = kubectl_reprise(kube, "plan", "-f", str(manifest), "-n", namespace)
    assert table.returncode == 0, table.stderr
    assert "TOTAL" in table.stdout and "Nothing was created" in table.stdout
    assert f"{planned['totalRecords']} records in {PARTITIONS} partitions" in table.stdout

    apply(kube, namespace, body)
    ready = wait_phase(kube, namespace, "reconsume", "plan-first", "PlanReady", timeout=120, operator=operator)
    operators = ready["status"]["plan"]

    def offsets(plan: dict) -> list[tuple]:
        return [
            (p["topic"], p["partition"], p["startOffset"], p["endOffset"], p["records"], p["retentionRisk"])
            for p in plan["partitions"]
        ]

    assert offsets(planned) == offsets(operators)
    assert planned["totalRecords"] == operators["totalRecords"]
    # The start lies inside the history: neither the first nor the end offset of every partition.
    assert 0 < planned["totalRecords"] < 3000
    assert all(0 < p["startOffset"] < p["endOffset"] for p in planned["partitions"])


def test_plan_reaches_kafka_through_the_operators_mapping_and_says_in_one_line_when_it_cannot(
    kube, kafka, namespace, topic_name, tmp_path
):
    """The examples name `kafka-bootstrap.kafka:9092`, which the operator maps (REPRISE_KAFKA_BOOTSTRAP_ALIASES);
    `plan` maps it the same way, and without a mapping says so in one line instead of librdkafka's hundreds."""
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, 300)
    body = reconsume("in-cluster-name", "kafka-bootstrap.kafka:9092", topic_name, "Parallel", "accounts", str(tmp_path))
    manifest = write_manifest(tmp_path, body)

    mapped = kubectl_reprise(
        kube,
        "plan",
        "-f",
        str(manifest),
        "-n",
        namespace,
        "-o",
        "json",
        env={"REPRISE_KAFKA_BOOTSTRAP_ALIASES": f"*.kafka:*={kafka.bootstrap}"},
    )
    assert mapped.returncode == 0, mapped.stderr
    assert json.loads(mapped.stdout)["plan"]["totalRecords"] == 300

    unmapped = kubectl_reprise(kube, "plan", "-f", str(manifest), "-n", namespace)
    assert unmapped.returncode == 1
    lines = unmapped.stderr.strip().splitlines()
    assert len(lines) == 1, f"{len(lines)} lines on stderr:\n{unmapped.stderr[:2000]}"
    assert lines[0].startswith("error: Kafka at kafka-bootstrap.kafka:9092 did not answer"), lines[0]
    assert "REPRISE_KAFKA_BOOTSTRAP_ALIASES" in lines[0]


def test_plan_refuses_a_start_older_than_retention_with_the_operators_message(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, 600)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    # Retention at work: the first 50 records of every partition are deleted, so the log starts at 50.
    for future in admin.delete_records([TopicPartition(topic_name, p, 50) for p in range(PARTITIONS)]).values():
        future.result(30)
    body = reconsume(
        "too-old",
        kafka.bootstrap,
        topic_name,
        "Parallel",
        "accounts",
        str(tmp_path),
        start={"timestamp": "2020-01-01T00:00:00Z"},
    )
    manifest = write_manifest(tmp_path, body)

    refused = kubectl_reprise(kube, "plan", "-f", str(manifest), "-n", namespace)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    error = refused.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: plan refused: RetentionExceeded: "), refused.stderr
    message = error[0].removeprefix("error: plan refused: RetentionExceeded: ")
    assert "Lost" in refused.stdout, "the table shows which partitions lost their start"

    apply(kube, namespace, body)
    failed = wait_phase(kube, namespace, "reconsume", "too-old", "Failed", timeout=120, operator=operator)
    condition = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert (condition["reason"], condition["message"]) == ("RetentionExceeded", message)

    future = dict(
        body, metadata={"name": "not-yet"}, spec=dict(body["spec"], start={"timestamp": "2999-01-01T00:00:00Z"})
    )
    refused_future = kubectl_reprise(kube, "plan", "-f", str(write_manifest(tmp_path, future)), "-n", namespace)
    assert refused_future.returncode == 1
    assert refused_future.stderr.startswith(
        "error: plan refused: StartInFuture: spec.start.timestamp 2999-01-01T00:00:00Z is in the future"
    ), refused_future.stderr

    watched = kubectl_reprise(kube, "watch", "too-old", "-n", namespace, "--timeout", "60s")
    assert watched.returncode == 1, watched.stdout + watched.stderr
    assert f"reconsume/too-old Failed: RetentionExceeded: {message}" in watched.stdout


def test_approve_suspend_resume_and_cancel_move_a_reconsume_through_its_phases(
    kube, kafka, operator, namespace, topic_name, live_service, tmp_path
):
    body = reconsume(
        "steered", kafka.bootstrap, topic_name, "Parallel", "accounts", str(live_service), approval="Manual"
    )
    # Slow, so the replay is still running while it is suspended and resumed.
    body["spec"]["consumer"]["env"].append({"name": "REPRISE_MAX_RECORDS_PER_SECOND", "value": "10"})
    apply(kube, namespace, body)
    wait_phase(kube, namespace, "reconsume", "steered", "PlanReady", timeout=120, operator=operator)
    listed = kubectl_reprise(kube, "get", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    assert "reconsume/steered" in listed.stdout and "PlanReady" in listed.stdout

    def replicas() -> int | None:
        out = kube.kubectl(
            "get", "deployment", "steered-replay", "-n", namespace, "-o", "jsonpath={.spec.replicas}", check=False
        )
        return int(out.stdout) if out.returncode == 0 and out.stdout else None

    approved = kubectl_reprise(kube, "approve", "steered", "-n", namespace)
    assert approved.returncode == 0 and "approved" in approved.stdout, approved.stderr
    assert rcs(kube, namespace, "steered")["metadata"]["annotations"]["reprise.io/approve"] == "true"
    wait_phase(kube, namespace, "reconsume", "steered", "Running", timeout=120, operator=operator)
    assert replicas() == 2

    suspended = kubectl_reprise(kube, "suspend", "steered", "-n", namespace)
    assert suspended.returncode == 0, suspended.stderr
    wait_phase(kube, namespace, "reconsume", "steered", "Suspended", timeout=60, operator=operator)
    assert replicas() == 0
    status = kubectl_reprise(kube, "status", "steered", "-n", namespace)
    assert status.returncode == 0 and "phase Suspended" in status.stdout, status.stderr
    assert "Suspended" in status.stdout.split("CONDITION", 1)[1]

    resumed = kubectl_reprise(kube, "resume", "steered", "-n", namespace)
    assert resumed.returncode == 0, resumed.stderr
    wait_phase(kube, namespace, "reconsume", "steered", "Running", timeout=60, operator=operator)
    assert replicas() == 2

    unconfirmed = kubectl_reprise(kube, "cancel", "steered", "-n", namespace)
    assert unconfirmed.returncode == 1 and "pass --yes" in unconfirmed.stderr
    assert rcs(kube, namespace, "steered") is not None, "cancel without confirmation must not delete"
    cancelled = kubectl_reprise(kube, "cancel", "steered", "-n", namespace, "--yes")
    assert cancelled.returncode == 0, cancelled.stderr
    assert rcs(kube, namespace, "steered") is None
    assert replicas() is None, "the replay Deployment is removed by the cancel"


def test_watch_follows_a_rewind_to_complete_and_rollback_restores_its_offsets(
    kube, kafka, operator, namespace, topic_name, live_service
):
    before = committed(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    apply(
        kube, namespace, reconsume("rewind-back", kafka.bootstrap, topic_name, "Rewind", "accounts", str(live_service))
    )
    watched = kubectl_reprise(kube, "watch", "rewind-back", "-n", namespace, "--timeout", "240s")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "reconsume/rewind-back Complete: " in watched.stdout
    assert f"{topic_name}/0" in watched.stdout, "plain lines name each partition"
    snapshot = {
        o["partition"]: o["offset"] for o in rcs(kube, namespace, "rewind-back")["status"]["rollback"]["offsets"]
    }
    assert snapshot == before

    produce(kafka.bootstrap, topic_name, 90, first=10_000)  # the live group moves past the snapshot
    moved = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    assert all(moved[p] > snapshot[p] for p in range(PARTITIONS))

    busy = kubectl_reprise(kube, "rollback", "rewind-back", "-n", namespace, "--yes")
    assert busy.returncode == 1 and "Empty" in busy.stderr, busy.stdout + busy.stderr
    assert committed(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS) == moved

    kube.kubectl("scale", "deployment", "accounts", "-n", namespace, "--replicas=0")
    wait_for(
        lambda: group_state(kafka.bootstrap, "accounts-group") in ("EMPTY", "Empty"), 90, "the live group to be Empty"
    )
    rolled = kubectl_reprise(kube, "rollback", "rewind-back", "-n", namespace, "--yes")
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    rows = [line.split() for line in rolled.stdout.splitlines()]
    for p in range(PARTITIONS):  # said before it is moved: where the group is, where it goes back to
        assert [topic_name, str(p), str(moved[p]), str(snapshot[p]), f"{snapshot[p] - moved[p]:+d}"] in rows, (
            rolled.stdout
        )
    assert committed(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS) == snapshot
