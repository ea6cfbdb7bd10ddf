"""Runs the Argo CD health scripts of deploy/argocd in a real Lua 5.1 runtime (lupa), as Argo CD's
gopher-lua does: the resource as the global `obj` (JSON nulls absent, arrays 1-based), the returned table
as the health. Also says what health each status must get, from the rules in docs/argocd.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from lupa import lua51

REPO = Path(__file__).resolve().parents[3]
SNIPPET = REPO / "deploy" / "argocd" / "argocd-cm.yaml"
KINDS = ("Reconsume", "Backfill", "LakeReplay")


def scripts() -> dict[str, str]:
    """Each kind's health script as users install it: from the argocd-cm snippet."""
    data = yaml.safe_load(SNIPPET.read_text())["data"]
    return {kind: data[f"resource.customizations.health.reprise.io_{kind}"] for kind in KINDS}


def _lua_value(runtime: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return runtime.table_from({k: _lua_value(runtime, v) for k, v in value.items() if v is not None})
    if isinstance(value, list):
        return runtime.table_from([_lua_value(runtime, v) for v in value if v is not None])
    return value


def evaluate(kind: str, obj: dict[str, Any], script: str | None = None) -> dict[str, str]:
    """The health Argo CD would show for `obj`: {"status": ..., "message": ...}."""
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True, register_eval=False)
    runtime.globals().obj = _lua_value(runtime, obj)
    result = runtime.execute(script if script is not None else scripts()[kind])
    return {"status": result["status"], "message": result["message"]}


def expected_health(obj: dict[str, Any]) -> str:
    """The rule, written independently of the Lua: what Argo CD must show for this object."""
    status = obj.get("status") or {}
    phase = status.get("phase")
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    generation = (obj.get("metadata") or {}).get("generation")
    if (obj.get("metadata") or {}).get("deletionTimestamp") or not phase:
        return "Progressing"
    if (
        status.get("observedGeneration") is not None
        and generation is not None
        and status["observedGeneration"] < generation
    ):
        return "Progressing"
    if phase == "Complete":
        return "Healthy"
    if phase == "Failed":
        return "Degraded"
    if phase == "Suspended" or conditions.get("Suspended") == "True":
        return "Suspended"
    if (
        phase == "PlanReady"
        and (obj.get("spec") or {}).get("approval") == "Manual"
        and conditions.get("Approved") != "True"
    ):
        return "Suspended"
    if phase == "Running" and conditions.get("CutoverApproved") == "False":
        return "Suspended"  # a shadow hold waiting for a person to approve the cutover
    return "Progressing"
