"""H4 of the security review: one tenant cannot exhaust the shared operator. A namespace floods the operator with
Reconsumes whose Secrets all differ and whose bootstrap strings are unreachable (loopback, closed ports, many
spellings of each); the operator's threads and memory stay bounded, the excess is parked with NamespaceLimit, and
another namespace's replay completes meanwhile. The full 300-resource flood is tests/soak/test_operator_flood_soak.py."""

from __future__ import annotations

import pytest

from .flood_scenario import assert_bounded, run_flood

pytestmark = pytest.mark.integration

#: Resources in the flood here; the chart's default `limits.maxActivePerNamespace` (20) parks the rest.
FLOOD = 60


def test_a_flood_of_unreachable_clusters_leaves_the_operator_bounded_and_other_replays_running(
    kube, kafka, operator, namespace, topic_name, live_service
):
    result = run_flood(kube, kafka, operator, namespace, topic_name, live_service, FLOOD, victim_timeout=240)
    print(result.report())
    assert_bounded(result, FLOOD)
