"""Status conditions, the Kubernetes way: one setter that moves `lastTransitionTime` only on a flip.

Conditions are plain dicts here (the shape the API server stores), so the reconcile code can compute a
whole new status and compare it with the old one before patching anything. The clock is injectable so
the tests can pin time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Iterable, Literal

from replay_worker.contract import parse_rfc3339, rfc3339, utc_now

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
        updated = dict(condition)
        if condition.get("status") != status:
            updated["lastTransitionTime"] = rfc3339(clock())
        updated.update(status=status, reason=reason, message=message)
        if observed_generation is not None:
            updated["observedGeneration"] = observed_generation
        result.append(updated)
    if not replaced:
        new: dict[str, str | int] = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": rfc3339(clock()),
        }
        if observed_generation is not None:
            new["observedGeneration"] = observed_generation
        result.append(new)
    return result
