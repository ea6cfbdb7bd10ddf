"""Status conditions, the Kubernetes way: one setter that moves `lastTransitionTime` only on a flip.

Each condition is built with the API's `Condition` model (so it has the CRD's shape and is checked as the API
server would check it) and kept as the plain dict the API server stores, so the reconcile code can compute a
whole new status and compare it with the old one before patching anything. The clock is injectable so the
tests can pin time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Iterable, Literal

from replay_worker.contract import parse_rfc3339, rfc3339, utc_now

from ..api.common import Condition

__all__ = ["Clock", "ConditionStatus", "find", "is_true", "parse_rfc3339", "rfc3339", "set_condition", "utc_now"]

ConditionStatus = Literal["True", "False", "Unknown"]
Clock = Callable[[], datetime]


def find(conditions: Iterable[dict] | None, type_: str) -> dict | None:
    for condition in conditions or []:
        if condition.get("type") == type_:
            return condition
    return None


def is_true(conditions: Iterable[dict] | None, type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: list[dict] | None,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    observed_generation: int | None = None,
    clock: Clock = utc_now,
) -> list[dict]:
    """A new list with `type_` set; the transition time changes only when the status flips.

    The input list is not modified, so callers can compare old and new to decide whether to patch.
    """
    if not reason or not reason[0].isupper() or not reason.isalnum():
        raise ValueError(f"condition reason must be one CamelCase word, got {reason!r}")
    result: list[dict] = []
    replaced = False
    for condition in conditions or []:
        if condition.get("type") != type_:
            result.append(dict(condition))
            continue
        replaced = True
        since = condition.get("lastTransitionTime")
        at = parse_rfc3339(since) if since and condition.get("status") == status else clock()
        generation = observed_generation if observed_generation is not None else condition.get("observedGeneration")
        result.append(_condition(type_, status, reason, message, at, generation))
    if not replaced:
        result.append(_condition(type_, status, reason, message, clock(), observed_generation))
    return result


def _condition(
    type_: str, status: ConditionStatus, reason: str, message: str, since: datetime, generation: int | None
) -> dict:
    """One condition as status stores it, built with the API's model (observedGeneration only when known)."""
    fields: dict = {"type": type_, "status": status, "reason": reason, "message": message}
    fields["last_transition_time"] = since
    if generation is not None:
        fields["observed_generation"] = generation
    return Condition(**fields).as_status()
