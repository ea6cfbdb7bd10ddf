"""`consumer.entrypoint: Service` on the real control plane: the replay consumers keep the service's command and
get only the REPRISE_* environment, and a service whose command ignores it is reported as ReplayRoleNotStarted
(the operator runs with REPRISE_REPLAY_ROLE_TIMEOUT=30, tests/fixtures/operator.py). The condition clears by
itself once a replica starts a replay role: here Reprise's Python worker, started by hand with the pod's env."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.fixtures.kube import wait_for

from .scenario import Ledger, apply, wait_phase

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
#: A service image whose command knows nothing of Reprise: it never starts a replay role.
IGNORING = ["sleep", "3600"]


def service_reconsume(name: str, bootstrap: str, topic: str) -> dict:
    return {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Reconsume",
        "metadata": {"name": name},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap},
            "topics": [topic],
            "consumerGroup": "accounts-group",
            "mode": "Handover",
            "start": {"earliest": True},
            "consumer": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "image": "reprise-test/knows-no-reprise:dev",
                                "command": IGNORING,
                                "ports": [{"name": "http", "containerPort": 8080}],
                            },
                        ]
                    }
                },
                "entrypoint": "Service",
                "replicas": 1,
                "env": [{"name": "REPRISE_BATCH_SIZE", "value": "100"}],
            },
            "completion": {"drainedFor": "2s"},
        },
    }


def condition(kube, namespace: str, name: str, type_: str) -> dict | None:
    body = json.loads(kube.kubectl("get", "reconsume", name, "-n", namespace, "-o", "json").stdout)
    return next((c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def test_a_service_that_ignores_reprise_env_is_reported_and_the_report_clears_once_the_role_starts(
    kube, kafka, operator, namespace, topic_name, live_service
):
    apply(kube, namespace, service_reconsume("no-role", kafka.bootstrap, topic_name))
    wait_phase(kube, namespace, "reconsume", "no-role", "Running", 60, operator)

    deployment = json.loads(
        kube.kubectl("get", "deployment", "-n", namespace, "-l", "reprise.io/replay=no-role", "-o", "json").stdout
    )["items"][0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == IGNORING, "entrypoint Service keeps the service's command"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["REPRISE_MODE"] == "Handover" and env["REPRISE_LIVE_GROUP"] == "accounts-group"
    assert env["REPRISE_REPLAY_ID"].startswith(f"{namespace}/no-role/") and env["REPRISE_BATCH_SIZE"] == "100"
    assert "REPRISE_HANDLER" not in env and "REPRISE_FORWARD_TOPIC" not in env
    assert {p["name"] for p in container["ports"]} == {"http", "metrics"}

    waiting = wait_for(
        lambda: (c := condition(kube, namespace, "no-role", "Waiting")) and c["status"] == "True" and c,
        120,
        "the ReplayRoleNotStarted condition",
    )
    assert waiting["reason"] == "ReplayRoleNotStarted"
    message = waiting["message"]
    assert f"Deployment {deployment['metadata']['name']} (1/1 pods ready)" in message, message
    assert f"is not bootstrapped in handover topic reprise.handover.{namespace}" in message
    assert "start the replay role, with its own record handler, when REPRISE_REPLAY_ID is set" in message
    events = kube.kubectl(
        "get", "events", "-n", namespace, "--field-selector", "reason=ReplayRoleNotStarted", "-o", "json"
    ).stdout
    assert json.loads(events)["items"], "a Warning Event says the same"
    assert condition(kube, namespace, "no-role", "Running")["status"] == "True", "waiting, not failed"

    # A replica that does start a replay role (Reprise's Python worker with the pod's env) bootstraps the
    # replay, and the report clears by itself.
    worker_env = {k: v for k, v in env.items() if v is not None}
    worker_env.update(
        REPRISE_HANDLER="tests.integration.replay_worker.sink:record",
        REPRISE_TEST_SINK_DIR=str(live_service),
        REPRISE_METRICS_PORT="0",
        PYTHONPATH=f"{REPO}{os.pathsep}{REPO}/operator",
        PATH=os.environ["PATH"],
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "replay_worker"],
        env=worker_env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        cleared = wait_for(
            lambda: (c := condition(kube, namespace, "no-role", "Waiting")) and c["status"] == "False" and c,
            90,
            "the Waiting condition to clear",
        )
        assert cleared["reason"] == "Resolved"
        wait_for(lambda: Ledger.read(live_service, topic_name).replay, 60, "the started role to process records")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
    kube.kubectl("delete", "reconsume", "no-role", "-n", namespace, "--timeout=120s")
