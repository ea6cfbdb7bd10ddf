"""The one lifecycle every kind goes through: which hook runs in which phase, one transition at a time.

A kind says what it does at each stage by implementing `KindLifecycle` (plan, start, suspend, resume,
while_suspended, follow, teardown, revive, cleanup); this module alone decides, from the phase in status,
which of them runs:

    Pending --(admitted: namespace_limit)--> Planning --plan--> PlanReady --(approved, not suspended) start--> Running --follow--> Draining
                                                      Running --suspend--> Suspended --resume--> Running
    Draining --teardown--> Complete          Complete/Failed --revive--> Running (a verify rerun), else TTL
    any hook may end in Failed (lifecycle.Failure) or wait in place (Waiting, Retry).

The transitions the kinds share are written here too: the plan's tails (`plan_ready`, `plan_refused`) and the suspend and
resume bookkeeping (`suspend_move` decides, `mark_suspended` / `mark_resumed` write it); a kind's hook only
does what suspending means for its children and says what it did (`Held`).

`transition` runs at most one transition; `lifecycle.run_reconcile` writes the status after it and, when
the phase moved, runs the next one. So every phase a resource reaches is in the API server before the next
hook acts on it: the plan is stored before anything is created, and an operator killed at any point
resumes from a status that describes everything it made.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from pydantic import BaseModel

from ..api.common import ConditionType, Phase
from .lifecycle import Failure, ObjectMemory, Resource, admit, expire_finished, may_start

FINISHED_PHASES = (Phase.COMPLETE, Phase.FAILED)


@dataclass(frozen=True)
class Held:
    """What a kind's suspend or resume hook did to its children: `what` goes to the condition's message,
    `detail` (default: `what`) to the phase's Event."""

    what: str
    detail: str = ""


class KindLifecycle(Protocol):
    """What a kind implements; the driver calls each hook only in its phase. A hook that moves the
    resource on sets the new phase (`Resource.set_phase`, `complete`, `fail`); one that returns without
    changing the phase is called again at the next poll."""

    # Read-only (properties) so that a kind may narrow them: its spec model is a subclass of BaseModel.
    @property
    def kind(self) -> str:
        """The kind, as in `api.KINDS`."""

    @property
    def plural(self) -> str:
        """Its plural, as in `api.KINDS`."""

    @property
    def spec_model(self) -> type[BaseModel]:
        """The spec's model: the driver parses the spec once per transition and hands it to the hooks."""

    async def plan(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        """Pending/Planning: compute the plan into status, then PlanReady (or Failure)."""

    async def start(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        """PlanReady, approved and not suspended: create what does the work, then Running."""

    async def suspend(self, resource: Resource, spec: Any) -> Held | None:
        """Running, spec.suspend true: stop what runs (scale to zero, suspend a Job), state kept. None when
        nothing is there to stop yet: the resource stays Running and the driver asks again at the next poll."""

    async def resume(self, resource: Resource, spec: Any) -> Held | None:
        """Suspended, spec.suspend false: start again what `suspend` stopped. None: stays Suspended, asked again."""

    async def while_suspended(self, resource: Resource, spec: Any) -> None:
        """Suspended and staying so: keep status current (what a stopping child reports), if the kind needs to."""

    async def follow(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        """Running: report progress; when the work is done, Draining."""

    async def teardown(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        """Draining: wait for what completion needs, remove what Reprise made, then Complete."""

    async def revive(self, resource: Resource, spec: Any) -> bool:
        """Complete/Failed: start again if a person asked (a verify rerun); True when it did."""

    def ttl_seconds(self, spec: Any) -> int | None:
        """spec.cleanup.ttlSecondsAfterFinished."""

    async def cleanup(self, resource: Resource, memory: ObjectMemory) -> None:
        """The finalizer: remove what Reprise made, leaving the live side as it was."""


def phase_of(resource: Resource) -> Phase:
    return Phase(resource.phase)


async def transition(kind: KindLifecycle, resource: Resource, memory: ObjectMemory) -> None:
    """Run the hook the phase calls for: at most one transition (the phase table of the module docstring)."""
    spec: Any = resource.spec_as(kind.spec_model)  # the kind's own model; every kind's has `suspend`
    phase = phase_of(resource)
    if phase in FINISHED_PHASES:
        if not await kind.revive(resource, spec):
            await expire_finished(resource, kind.ttl_seconds(spec))
        return
    if phase in (Phase.PENDING, Phase.PLANNING):
        admit(resource)  # the chart's limits on active resources: over them, it waits here
        await kind.plan(resource, spec, memory)
    elif phase == Phase.PLAN_READY:
        if may_start(resource, spec.suspend):
            await kind.start(resource, spec, memory)
    elif phase in (Phase.RUNNING, Phase.SUSPENDED):
        move = suspend_move(phase, spec.suspend)
        if move == SuspendMove.SUSPEND:
            held = await kind.suspend(resource, spec)
            if held is not None:
                mark_suspended(resource, held.what, held.detail or held.what)
        elif move == SuspendMove.RESUME:
            held = await kind.resume(resource, spec)
            if held is not None:
                mark_resumed(resource, held.what, held.detail or held.what)
        elif move == SuspendMove.STAY_SUSPENDED:
            await kind.while_suspended(resource, spec)
        if phase == Phase.RUNNING and phase_of(resource) == Phase.RUNNING:
            await kind.follow(resource, spec, memory)
    elif phase == Phase.DRAINING:
        await kind.teardown(resource, spec, memory)


# ------------------------------------------------------------------------------------------ shared transitions


class SuspendMove(Enum):
    """What spec.suspend asks of a Running or Suspended resource."""

    SUSPEND = "suspend"
    RESUME = "resume"
    STAY_SUSPENDED = "stay suspended"
    KEEP_RUNNING = "keep running"


def suspend_move(phase: Phase, suspend: bool) -> SuspendMove:
    """The suspend/resume transition, decided here for every kind. Pure."""
    if phase == Phase.RUNNING:
        return SuspendMove.SUSPEND if suspend else SuspendMove.KEEP_RUNNING
    if phase == Phase.SUSPENDED:
        return SuspendMove.STAY_SUSPENDED if suspend else SuspendMove.RESUME
    raise ValueError(f"suspend applies to Running and Suspended, not {phase.value}")


# What every kind writes when it moves between the shared phases: the kinds do their own I/O (a plan, a scale
# to zero) and hand the bookkeeping to these, so the conditions, reasons and phase messages are the same for all.


def plan_ready(resource: Resource, summary: str) -> None:
    """The tail of every kind's plan: PlanReady with the plan's summary, and under manual approval the
    command that approves it (`may_start` then waits for the annotation)."""
    resource.condition(ConditionType.PLAN_READY, "True", "PlanComputed", summary)
    if not resource.approved():  # approval Manual and not yet annotated
        resource.condition(
            ConditionType.APPROVED,
            "False",
            "AwaitingApproval",
            f"annotate to start: kubectl annotate {resource.kind.lower()} {resource.name} reprise.io/approve=true",
        )
    resource.set_phase(Phase.PLAN_READY, "PlanReady", f"plan computed: {summary}")


def plan_refused(resource: Resource, reason: str, message: str) -> Failure:
    """The other tail of a plan: PlanReady False with why, and the Failure for the kind to raise (the
    resource ends Failed with the same reason, and nothing was created)."""
    resource.condition(ConditionType.PLAN_READY, "False", reason, message)
    return Failure(reason, message)


def mark_suspended(resource: Resource, what: str, detail: str) -> None:
    """Running -> Suspended, once the kind has stopped what runs: `what` it did (the condition's message)
    and `detail` (the phase's)."""
    resource.condition(ConditionType.SUSPENDED, "True", "Suspended", f"spec.suspend is true: {what}")
    resource.condition(ConditionType.RUNNING, "False", "Suspended", "suspended")
    resource.set_phase(Phase.SUSPENDED, "Suspended", detail)


def mark_resumed(resource: Resource, what: str, detail: str) -> None:
    """Suspended -> Running, once the kind has started again what it stopped."""
    resource.condition(ConditionType.SUSPENDED, "False", "Resumed", "spec.suspend is false")
    resource.condition(ConditionType.RUNNING, "True", "Resumed", what)
    resource.set_phase(Phase.RUNNING, "Resumed", detail)
