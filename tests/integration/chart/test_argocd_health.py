"""The Argo CD health scripts against status objects the operator really writes: each scenario drives a
Reconsume or Backfill through its phases on the real API server and broker, records every distinct state
of the object as the API server returns it, and runs the Lua (lupa, Lua 5.1) on each one.

With REPRISE_CAPTURE_STATUSES=<folder> the recorded objects are also written there; the unit tests in
tests/unit/argocd run on such a capture committed under tests/unit/argocd/statuses/.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from tests.integration.operator.backfill_scenario import commit, produce_keyed
from tests.integration.operator.scenario import end_offsets, live_deployment, produce, wait_caught_up
from tests.unit.argocd.health import evaluate, expected_health

pytestmark = pytest.mark.integration

# Annotations that only repeat the spec (kubectl's and Kopf's last-applied copies): dropped from captures.
NOISE = ("kubectl.kubernetes.io/last-applied-configuration", "reprise.io/last-handled-configuration")


def apply(kube, namespace: str, obj: dict) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(obj))


def clean(body: dict[str, Any]) -> dict[str, Any]:
    metadata = body["metadata"]
    metadata.pop("managedFields", None)
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in NOISE}
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return body


def signature(body: dict[str, Any]) -> tuple:
    status = body.get("status") or {}
    conditions = tuple(sorted((c["type"], c["status"], c.get("reason")) for c in status.get("conditions") or []))
    return (status.get("phase"), conditions, bool(body["metadata"].get("deletionTimestamp")))


class Recorder:
    """Every distinct state (phase, conditions, being deleted) one object went through."""

    def __init__(self, kube, namespace: str, kind: str, name: str, scenario: str) -> None:
        self.kube, self.namespace, self.kind, self.name, self.scenario = kube, namespace, kind, name, scenario
        self.states: dict[tuple, dict[str, Any]] = {}

    def look(self) -> dict[str, Any] | None:
        out = self.kube.kubectl("get", self.kind.lower(), self.name, "-n", self.namespace, "-o", "json", check=False)
        if out.returncode != 0:
            return None
        body = clean(json.loads(out.stdout))
        self.states.setdefault(signature(body), body)
        return body

    def until(self, done: Callable[[dict[str, Any]], bool], what: str, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            body = self.look()
            if body is not None and done(body):
                return body
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.kind} {self.name}: no {what} within {timeout:.0f}s; last: "
                    f"{json.dumps((body or {}).get('status'), indent=1)}"
                )
            time.sleep(0.25)

    def check_and_keep(self) -> list[str]:
        """Run the Lua on every recorded state; return the healths seen (and save them when asked to)."""
        seen = []
        folder = os.environ.get("REPRISE_CAPTURE_STATUSES")
        for index, body in enumerate(self.states.values()):
            health = evaluate(self.kind, body)
            assert health["status"] == expected_health(body), (
                f"{self.kind} phase {(body.get('status') or {}).get('phase')}: Lua said {health}, "
                f"expected {expected_health(body)}\n{json.dumps(body.get('status'), indent=1)}"
            )
            assert health["message"], "Argo CD shows the message: it must say something"
            seen.append(health["status"])
            if folder:
                phase = (body.get("status") or {}).get("phase") or "new"
                path = Path(folder) / f"{self.kind.lower()}-{self.scenario}-{index:02d}-{phase.lower()}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
        return seen


def phase_is(*phases: str) -> Callable[[dict], bool]:
    return lambda body: (body.get("status") or {}).get("phase") in phases


def condition_is(type_: str, status: str) -> Callable[[dict], bool]:
    return lambda body: any(
        c["type"] == type_ and c["status"] == status for c in (body.get("status") or {}).get("conditions") or []
    )


@pytest.fixture
def live_service(kube, kafka, namespace, topic_name, tmp_path) -> Path:
    kafka.create_topic(topic_name, 2)
    produce(kafka.bootstrap, topic_name, 600)
    sink = tmp_path / "processed"
    sink.mkdir()
    apply(kube, namespace, live_deployment("accounts", kafka.bootstrap, "accounts-group", topic_name, sink))
    wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, 2)
    return sink


def reconsume(name: str, bootstrap: str, topic: str, sink: Path, **spec: Any) -> dict:
    body = {
        "kafka": {"bootstrapServers": bootstrap},
        "topics": [topic],
        "consumerGroup": "accounts-group",
        "mode": "Parallel",
        "start": {"earliest": True},
        "completion": {"drainedFor": "2s"},
        "consumer": {
            "deploymentRef": {"name": "accounts"},
            "replicas": 1,
            "env": [
                {"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"},
                {"name": "REPRISE_TEST_SINK_DIR", "value": str(sink)},
                {"name": "REPRISE_METRICS_PORT", "value": "0"},
            ],
        },
    }
    body.update(spec)
    return {"apiVersion": "reprise.io/v1alpha1", "kind": "Reconsume", "metadata": {"name": name}, "spec": body}


def test_reconsume_to_complete_is_progressing_then_healthy(
    kube, kafka, operator, namespace, topic_name, live_service
) -> None:
    manifest = reconsume("to-complete", kafka.bootstrap, topic_name, live_service)
    assert evaluate("Reconsume", manifest)["status"] == "Progressing", "as applied, before the operator saw it"
    recorder = Recorder(kube, namespace, "Reconsume", "to-complete", "parallel")
    apply(kube, namespace, manifest)
    recorder.until(phase_is("Complete"), "Complete")
    seen = recorder.check_and_keep()
    assert seen[-1] == "Healthy" and "Progressing" in seen


def test_reconsume_awaiting_approval_then_suspended_then_deleted(
    kube, kafka, operator, namespace, topic_name, live_service
) -> None:
    recorder = Recorder(kube, namespace, "Reconsume", "held", "manual-suspend")
    apply(kube, namespace, reconsume("held", kafka.bootstrap, topic_name, live_service, approval="Manual"))
    recorder.until(phase_is("PlanReady"), "PlanReady")
    kube.kubectl("annotate", "reconsume", "held", "-n", namespace, "reprise.io/approve=true")
    recorder.until(phase_is("Running"), "Running")
    kube.kubectl("patch", "reconsume", "held", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    recorder.until(phase_is("Suspended"), "Suspended")
    kube.kubectl("patch", "reconsume", "held", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    recorder.until(condition_is("Suspended", "False"), "resumed")
    kube.kubectl("delete", "reconsume", "held", "-n", namespace, "--wait=false")
    recorder.until(lambda b: bool(b["metadata"].get("deletionTimestamp")), "deletion")
    seen = recorder.check_and_keep()
    assert seen.count("Suspended") >= 2, "awaiting approval, and suspended"
    assert seen[-1] == "Progressing", "being deleted"


def test_reconsume_failed_is_degraded_and_waiting_is_progressing(
    kube, kafka, operator, namespace, topic_name, live_service
) -> None:
    failed = Recorder(kube, namespace, "Reconsume", "no-such-topic", "failed")
    apply(kube, namespace, reconsume("no-such-topic", kafka.bootstrap, f"{topic_name}-missing", live_service))
    failed.until(phase_is("Failed"), "Failed")
    assert failed.check_and_keep()[-1] == "Degraded"
    waiting = Recorder(kube, namespace, "Reconsume", "no-secret", "waiting")
    apply(
        kube,
        namespace,
        reconsume(
            "no-secret",
            kafka.bootstrap,
            topic_name,
            live_service,
            kafka={"bootstrapServers": kafka.bootstrap, "configFrom": {"secretRef": {"name": "absent"}}},
        ),
    )
    waiting.until(condition_is("Waiting", "True"), "Waiting")
    assert waiting.check_and_keep()[-1] == "Progressing"


def test_backfill_through_its_barrier_and_a_failure(kube, kafka, operator, namespace, topic_name) -> None:
    state, target = f"{topic_name}-state", topic_name
    kafka.create_topic(state, 2)
    kafka.create_topic(target, 2)
    produce_keyed(kafka.bootstrap, state, [(f"user-{i}", json.dumps({"v": i})) for i in range(20)])
    body = {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Backfill",
        "metadata": {"name": "users-fix"},
        "spec": {
            "kafka": {"bootstrapServers": kafka.bootstrap},
            "topic": target,
            "keys": [f"user-{i}" for i in range(10)],
            "source": {"topic": {"name": state}},
            "downstreamGroups": ["billing"],
            "approval": "Manual",
        },
    }
    recorder = Recorder(kube, namespace, "Backfill", "users-fix", "barrier")
    apply(kube, namespace, body)
    recorder.until(phase_is("PlanReady"), "PlanReady")
    kube.kubectl("annotate", "backfill", "users-fix", "-n", namespace, "reprise.io/approve=true")
    recorder.until(phase_is("Draining"), "Draining (waiting for billing)")
    commit(kafka.bootstrap, "billing", target, end_offsets(kafka.bootstrap, target, 2))
    recorder.until(phase_is("Complete"), "Complete")
    seen = recorder.check_and_keep()
    assert seen[0] in ("Progressing", "Suspended") and "Suspended" in seen and seen[-1] == "Healthy"

    waiting = Recorder(kube, namespace, "Backfill", "no-target", "waiting")
    apply(
        kube,
        namespace,
        {
            **body,
            "metadata": {"name": "no-target"},
            "spec": {**body["spec"], "topic": f"{topic_name}-missing", "approval": "Automatic"},
        },
    )
    waiting.until(condition_is("Waiting", "True"), "Waiting (the topic does not exist)")
    assert waiting.check_and_keep()[-1] == "Progressing"

    failed = Recorder(kube, namespace, "Backfill", "no-keys", "failed")
    apply(
        kube,
        namespace,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "empty-keys"}, "data": {"keys.txt": "\n"}},
    )
    spec = {k: v for k, v in body["spec"].items() if k not in ("keys", "approval")}
    apply(
        kube,
        namespace,
        {
            **body,
            "metadata": {"name": "no-keys"},
            "spec": {**spec, "keysFrom": {"configMapRef": {"name": "empty-keys", "key": "keys.txt"}}},
        },
    )
    failed.until(phase_is("Failed"), "Failed")
    assert failed.check_and_keep()[-1] == "Degraded"
