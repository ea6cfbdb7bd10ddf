"""Bad input on the live side, seen in the Reconsume's status (issue 12, "Bad input"): a handover record that a
newer Reprise wrote for one partition makes the live service's guard stop following the replay there. It skips
nothing on that partition (no record lost, at-least-once), publishes why, and the operator shows it: the
GuardProblem condition names the partition and reason, and the partition's `guardProblem` holds the code.
When the replay's own handover record replaces the unreadable one, the guard follows again, the condition turns
False and the replay completes; the partitions the guard could follow stay exact."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from replay_worker.topic.handover_topic import HandoverTopic
from replay_worker.protocol.wire import encode_key
from tests.fixtures.kube import wait_for

from .scenario import (
    PARTITIONS,
    handover_topic_of,
    KeepProducing,
    Ledger,
    apply,
    conditions,
    get,
    reconsume,
    wait_caught_up,
    wait_phase,
)
from .test_reconsume_faults import SLOW

pytestmark = pytest.mark.integration

PROBLEM = "unreadable-handover-record:newer-version"


def plant_newer_handover_record(
    bootstrap: str, handover_topic: str, replay_id: str, topic: str, partition: int
) -> None:
    """What a newer Reprise would write: a `handover` value whose format version this one cannot read."""
    topic_handle = HandoverTopic(bootstrap, handover_topic)
    try:
        topic_handle.ensure(create=True)  # compacted, as the operator creates it; never auto-created
    finally:
        topic_handle.close()
    value = {"v": 99, "kind": "handover", "topic": topic, "partition": partition, "offset": 0, "shape": "unknown"}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(
        handover_topic, key=encode_key(replay_id, "handover", topic, partition), value=json.dumps(value).encode()
    )
    assert producer.flush(30) == 0, "the planted record was not delivered"


def test_a_guard_that_cannot_follow_a_partition_is_named_in_status_and_nothing_is_lost(
    kube, kafka, operator, namespace, topic_name, live_service
):
    name = "newer"
    body = reconsume(name, kafka.bootstrap, topic_name, "Handover", "accounts", str(live_service), approval="Manual")
    body["spec"]["consumer"]["env"].append(SLOW)  # time for the operator to see the problem before the handover
    with KeepProducing(kafka.bootstrap, topic_name):
        apply(kube, namespace, body)
        planned = wait_phase(kube, namespace, "reconsume", name, "PlanReady", 60, operator)
        replay_id = f"{namespace}/{name}/{planned['metadata']['uid'][:8]}"
        plant_newer_handover_record(kafka.bootstrap, handover_topic_of(namespace), replay_id, topic_name, 0)
        kube.kubectl("annotate", "reconsume", name, "-n", namespace, "reprise.io/approve=true")

        def reported():
            found = get(kube, namespace, "reconsume", name) or {}
            if (found.get("status") or {}).get("phase") == "Failed":
                raise AssertionError(json.dumps(found["status"], indent=1))
            return found if conditions(found).get("GuardProblem", {}).get("status") == "True" else None

        seen = wait_for(reported, 120, "the GuardProblem condition", interval=0.5)
        condition = conditions(seen)["GuardProblem"]
        assert condition["reason"] == "GuardCannotFollow"
        assert f"{topic_name}/0 ({PROBLEM}" in condition["message"], condition
        assert f"{topic_name}/1" not in condition["message"] and f"{topic_name}/2" not in condition["message"]
        by_partition = {p["partition"]: p for p in seen["status"]["progress"]["partitions"]}
        assert by_partition[0].get("guardProblem") == PROBLEM
        assert "guardProblem" not in by_partition[1] and "guardProblem" not in by_partition[2]
        events = kube.kubectl(
            "get", "events", "-n", namespace, "--field-selector", "reason=GuardCannotFollow", "-o", "json"
        )
        assert any(
            e["type"] == "Warning" and f"{topic_name}/0" in e["message"] for e in json.loads(events.stdout)["items"]
        ), "a Warning Event names the partition"

        # The replay reaches the live group and writes its own handover record for partition 0, which replaces the
        # unreadable one: the guard follows again and acknowledges, and the replay completes.
        done = wait_phase(kube, namespace, "reconsume", name, "Complete", 300, operator)
    assert conditions(done)["GuardProblem"]["status"] == "False"
    assert conditions(done)["GuardProblem"]["reason"] == "GuardFollowing"
    ends = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    ledger = Ledger.read(live_service, topic_name)
    for p in range(PARTITIONS):
        first_skipped = ledger.first_skipped(p, ends[p])
        counts = [
            ledger.live.get(p, {}).get(o, 0) + ledger.replay.get(p, {}).get(o, 0) for o in range(first_skipped, ends[p])
        ]
        assert all(c >= 1 for c in counts), f"partition {p}: a record was lost"
        if p != 0:  # the guard followed the replay here: exactly once
            assert all(c == 1 for c in counts), f"partition {p}: {sum(c - 1 for c in counts)} processed twice"
