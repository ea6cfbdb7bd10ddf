"""Where a Kubernetes Job is, read from its status. Pure.

A Backfill's worker and the cutover's verify check both run as Jobs and read a Job's state the same way, so
the rule lives below both of them (the cutover used to import it from the Backfill kind).
"""

from __future__ import annotations

from typing import Literal

JobState = Literal["missing", "running", "suspended", "succeeded", "failed"]


def job_state(job: dict | None) -> tuple[JobState, str]:
    """Where a Job is, from its status, and the reason when it failed."""
    if job is None:
        return "missing", ""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Failed":
            return "failed", f"{condition.get('reason', 'Failed')}: {condition.get('message', '')}".rstrip(": ")
        if condition.get("type") in ("Complete", "SuccessCriteriaMet"):
            return "succeeded", ""
    if int(status.get("succeeded") or 0) > 0 and not int(status.get("active") or 0):
        return "succeeded", ""
    if (job.get("spec") or {}).get("suspend"):
        return "suspended", ""
    return "running", ""
