"""Reconsume under faults: the operator killed (SIGKILL) at each phase and restarted, the resource deleted
mid-replay, and suspend then resume. Each ends in a correct state with no orphaned Deployment, replay group
or handover record, and no record of the handover range lost."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from reprise_operator.shared.constants import replay_group_name
from replay_worker.topic.handover_topic import HandoverTopic
from tests.fixtures.kube import wait_for

from .scenario import (
    PARTITIONS,
    KeepProducing,
    Ledger,
    apply,
    assert_children_gone,
    group_state,
    reconsume,
    wait_caught_up,
    wait_phase,
)

pytestmark = pytest.mark.integration

#: One line of the operator's log (its format is in reprise_operator/__main__.py; messages are not escaped).
LOG_LINE = re.compile(r'"level":"(?P<level>[A-Z]+)","logger":"[^"]*","message":"(?P<message>.*)"}$')

#: Slow the replay down so there is time to act while it runs.
SLOW = {"name": "REPRISE_MAX_RECORDS_PER_SECOND", "value": "150"}


def slow_reconsume(name: str, kafka, topic: str, sink, **extra) -> dict:
    body = reconsume(name, kafka.bootstrap, topic, "Handover", "accounts", str(sink), **extra)
    body["spec"]["consumer"]["env"].append(SLOW)
    return body


def phase_of(kube, namespace: str, name: str) -> str | None:
    out = kube.kubectl("get", "reconsume", name, "-n", namespace, "-o", "jsonpath={.status.phase}", check=False)
    return out.stdout or None


def replay_deployments(kube, namespace: str, name: str) -> list[dict]:
    found = kube.kubectl("get", "deployments", "-n", namespace, "-l", f"reprise.io/replay={name}", "-o", "json")
    return json.loads(found.stdout)["items"]


def assert_handover_exact(sink, topic: str, ends: dict[int, int], duplicates_allowed: int = 0) -> None:
    ledger = Ledger.read(sink, topic)
    duplicated = 0
    for p in range(PARTITIONS):
        first_skipped = ledger.first_skipped(p, ends[p])
        for offset in range(first_skipped, ends[p]):
            total = ledger.live.get(p, {}).get(offset, 0) + ledger.replay.get(p, {}).get(offset, 0)
            assert total >= 1, f"partition {p} offset {offset} was lost"
            duplicated += total - 1
    assert duplicated <= duplicates_allowed, f"{duplicated} records processed twice (allowed {duplicates_allowed})"


def test_operator_killed_at_each_phase_resumes_without_duplicates(
    kube, kafka, operator, namespace, topic_name, live_service
):
    with KeepProducing(kafka.bootstrap, topic_name):
        apply(kube, namespace, slow_reconsume("restarts", kafka, topic_name, live_service, approval="Manual"))
        wait_phase(kube, namespace, "reconsume", "restarts", "PlanReady", 60, operator)
        operator.kill()
        operator.start()
        kube.kubectl("annotate", "reconsume", "restarts", "-n", namespace, "reprise.io/approve=true")
        wait_phase(kube, namespace, "reconsume", "restarts", "Running", 60, operator)
        operator.kill()
        operator.start()
        # While it runs, the restarted operator must adopt the Deployment, not make a second one.
        wait_for(lambda: phase_of(kube, namespace, "restarts") == "Running", 30, "Running after restart")
        assert len(replay_deployments(kube, namespace, "restarts")) == 1
        operator.kill()
        operator.start()
        done = wait_phase(kube, namespace, "reconsume", "restarts", "Complete", 240, operator)
    ends = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    assert_handover_exact(live_service, topic_name, ends)
    reasons = [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"]
    assert {"PlanReady", "Approved", "Drained", "Complete"} <= set(reasons)
    assert_children_gone(kube, kafka, namespace, "restarts", replay_group_name(namespace, "restarts"), topic_name)


def test_deleting_mid_replay_hands_back_to_the_live_group_and_leaves_nothing(
    kube, kafka, operator, namespace, topic_name, live_service
):
    with KeepProducing(kafka.bootstrap, topic_name):
        body = slow_reconsume("cancelled", kafka, topic_name, live_service)
        apply(kube, namespace, body)
        running = wait_phase(kube, namespace, "reconsume", "cancelled", "Running", 60, operator)
        wait_for(lambda: Ledger.read(live_service, topic_name).replay, 60, "the replay to process records")
        log_from = len(operator.log())
        kube.kubectl("delete", "reconsume", "cancelled", "-n", namespace, "--timeout=120s")
    # The cleanup may wait for the replay pods to stop and for the live side to acknowledge: routine waiting, so
    # the operator logs it at INFO. An ERROR or a WARNING is for something a person must act on. Whether it
    # waits at all is the machine's timing (pods that stop within the teardown's own wait, a guard that
    # acknowledges while the operator's reader catches up): not asserted.
    cleanup_log = [
        found.groupdict() for line in operator.log()[log_from:].splitlines() if (found := LOG_LINE.search(line))
    ]
    waits = ("still terminating", "acknowledge", "cleanup")
    waited = [r for r in cleanup_log if any(w in r["message"] for w in waits)]
    assert all(r["level"] in ("DEBUG", "INFO") for r in waited), waited
    ends = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    # The replay's uncommitted batches (batch size 100, 2 replicas) may be processed again by the live side.
    assert_handover_exact(live_service, topic_name, ends, duplicates_allowed=2 * 100 * PARTITIONS)
    assert replay_deployments(kube, namespace, "cancelled") == []
    group = replay_group_name(namespace, "cancelled")
    assert group_state(kafka.bootstrap, group) in ("DEAD", "Dead")
    rid = f"{namespace}/cancelled/{running['metadata']['uid'][:8]}"
    topic = HandoverTopic(kafka.bootstrap)
    try:
        assert topic.read_replay(rid).live_keys == set(), "handover records must be tombstoned"
    finally:
        topic.close()


def test_suspend_then_resume_continues_from_committed_offsets(
    kube, kafka, operator, namespace, topic_name, live_service
):
    with KeepProducing(kafka.bootstrap, topic_name):
        apply(kube, namespace, slow_reconsume("paused", kafka, topic_name, live_service))
        wait_phase(kube, namespace, "reconsume", "paused", "Running", 60, operator)
        wait_for(lambda: Ledger.read(live_service, topic_name).replay, 60, "the replay to process records")
        kube.kubectl("patch", "reconsume", "paused", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":true}}')
        wait_phase(kube, namespace, "reconsume", "paused", "Suspended", 60, operator)
        deployment = replay_deployments(kube, namespace, "paused")[0]
        assert deployment["spec"]["replicas"] == 0
        # Suspended on purpose: no partition counts as a handover waiting for the live side (the alert).
        with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=10) as answer:
            exposed = answer.read().decode()
        pending = re.search(r'^reprise_handover_partitions_pending\{[^}]*name="paused"[^}]*\} (\S+)$', exposed, re.M)
        assert pending is not None and float(pending.group(1)) == 0, pending
        kube.kubectl(
            "patch", "reconsume", "paused", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":false}}'
        )
        wait_phase(kube, namespace, "reconsume", "paused", "Complete", 240, operator)
    ends = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    assert_handover_exact(live_service, topic_name, ends)
    assert_children_gone(kube, kafka, namespace, "paused", replay_group_name(namespace, "paused"), topic_name)
