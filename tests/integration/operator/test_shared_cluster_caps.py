"""M7 of the security review: one resource cannot take an unbounded share of the shared Kafka cluster. A
LakeReplay asking for a 1000-partition backfill topic is refused at planning with the field named, and no topic
is created; a replay asking for more consumers than it has partitions runs one per partition, and says so."""

from __future__ import annotations

import json

from confluent_kafka.admin import AdminClient

from tests.fixtures.kube import wait_for

from .lake_scenario import drain_consumer
from .scenario import PARTITIONS, apply, conditions, get, reconsume, wait_phase

import pytest

pytestmark = pytest.mark.integration


def topic_partitions(bootstrap: str, topic: str) -> int | None:
    found = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics.get(topic)
    return len(found.partitions) if found is not None and found.error is None else None


def test_a_backfill_topic_above_the_partition_cap_is_refused_at_planning(kube, kafka, operator, namespace, tmp_path):
    body = {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "LakeReplay",
        "metadata": {"name": "wide"},
        "spec": {
            "kafka": {"bootstrapServers": kafka.bootstrap},
            "source": {
                "uri": f"file://{tmp_path}/lake",
                "format": "parquet",
                "timestampColumn": "ts",
                "keyColumn": "user_id",
                "to": "2026-01-02T00:00:00Z",
            },
            "backfillTopic": {"partitions": 1000},
            "spark": {"image": "reprise-spark:dev"},
            "consumer": drain_consumer(tmp_path),
            "drainGroup": "wide-lake",
        },
    }
    apply(kube, namespace, body)
    topic = f"{namespace}.wide.reprise-backfill"
    # Until it is refused, or it got past planning (the attack: the topic is then made with 1000 partitions).
    found = wait_for(
        lambda: (
            (get(kube, namespace, "lakereplay", "wide") or {}).get("status", {}).get("phase")
            in ("Failed", "PlanReady", "Running")
        ),
        120,
        "the LakeReplay to be planned or refused",
    )
    assert found
    status = get(kube, namespace, "lakereplay", "wide")["status"]
    failed = conditions({"status": status}).get("Failed") or {}
    made = topic_partitions(kafka.bootstrap, topic)
    assert status["phase"] == "Failed", f"not refused: phase {status['phase']}, backfill topic partitions {made}"
    assert failed.get("reason") == "BackfillPartitionsLimit"
    assert (
        failed["message"].startswith("spec.backfillTopic.partitions: 1000")
        and "limits.maxBackfillPartitions" in failed["message"]
    )
    assert made is None, f"a refused LakeReplay created its backfill topic ({made} partitions)"


def test_replay_consumers_are_clamped_to_the_partitions_they_replay(
    kube, kafka, operator, namespace, topic_name, live_service
):
    body = reconsume("clamped", kafka.bootstrap, topic_name, "Parallel", "accounts", str(live_service))
    body["spec"]["consumer"]["replicas"] = 2 * PARTITIONS
    apply(kube, namespace, body)
    deployment = wait_for(
        lambda: json.loads(
            kube.kubectl("get", "deployments", "-n", namespace, "-l", "reprise.io/replay=clamped", "-o", "json").stdout
        )["items"],
        120,
        "the replay Deployment",
    )[0]
    assert deployment["spec"]["replicas"] == PARTITIONS, "one replay consumer per replayed partition, not more"
    done = wait_phase(kube, namespace, "reconsume", "clamped", "Complete", timeout=240, operator=operator)
    events = kube.kubectl("get", "events", "-n", namespace, "--field-selector", "reason=ReplicasClamped", "-o", "json")
    messages = [e["message"] for e in json.loads(events.stdout)["items"]]
    assert any(f"spec.consumer.replicas {2 * PARTITIONS} clamped to {PARTITIONS}" in m for m in messages), messages
    assert done["status"]["phase"] == "Complete"
