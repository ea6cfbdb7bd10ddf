"""Reconsume end to end, each mode on a real topic while producers keep writing: the operator as a process,
the real API server and controller manager, replay pods really running the worker (through the node agent),
and the real broker. Afterwards every child is gone."""

from __future__ import annotations

import json

import pytest

from reprise_operator.shared.constants import replay_group_name

from .scenario import (
    HISTORY,
    PARTITIONS,
    KeepProducing,
    Ledger,
    apply,
    assert_children_gone,
    committed,
    reconsume,
    wait_caught_up,
    wait_phase,
)

pytestmark = pytest.mark.integration


def test_handover_processes_every_record_from_the_boundary_exactly_once(
    kube, kafka, operator, namespace, topic_name, live_service
):
    with KeepProducing(kafka.bootstrap, topic_name) as producer:
        body = reconsume("add-locale", kafka.bootstrap, topic_name, "Handover", "accounts", str(live_service))
        # Slow enough that the guard is skipping before the replay catches up; an instant replay would hand
        # over before the guard ever skipped, which is correct but proves less.
        body["spec"]["consumer"]["env"].append({"name": "REPRISE_MAX_RECORDS_PER_SECOND", "value": "400"})
        apply(kube, namespace, body)
        done = wait_phase(kube, namespace, "reconsume", "add-locale", "Complete", timeout=240, operator=operator)
    assert producer.written > 0
    ends = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    ledger = Ledger.read(live_service, topic_name)
    skipped = [p for p in range(PARTITIONS) if ledger.first_skipped(p, ends[p]) < ends[p]]
    # The guard must have been skipping somewhere; a partition it reached only after the replay had caught up
    # (so it never skipped there) is still exactly-once, which the loop below checks for every partition.
    assert skipped, "the guard never skipped on any partition, so nothing was handed over"
    status = done["status"]
    handover_offsets = {part["partition"]: part["handoverOffset"] for part in status["progress"]["partitions"]}
    for p in range(PARTITIONS):
        first_skipped = ledger.first_skipped(p, ends[p])
        replay = ledger.replay.get(p, {})
        live = ledger.live.get(p, {})
        for offset in range(first_skipped, ends[p]):
            total = live.get(offset, 0) + replay.get(offset, 0)
            assert total == 1, (
                f"partition {p} offset {offset}: processed {total} times (live {live.get(offset, 0)}, replay {replay.get(offset, 0)})"
            )
        # The replay processed every record of history below its handover offset H.
        history = min(first_skipped, handover_offsets[p])
        assert all(replay.get(o, 0) >= 1 for o in range(0, history)), f"partition {p}: the replay missed history"
    assert all(part["state"] == "HandedOver" for part in status["progress"]["partitions"])
    assert {c["type"]: c["status"] for c in status["conditions"]}["Complete"] == "True"
    assert_children_gone(kube, kafka, namespace, "add-locale", replay_group_name(namespace, "add-locale"), topic_name)


def test_parallel_replay_group_reaches_the_live_group(kube, kafka, operator, namespace, topic_name, live_service):
    with KeepProducing(kafka.bootstrap, topic_name):
        apply(
            kube,
            namespace,
            reconsume("backfill-field", kafka.bootstrap, topic_name, "Parallel", "accounts", str(live_service)),
        )
        done = wait_phase(kube, namespace, "reconsume", "backfill-field", "Complete", timeout=240, operator=operator)
    ledger = Ledger.read(live_service, topic_name)
    for part in done["status"]["progress"]["partitions"]:
        p, stop = part["partition"], part["handoverOffset"]
        replay = ledger.replay.get(p, {})
        assert all(replay.get(o, 0) >= 1 for o in range(0, stop)), f"partition {p}: replay missed records below {stop}"
        assert stop >= HISTORY // PARTITIONS // 2, "the replay stops at the live group's position, past the history"
        # Parallel partitions end CaughtUp; HandedOver is the Handover mode's state (docs/reconsume.md, the CRD).
        assert part["state"] == "CaughtUp", part
    # Review M4: the group Reprise created is in status.created, and is what teardown deleted.
    group = replay_group_name(namespace, "backfill-field")
    assert done["status"]["created"] == {"groups": [group], "topics": []}
    assert_children_gone(kube, kafka, namespace, "backfill-field", group, topic_name)


def test_rewind_replays_the_live_group_and_keeps_a_rollback_snapshot(
    kube, kafka, operator, namespace, topic_name, live_service
):
    before = committed(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    apply(
        kube, namespace, reconsume("rewind-all", kafka.bootstrap, topic_name, "Rewind", "accounts", str(live_service))
    )
    done = wait_phase(kube, namespace, "reconsume", "rewind-all", "Complete", timeout=240, operator=operator)
    rollback = done["status"]["rollback"]
    assert {(o["partition"], o["offset"]) for o in rollback["offsets"]} == set(before.items())
    config_map = json.loads(
        kube.kubectl("get", "configmap", rollback["configMap"], "-n", namespace, "-o", "json").stdout
    )
    rows = sorted(tuple(line.split(",")) for line in config_map["data"]["offsets.csv"].splitlines())
    assert rows == sorted((topic_name, str(p), str(o)) for p, o in before.items())
    # Review L1: it says whose snapshot it is (it has no owner reference: it outlives the Reconsume).
    assert config_map["metadata"]["annotations"]["reprise.io/created-for"] == done["metadata"]["uid"]
    ledger = Ledger.read(live_service, topic_name)
    for p in range(PARTITIONS):
        assert all(ledger.live[p][o] >= 2 for o in range(before[p])), (
            f"partition {p}: the live group did not replay from the start"
        )
    deployment = json.loads(kube.kubectl("get", "deployment", "accounts", "-n", namespace, "-o", "json").stdout)
    assert deployment["spec"]["replicas"] == 1, "the live Deployment is scaled back"
