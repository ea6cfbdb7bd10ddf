"""The Argo CD health scripts in a real Lua 5.1 runtime, against objects the operator really wrote.

statuses/*.json were recorded from a run of tests/integration/chart/test_argocd_health.py
(`REPRISE_CAPTURE_STATUSES=tests/unit/argocd/statuses`): Reconsumes and Backfills as the API server
returned them in every phase the scenarios reach. The three kinds share the operator's lifecycle (phase and
conditions), and so the health logic; each kind's script runs on every capture.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from .health import KINDS, REPO, evaluate, expected_health, scripts

STATUSES = Path(__file__).parent / "statuses"
CAPTURED = {path.name: json.loads(path.read_text()) for path in sorted(STATUSES.glob("*.json"))}


def build_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("argocd_build", REPO / "deploy" / "argocd" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_captures_cover_every_health_of_both_kinds() -> None:
    healths: dict[str, set[str]] = {}
    for obj in CAPTURED.values():
        healths.setdefault(obj["kind"], set()).add(expected_health(obj))
    assert healths["Reconsume"] == {"Progressing", "Suspended", "Healthy", "Degraded"}
    assert healths["Backfill"] == {"Progressing", "Suspended", "Healthy", "Degraded"}
    phases = {(obj["kind"], (obj.get("status") or {}).get("phase")) for obj in CAPTURED.values()}
    for phase in ("PlanReady", "Running", "Suspended", "Draining", "Complete", "Failed"):
        assert ("Reconsume", phase) in phases, phase


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_health_of_every_captured_object(kind: str, name: str) -> None:
    obj = CAPTURED[name]
    health = evaluate(kind, obj)
    assert health["status"] == expected_health(obj), f"{name}: {health}"
    assert health["message"]
    if obj["kind"] == kind:
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Complete", "Failed"):
            reason = next(c["reason"] for c in obj["status"]["conditions"] if c["type"] == phase)
            assert health["message"].startswith(reason), "Argo CD shows why it finished"
        if phase is None:
            assert kind in health["message"]


def by_phase(kind: str, phase: str, scenario: str = "") -> dict:
    for name, obj in CAPTURED.items():
        if obj["kind"] == kind and (obj.get("status") or {}).get("phase") == phase and scenario in name:
            return copy.deepcopy(obj)
    raise LookupError(f"no captured {kind} in {phase}")


def test_messages_say_what_is_happening() -> None:
    failed = evaluate("Reconsume", by_phase("Reconsume", "Failed"))
    assert (
        failed["status"] == "Degraded"
        and failed["message"].startswith("TopicNotFound: ")
        and "not exist" in failed["message"]
    )
    approval = evaluate("Reconsume", by_phase("Reconsume", "PlanReady", "manual"))
    assert approval["status"] == "Suspended" and "reprise.io/approve=true" in approval["message"]
    suspended = evaluate("Reconsume", by_phase("Reconsume", "Suspended"))
    assert suspended["status"] == "Suspended" and "scaled to 0" in suspended["message"]
    waiting = evaluate("Reconsume", by_phase("Reconsume", "Planning", "waiting"))
    assert waiting["status"] == "Progressing" and waiting["message"].startswith("Waiting: SecretNotFound")


def test_running_shows_progress_when_the_operator_reported_it() -> None:
    running = by_phase("Reconsume", "Running", "parallel")
    running["status"]["progress"] = {"percent": 41.7, "lag": 350.0, "processed": 250, "totalRecords": 600}
    running["status"]["eta"] = "12s"
    assert evaluate("Reconsume", running) == {
        "status": "Progressing",
        "message": "Running (41% processed, lag 350, ETA 12s)",
    }


def test_a_status_for_an_older_generation_is_progressing() -> None:
    done = by_phase("Reconsume", "Complete")
    done["metadata"]["generation"] = done["status"]["observedGeneration"] + 1
    health = evaluate("Reconsume", done)
    assert health["status"] == "Progressing" and "generation" in health["message"]


def test_a_finished_replay_being_deleted_is_progressing() -> None:
    done = by_phase("Backfill", "Complete")
    done["metadata"]["deletionTimestamp"] = "2026-11-21T02:00:00Z"
    assert evaluate("Backfill", done)["status"] == "Progressing"


def test_the_snippet_is_built_from_one_body_with_each_kind_in_front() -> None:
    build = build_module()
    assert build.main(["--check"]) == 0, "run `python deploy/argocd/build.py`"
    snippet = yaml.safe_load((REPO / "deploy" / "argocd" / "argocd-cm.yaml").read_text())
    assert snippet["metadata"]["name"] == "argocd-cm"
    body = (REPO / "deploy" / "argocd" / "health" / "replay.lua").read_text()
    for kind, script in scripts().items():
        assert script.endswith(body) and f'local KIND = "{kind}"' in script


def test_the_scripts_use_only_what_argo_cd_s_lua_sandbox_offers() -> None:
    for kind, text in scripts().items():
        code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
        assert not re.search(r"\b(os|io|require|dofile|loadfile|load|debug|package)\s*[.(]", code), kind
        assert re.search(r"^return hs$", text, re.M), "the script returns the health table"


def test_verify_before_cutover_states() -> None:
    """Captured from tests/integration/operator/test_reconsume_verify.py (issue 20)."""
    running = evaluate("Reconsume", CAPTURED["reconsume-verify-00-running.json"])
    assert running["status"] == "Progressing" and running["message"].startswith(
        "Verifying: VerifyRunning: Job lossy-verify-1"
    )
    failed = evaluate("Reconsume", CAPTURED["reconsume-verify-01-failed.json"])
    assert failed["status"] == "Degraded" and failed["message"].startswith(
        "VerifyFailed: verification Job lossy-verify-1"
    )
    assert "row count mismatch" in failed["message"]
    held = evaluate("Reconsume", CAPTURED["reconsume-shadow-hold-00-running.json"])
    assert held["status"] == "Suspended" and held["message"].startswith(
        "Verified, holding for the cutover: AwaitingCutover"
    )
    assert "reprise.io/approve-cutover=true" in held["message"]
    assert evaluate("Reconsume", CAPTURED["reconsume-shadow-hold-01-complete.json"])["status"] == "Healthy"
