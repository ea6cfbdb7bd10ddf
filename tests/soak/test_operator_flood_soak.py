"""H4 at full size: one namespace creates 300 Reconsumes with distinct Secrets and unreachable bootstrap strings
while another namespace's replay completes; the operator's threads and memory stay bounded (the integration test
tests/integration/operator/test_operator_flood.py runs a smaller flood in `make test`)."""

from __future__ import annotations

import pytest

from tests.integration.operator.conftest import live_service  # noqa: F401  (fixture)
from tests.integration.operator.flood_scenario import assert_bounded, run_flood

pytestmark = pytest.mark.integration

FLOOD = 300


def test_three_hundred_unreachable_clusters_leave_the_operator_bounded(
    kube,
    kafka,
    operator,
    namespace,
    topic_name,
    live_service,  # noqa: F811
):
    result = run_flood(kube, kafka, operator, namespace, topic_name, live_service, FLOOD, victim_timeout=300)
    print(result.report())
    assert_bounded(result, FLOOD)
