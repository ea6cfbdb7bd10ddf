"""The Handover across service languages under more fault timings than `make test` runs (tests/integration/
operator/test_jvm_handover_e2e.py and test_go_handover_e2e.py): combinations of guard and replay role (Java, Go,
Python), with kills and a rebalance at each point of the replay, in several orders. Each run must show 0 records
processed by both groups from the first skipped offset on, 0 lost, and repeats only inside the uncommitted batch of
a killed process."""

from __future__ import annotations

import pytest

from tests.integration.operator.conftest import go_image, jvm_image  # noqa: F401  (fixtures)
from tests.integration.operator.handover_scenario import Fault, run_handover

pytestmark = pytest.mark.integration

TIMINGS = {
    "kills-while-skipping": (Fault("replaying", "kill-live"), Fault("replaying", "kill-replay")),
    "rebalance-first": (
        Fault("running", "rebalance"),
        Fault("replaying", "kill-replay"),
        Fault("handing-over", "kill-live"),
    ),
    "all-at-handover": (
        Fault("handing-over", "kill-live"),
        Fault("handing-over", "kill-replay"),
        Fault("handing-over", "rebalance"),
    ),
    "double-kill": (
        Fault("running", "kill-replay"),
        Fault("replaying", "kill-replay"),
        Fault("replaying", "kill-live"),
        Fault("handing-over", "kill-live"),
    ),
}
PAIRS = [("java", "java"), ("java", "python"), ("python", "java"), ("go", "go"), ("java", "go"), ("go", "java")]
IMAGES = {"java": "jvm_image", "go": "go_image"}


@pytest.mark.parametrize("timing", sorted(TIMINGS))
@pytest.mark.parametrize("live,replay", PAIRS, ids=[f"{a}-guard-{b}-replay" for a, b in PAIRS])
def test_handover_under_faults(kube, kafka, operator, namespace, topic_name, tmp_path, request, live, replay, timing):
    for language in {live, replay} & IMAGES.keys():
        request.getfixturevalue(IMAGES[language])  # the service images this pair runs, built once per session
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run_handover(kube, kafka, operator, namespace, topic_name, ledger, live=live, replay=replay, faults=TIMINGS[timing])
