"""A replay whose pods crash-loop says so in its status (issue 32, item 3): which pod, why (the root cause
from its termination message) and the command that shows its log; and it says so no more once the pods run.

The pods really run the worker through the node agent, which restarts a failed container with the kubelet's
back-off and reports its log's tail as the termination message (FallbackToLogsOnError, which Reprise sets).
"""

from __future__ import annotations

import json

import pytest

from tests.fixtures.kube import wait_for

from .scenario import apply, conditions, get, reconsume

pytestmark = pytest.mark.integration

MISSING = "no_such_module_of_the_service"


def test_a_crash_looping_replay_pod_is_named_with_its_root_cause_and_log_and_cleared_once_fixed(
    kube, kafka, operator, namespace, topic_name, live_service
):
    body = reconsume("crashing", kafka.bootstrap, topic_name, "Parallel", "accounts", str(live_service))
    body["spec"]["consumer"]["replicas"] = 1
    env = body["spec"]["consumer"]["env"]
    env[0]["value"] = f"{MISSING}:handle"  # REPRISE_HANDLER: the worker exits at start, cannot import it
    apply(kube, namespace, body)
    try:

        def stalled() -> dict | None:
            found = conditions(get(kube, namespace, "reconsume", "crashing") or {}).get("Stalled")
            return found if found and found["status"] == "True" else None

        condition = wait_for(stalled, 180, "the Stalled condition of a crash-looping replay pod")
        message = condition["message"]
        assert condition["reason"] == "ReplayPodsFailing", condition
        assert f"REPRISE_HANDLER {MISSING}:handle: cannot import {MISSING}" in message, message
        assert " container app is " in message and f"its log: kubectl logs -n {namespace} crashing-" in message
        pods = json.loads(
            kube.kubectl("get", "pods", "-n", namespace, "-l", "reprise.io/replay=crashing", "-o", "json").stdout
        )["items"]
        assert any(f"kubectl logs -n {namespace} {p['metadata']['name']} -c app" in message for p in pods), message
        events = kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
        assert "ReplayPodsFailing" in events

        # The fix: the handler the service really has, in the replay Deployment (the spec is immutable). The
        # new pods run, and the condition says so.
        kube.kubectl(
            "set",
            "env",
            "deployment",
            "-n",
            namespace,
            "-l",
            "reprise.io/replay=crashing",
            "REPRISE_HANDLER=tests.integration.replay_worker.sink:record",
        )

        def recovered() -> dict | None:
            found = conditions(get(kube, namespace, "reconsume", "crashing") or {}).get("Stalled")
            return found if found and found["status"] == "False" else None

        cleared = wait_for(recovered, 180, "the Stalled condition to clear once the pods run")
        assert cleared["reason"] == "ReplayPodsRecovered"
    finally:
        kube.kubectl("delete", "reconsume", "crashing", "-n", namespace, "--timeout=120s", check=False)
    assert get(kube, namespace, "reconsume", "crashing") is None
