"""Handover Reconsume across languages, end to end on the real broker and control plane, under faults.

- The Java example service (examples/accounts-jvm, 3 replicas, its consumer wrapped by the Java guard) hands
  over to its own image running the Java replay role (`consumer.entrypoint: Service`).
- Interoperability: Reprise's Python worker (`entrypoint: ReplayWorker`) against the Java guard, and the Java
  replay role against the Python guard (the Python test service, 3 replicas).

Producers keep writing throughout; `kill -9` of live and replay replicas and a rebalance of the live group are
injected at points of the replay (`Fault`). An independent reader of the services' ledgers then checks: from the
first offset the live group skipped on, 0 records processed by both groups, 0 lost, and every repeat within a
group inside the uncommitted batch of a killed process. More fault timings run in `make soak`
(tests/soak/test_jvm_handover_soak.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reprise_operator.constants import replay_group_name

from .jvm_scenario import (
    LIVE_BATCH,
    REPLAY_BATCH,
    Fault,
    GroupLedger,
    KeepProducingEvents,
    assert_exactly_once,
    check_exactly_once,
    handover_reconsume,
    inject,
    java_replay_consumer,
    jvm_live_deployment,
    produce_events,
    python_live_deployment,
    python_replay_consumer,
    replay_client_secret,
)
from .scenario import PARTITIONS, apply, assert_children_gone, wait_caught_up, wait_phase

pytestmark = pytest.mark.integration

HISTORY = 4500
LIVE_GROUP = "accounts-jvm"
#: Throttle of each replay replica: slow enough that the faults land while the guard skips.
RATE = 120

#: Fault timings run by `make test`; tests/soak runs more.
EARLY = (Fault("running", "kill-live"), Fault("replaying", "kill-replay"), Fault("replaying", "rebalance"))
LATE = (Fault("replaying", "rebalance"), Fault("handing-over", "kill-replay"), Fault("handing-over", "kill-live"))


def run_handover(kube, kafka, operator, namespace: str, topic: str, ledger: Path, *, live: str, replay: str,
                 faults: tuple[Fault, ...]) -> str:
    """One Handover with `live` (java | python) guarding and `replay` (java | python) replaying; returns the
    figures. Fails on any breach of exactly-once."""
    kafka.create_topic(topic, PARTITIONS)
    produce_events(kafka.bootstrap, topic, HISTORY)
    make_live = jvm_live_deployment if live == "java" else python_live_deployment
    apply(kube, namespace, make_live("accounts", kafka.bootstrap, LIVE_GROUP, topic, ledger))
    wait_caught_up(kafka.bootstrap, LIVE_GROUP, topic, PARTITIONS, timeout=240)
    replay_client_secret(kube, namespace)
    if replay == "java":
        consumer = java_replay_consumer(kafka.bootstrap, LIVE_GROUP, topic, ledger,
                                        clone="accounts" if live == "java" else None)
    else:
        consumer = python_replay_consumer(ledger)
    killed: set[int] = set()
    with KeepProducingEvents(kafka.bootstrap, topic) as producer:
        apply(kube, namespace, handover_reconsume("handover", kafka.bootstrap, topic, LIVE_GROUP, consumer, RATE))
        wait_phase(kube, namespace, "reconsume", "handover", "Running", 60, operator)
        done = inject(kube, namespace, "handover", "accounts", ledger, topic, faults, killed)
        finished = wait_phase(kube, namespace, "reconsume", "handover", "Complete", 420, operator)
    assert producer.written > 0
    ends = wait_caught_up(kafka.bootstrap, LIVE_GROUP, topic, PARTITIONS, timeout=180)
    verdict = check_exactly_once(GroupLedger.read(ledger, topic), ends, killed)
    # A killed process repeats at most what it processed and did not commit: a batch per partition it held (the
    # Java replay role may have one more batch's commit in flight).
    assert_exactly_once(verdict, per_killed_process=2 * max(LIVE_BATCH, REPLAY_BATCH) * PARTITIONS)
    status = finished["status"]
    assert all(p["state"] == "HandedOver" for p in status["progress"]["partitions"])
    ledger_now = GroupLedger.read(ledger, topic)
    for p in status["progress"]["partitions"]:
        # Where the guard skipped (F before the end), the replay covered [F, H): H is past F.
        if verdict.first_skipped[p["partition"]] < ends[p["partition"]]:
            assert p["handoverOffset"] > verdict.first_skipped[p["partition"]], (p, verdict.summary())
        assert ledger_now.sides["R"].get(p["partition"]), f"the replay processed nothing of partition {p}"
    assert_children_gone(kube, kafka, namespace, "handover", replay_group_name(namespace, "handover"), topic)
    figures = f"{live} guard / {replay} replay, faults {done}, killed {sorted(killed)}: {verdict.summary()}"
    print(figures)
    return figures


@pytest.mark.parametrize("faults", [EARLY, LATE], ids=["early", "late"])
def test_java_service_hands_over_to_its_own_replay_role(kube, kafka, operator, namespace, topic_name, tmp_path,
                                                        jvm_image, faults):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="java", replay="java", faults=faults)
    groups = GroupLedger.read(ledger, topic_name).groups
    assert groups == {LIVE_GROUP, replay_group_name(namespace, "handover")}, groups


def test_python_replay_worker_against_the_java_guard(kube, kafka, operator, namespace, topic_name, tmp_path,
                                                     jvm_image):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="java", replay="python", faults=EARLY)


def test_java_replay_role_against_the_python_guard(kube, kafka, operator, namespace, topic_name, tmp_path,
                                                   jvm_image):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="python", replay="java", faults=LATE)
    deployment = json.loads(kube.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout)["items"]
    assert [d["metadata"]["name"] for d in deployment] == ["accounts"], "the replay Deployment is gone"
