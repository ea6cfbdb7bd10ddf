"""Handover Reconsume across languages, end to end on the real broker and control plane, under faults.

- The Java example service (examples/accounts-jvm, 3 replicas, its consumer wrapped by the Java guard) hands
  over to its own image running the Java replay role (`consumer.entrypoint: Service`).
- Interoperability: Reprise's Python worker (`entrypoint: ReplayWorker`) against the Java guard, and the Java
  replay role against the Python guard (the Python test service, 3 replicas).

Producers keep writing throughout; `kill -9` of live and replay replicas and a rebalance of the live group are
injected at points of the replay (`Fault`). An independent reader of the services' ledgers then checks: from the
first offset the live group skipped on, 0 records processed by both groups, 0 lost, and every repeat within a
group inside the uncommitted batch of a killed process. More fault timings run in `make soak`
(tests/soak/test_service_handover_soak.py); the scenario is `handover_scenario.py`, shared with the Go service's test (test_go_handover_e2e.py).
"""

from __future__ import annotations

import json

import pytest

from reprise_operator.shared.constants import replay_group_name

from .handover_scenario import EARLY, LATE, LIVE_GROUP, GroupLedger, run_handover

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("faults", [EARLY, LATE], ids=["early", "late"])
def test_java_service_hands_over_to_its_own_replay_role(
    kube, kafka, operator, namespace, topic_name, tmp_path, jvm_image, faults
):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="java", replay="java", faults=faults)
    groups = GroupLedger.read(ledger, topic_name, LIVE_GROUP).groups
    assert groups == {LIVE_GROUP, replay_group_name(namespace, "handover")}, groups


def test_python_replay_worker_against_the_java_guard(kube, kafka, operator, namespace, topic_name, tmp_path, jvm_image):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="java", replay="python", faults=EARLY)


def test_java_replay_role_against_the_python_guard(kube, kafka, operator, namespace, topic_name, tmp_path, jvm_image):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="python", replay="java", faults=LATE)
    deployment = json.loads(kube.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout)["items"]
    assert [d["metadata"]["name"] for d in deployment] == ["accounts"], "the replay Deployment is gone"
