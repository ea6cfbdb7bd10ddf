"""The steps between a replay catching up and its teardown: run the go/no-go Job, hold for the cutover.

Hooks of the Reconsume steps (`reconsume/`); the rules are in `verify.py`. `gate` is called on every
follow of a replay with `spec.verify` or `completion.hold` and says whether it may tear down now; `rerun`
restarts a failed check from the finished state when `reprise.io/reverify` asks for it; `remove_jobs`
deletes the checks' Jobs at the teardown of a replay that completed (a failed one keeps them).
"""

from __future__ import annotations

from typing import Any

from ..api.common import ConditionStatus, ConditionType, Phase
from ..api.verify import CUTOVER_ANNOTATION, REVERIFY_ANNOTATION, VerificationState, VerificationStatus, Verify
from ..rules.job_state import job_state
from ..shared.constants import LABEL_REPLAY
from .lifecycle import Failure, Resource
from ..rules.verify import (
    cutover_approved,
    failure_message,
    next_gate,
    rerun_requested,
    termination_message,
    verify_job,
    verify_job_name,
)


def _verification(resource: Resource) -> VerificationStatus:
    """status.verification as its model (recorded as it is, so a replay under a check always shows one)."""
    vs = resource.part("verification", VerificationStatus)
    resource.record(verification=vs)
    return vs


def _record(resource: Resource, vs: VerificationStatus, **changes: Any) -> VerificationStatus:
    """status.verification with `changes` (None removes a field), built with the API's model."""
    updated = vs.model_copy(update=changes)
    resource.record(verification=updated)
    return updated


def _state(vs: VerificationStatus) -> str | None:
    return vs.state.value if vs.state is not None else None


async def gate(
    resource: Resource, verify: Verify | None, *, hold: bool, approval: str, env: dict[str, str], caught_up: bool
) -> bool:
    """Move the check and the hold one step; True when the replay may cut over (stop and tear down).

    `env` is what the check is told about the replay (`verify.verify_env`)."""
    vs = _verification(resource)
    approved = cutover_approved(approval, resource.annotations)
    step = next_gate(
        caught_up=caught_up, has_verify=verify is not None, hold=hold, state=_state(vs), cutover_approved=approved
    )
    if step == "follow":
        if verify is not None and vs.state is None:
            _record(resource, vs, state=VerificationState.WAITING)
            resource.condition(
                ConditionType.VERIFIED, "Unknown", "WaitingForCatchUp", "spec.verify runs once the replay has caught up"
            )
        return False
    if step == "verify":
        assert verify is not None
        if vs.state is not VerificationState.RUNNING:
            await _start(resource, verify, env)
            return False
        if not await _poll(resource):
            return False
        step = next_gate(caught_up=True, has_verify=True, hold=hold, state="Passed", cutover_approved=approved)
    if step == "await-cutover":
        if not resource.condition_true(ConditionType.CUTOVER_APPROVED) and _changed(
            resource, ConditionType.CUTOVER_APPROVED, "AwaitingCutover"
        ):
            resource.condition(
                ConditionType.CUTOVER_APPROVED,
                "False",
                "AwaitingCutover",
                "the shadow follows the live topic; approve the cutover with "
                f"kubectl annotate {resource.kind.lower()} {resource.name} {CUTOVER_ANNOTATION}=true",
            )
            resource.event("AwaitingCutover", "verified; holding for the cutover's approval")
        return False
    if step == "failed":  # only reached when the status says Failed but the phase does not (a restart)
        raise Failure("VerifyFailed", vs.message or "the verification failed")
    if hold:
        vs = _verification(resource)  # read again: the check above may have moved it
        if vs.cutover_approved_at is None:
            _record(resource, vs, cutover_approved_at=resource.now())
        how = "approval is Automatic" if approval == "Automatic" else f"annotated {CUTOVER_ANNOTATION}=true"
        resource.condition(ConditionType.CUTOVER_APPROVED, "True", "CutoverApproved", how)
    return True


def _changed(resource: Resource, type_: ConditionType, reason: str) -> bool:
    condition = resource.condition_of(type_)
    return condition is None or condition.reason != reason


async def _start(resource: Resource, verify: Verify, env: dict[str, str]) -> None:
    """Create this run's Job (idempotent: the name is per run, so a restart adopts it)."""
    rt = resource.rt
    vs = _verification(resource)
    run = vs.run + 1
    try:
        manifest = verify_job(
            owner=resource.owner(), namespace=resource.namespace, kind=resource.kind, run=run, verify=verify, env=env
        )
    except ValueError as exc:
        raise Failure("InvalidSpec", str(exc)) from None
    if await rt.kube.aio.get_job(resource.namespace, manifest["metadata"]["name"]) is None:
        await rt.kube.aio.create_owned(manifest, resource.uid)
    job = manifest["metadata"]["name"]
    _record(
        resource,
        vs,
        state=VerificationState.RUNNING,
        run=run,
        job=job,
        started_at=resource.now(),
        finished_at=None,
        message=None,
    )
    resource.condition(ConditionType.VERIFIED, "Unknown", "VerifyRunning", f"Job {job} checks the replay (run {run})")
    resource.event("VerifyStarted", f"created Job {job}")


async def _poll(resource: Resource) -> bool:
    """True once the Job succeeded; raises VerifyFailed when it failed; False while it runs."""
    rt = resource.rt
    vs = _verification(resource)
    name = vs.job or ""
    state, reason = job_state(await rt.kube.aio.get_job(resource.namespace, name))
    if state == "missing":
        _record(resource, vs, state=VerificationState.WAITING)  # deleted by someone: the next follow runs it again
        return False
    if state in ("running", "suspended"):
        return False
    vs = _record(resource, vs, finished_at=resource.now())
    if state == "succeeded":
        _record(resource, vs, state=VerificationState.PASSED)
        resource.condition(ConditionType.VERIFIED, "True", "VerifyPassed", f"Job {name} succeeded")
        resource.event("VerifyPassed", f"Job {name} succeeded")
        return True
    pods = await rt.kube.aio.list_pods(resource.namespace, f"job-name={name}")
    message = failure_message(name, reason.split(":")[0], termination_message(pods))
    _record(resource, vs, state=VerificationState.FAILED, message=message[:4096])
    resource.condition(ConditionType.VERIFIED, "False", "VerifyFailed", message)
    raise Failure(
        "VerifyFailed",
        f"{message}. The replay's children are kept; fix and re-run with "
        f"kubectl annotate {resource.kind.lower()} {resource.name} {REVERIFY_ANNOTATION}=<new value> --overwrite",
    )


async def rerun(resource: Resource, verify: Verify, env: dict[str, str]) -> bool:
    """Restart a failed check when `reprise.io/reverify` has a new value: back to Running, a new Job."""
    failed = resource.condition_of(ConditionType.FAILED)
    if failed is None or failed.reason != "VerifyFailed" or failed.status is not ConditionStatus.TRUE:
        return False
    vs = _verification(resource)
    value = rerun_requested(resource.annotations, vs.rerun)
    if value is None:
        return False
    _record(resource, vs, rerun=value)
    resource.status.pop("completedAt", None)
    resource.condition(
        ConditionType.FAILED, "False", "Reverifying", f"{REVERIFY_ANNOTATION}={value}: running the check again"
    )
    await _start(resource, verify, env)
    job = _verification(resource).job
    resource.condition(ConditionType.RUNNING, "True", "Reverifying", f"Job {job} checks the replay again")
    resource.set_phase(Phase.RUNNING, "Reverifying", f"{REVERIFY_ANNOTATION}={value}: Job {job} runs the check again")
    return True


def keeps_children(resource: Resource) -> bool:
    """A replay that failed its check kept what it made for inspection: its deletion must still remove it."""
    failed = resource.condition_of(ConditionType.FAILED)
    return resource.phase == Phase.FAILED and failed is not None and failed.reason == "VerifyFailed"


async def remove_jobs(resource: Resource) -> None:
    """Delete every run's Job (and, in the foreground, its pods) of a replay that completed."""
    rt = resource.rt
    runs = resource.part("verification", VerificationStatus).run
    for run in range(1, runs + 1):
        await rt.kube.aio.delete_job(resource.namespace, verify_job_name(resource.name, run))


#: The label selector of a replay's pods other than its checks (teardown waits for these to be gone).
def replay_pods_selector(name: str, kind: str) -> str:
    return f"{LABEL_REPLAY}={name},reprise.io/kind={kind},app.kubernetes.io/component!=verify"
