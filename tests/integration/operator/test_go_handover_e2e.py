"""Handover Reconsume of the Go example service, end to end through the operator on the real broker and control
plane, under faults.

- The Go example (examples/seed003-go, 3 replicas, its consumer built by `guard.NewConsumer`) hands over to its
  own image running the Go replay role (`consumer.entrypoint: Service`: the service's own command, whose
  `replay.Main` runs the role from the REPRISE_* environment).
- Interoperability: the Go replay role against the Java guard (examples/accounts-jvm as the live service).

The scenario is the one of the JVM service (`handover_scenario.run_handover`): producers keep writing; `kill -9` of
a live and a replay replica and a rebalance of the live group; then an independent reader of the ledgers checks
0 records processed by both groups from the first skipped offset on, 0 lost, and repeats only inside a killed
process's uncommitted batch. More fault timings run in `make soak` (tests/soak/test_service_handover_soak.py).
"""

from __future__ import annotations

import pytest

from reprise_operator.shared.constants import replay_group_name

from .handover_scenario import EARLY, LATE, LIVE_GROUP, GroupLedger, run_handover

pytestmark = pytest.mark.integration


def test_go_service_hands_over_to_its_own_replay_role(kube, kafka, operator, namespace, topic_name, tmp_path, go_image):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="go", replay="go", faults=EARLY)
    groups = GroupLedger.read(ledger, topic_name, LIVE_GROUP).groups
    assert groups == {LIVE_GROUP, replay_group_name(namespace, "handover")}, groups


def test_go_replay_role_against_the_java_guard(
    kube, kafka, operator, namespace, topic_name, tmp_path, go_image, jvm_image
):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live="java", replay="go", faults=LATE)
