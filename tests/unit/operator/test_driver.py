"""The lifecycle driver's phase table, with a kind that records which hook ran (no Kubernetes, no Kafka)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from reprise_operator.kinds.backfill import steps as backfill
from reprise_operator.kinds.lakereplay import steps as lakereplay
from reprise_operator.kinds.reconsume import steps as reconsume
from reprise_operator.api import KINDS as API_KINDS
from reprise_operator.api.common import ConditionType, Phase
from reprise_operator.core.driver import (
    Held,
    SuspendMove,
    mark_resumed,
    mark_suspended,
    plan_ready,
    plan_refused,
    suspend_move,
    transition,
)
from reprise_operator.kinds.lifecycles import KINDS
from reprise_operator.core.lifecycle import Failure, ObjectMemory, Resource, Waiting
from reprise_operator.rules.namespace_limit import ActiveResources


class Spec(BaseModel):
    suspend: bool = False
    approval: str = "Automatic"


class Recorder:
    """A kind whose hooks record their calls and move the phase on as a real kind would."""

    kind, plural, spec_model = "Reconsume", "reconsumes", Spec

    def __init__(self, revive: bool = False, nothing_to_hold: bool = False) -> None:
        self.calls: list[str] = []
        self._revive = revive
        self._held = None if nothing_to_hold else Held("Job j stopped", "Job j stopped; state kept")

    async def plan(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        self.calls.append("plan")
        resource.status["plan"] = {"totalRecords": 1}
        resource.set_phase(Phase.PLAN_READY, "PlanReady", "planned", event=False)

    async def start(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        self.calls.append("start")
        resource.set_phase(Phase.RUNNING, "Started", "started", event=False)

    # The suspend hooks only say what they did to the children: the driver writes the phase and conditions.
    async def suspend(self, resource: Resource, spec: Any) -> Held | None:
        self.calls.append("suspend")
        return self._held

    async def resume(self, resource: Resource, spec: Any) -> Held | None:
        self.calls.append("resume")
        return self._held

    async def while_suspended(self, resource: Resource, spec: Any) -> None:
        self.calls.append("while_suspended")

    async def follow(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        self.calls.append("follow")
        resource.set_phase(Phase.DRAINING, "Drained", "drained", event=False)

    async def teardown(self, resource: Resource, spec: Any, memory: ObjectMemory) -> None:
        self.calls.append("teardown")
        resource.complete("Completed", "done")

    async def revive(self, resource: Resource, spec: Any) -> bool:
        self.calls.append("revive")
        if self._revive:
            resource.set_phase(Phase.RUNNING, "Reverifying", "again", event=False)
        return self._revive

    def ttl_seconds(self, spec: Any) -> int | None:
        return None

    async def cleanup(self, resource: Resource, memory: ObjectMemory) -> None:
        self.calls.append("cleanup")


def resource(phase: str | None, **spec: Any) -> Resource:
    body = {"metadata": {"namespace": "ns", "name": "r", "uid": "u-1", "generation": 1}, "spec": spec}
    rt = SimpleNamespace(settings=SimpleNamespace(kafka_bootstrap_aliases=()), active=ActiveResources(0, 0))
    status = {"phase": phase} if phase else {}
    return Resource("Reconsume", "reconsumes", body, status, rt)  # type: ignore[arg-type]


def run(kind: Recorder, res: Resource) -> None:
    asyncio.run(transition(kind, res, ObjectMemory()))


@pytest.mark.parametrize(
    ("phase", "spec", "hook", "after"),
    [
        (None, {}, "plan", "PlanReady"),
        ("Planning", {}, "plan", "PlanReady"),
        ("PlanReady", {}, "start", "Running"),
        ("Running", {}, "follow", "Draining"),
        ("Suspended", {"suspend": False}, "resume", "Running"),
        ("Running", {"suspend": True}, "suspend", "Suspended"),
        ("Draining", {}, "teardown", "Complete"),
        ("Complete", {}, "revive", "Complete"),
    ],
)
def test_each_phase_runs_its_one_hook_and_makes_at_most_one_transition(phase, spec, hook, after) -> None:
    kind, res = Recorder(), resource(phase, **spec)
    run(kind, res)
    assert kind.calls == [hook]
    assert res.phase == after
    # One transition: planning never starts, starting never follows, following never tears down.


def test_a_resource_over_the_namespace_limit_waits_pending_without_planning() -> None:
    kind = Recorder()
    first, second = resource(None), resource(None)
    second.body["metadata"]["uid"] = "u-2"
    limits = ActiveResources(per_namespace=1, total=0)
    first.rt.active = second.rt.active = limits  # type: ignore[misc]
    run(kind, first)
    with pytest.raises(Waiting) as parked:
        run(kind, second)
    assert parked.value.reason == "NamespaceLimit"
    assert "limits.maxActivePerNamespace=1" in parked.value.message
    assert kind.calls == ["plan"] and second.phase == Phase.PENDING, "the parked resource must not plan"
    limits.release("u-1")  # the first one finished: the slot frees, the second is admitted at its next look
    run(kind, second)
    assert kind.calls == ["plan", "plan"] and second.phase == Phase.PLAN_READY


def test_a_plan_is_never_followed_by_a_start_in_the_same_transition() -> None:
    kind, res = Recorder(), resource(None)
    run(kind, res)
    assert kind.calls == ["plan"] and "plan" in res.status, "the plan must be stored before anything is created"


def test_a_manual_approval_holds_at_plan_ready_without_starting() -> None:
    kind, res = Recorder(), resource("PlanReady", approval="Manual")
    run(kind, res)
    assert kind.calls == [] and res.phase == "PlanReady"


def test_a_suspended_plan_waits_before_starting() -> None:
    kind, res = Recorder(), resource("PlanReady", suspend=True)
    run(kind, res)
    assert kind.calls == [] and res.phase == "PlanReady"
    assert res.condition_true(ConditionType.SUSPENDED)


def test_a_suspended_replay_is_not_followed() -> None:
    kind, res = Recorder(), resource("Suspended", suspend=True)
    run(kind, res)
    assert kind.calls == ["while_suspended"] and res.phase == "Suspended"


@pytest.mark.parametrize(
    ("phase", "suspend", "move"),
    [
        (Phase.RUNNING, True, SuspendMove.SUSPEND),
        (Phase.RUNNING, False, SuspendMove.KEEP_RUNNING),
        (Phase.SUSPENDED, False, SuspendMove.RESUME),
        (Phase.SUSPENDED, True, SuspendMove.STAY_SUSPENDED),
    ],
)
def test_the_driver_decides_the_suspend_transition(phase: Phase, suspend: bool, move: SuspendMove) -> None:
    assert suspend_move(phase, suspend) == move


def test_suspend_is_decided_only_for_running_and_suspended() -> None:
    with pytest.raises(ValueError, match="not PlanReady"):
        suspend_move(Phase.PLAN_READY, True)


@pytest.mark.parametrize("kind_name", ["Reconsume", "Backfill", "LakeReplay"])
def test_suspend_and_resume_through_the_driver_write_the_shared_bookkeeping(kind_name: str) -> None:
    """The kind's hook only stops its children; the phase, conditions and messages are the driver's."""
    kind, res = Recorder(), resource("Running", suspend=True)
    res.kind = kind_name
    run(kind, res)
    assert kind.calls == ["suspend"] and res.phase == Phase.SUSPENDED
    assert _condition(res, "Suspended") == ("True", "Suspended", "spec.suspend is true: Job j stopped")
    assert _condition(res, "Running") == ("False", "Suspended", "suspended")
    res.body["spec"]["suspend"] = False
    run(kind, res)
    assert kind.calls == ["suspend", "resume"] and res.phase == Phase.RUNNING
    assert _condition(res, "Suspended") == ("False", "Resumed", "spec.suspend is false")
    assert _condition(res, "Running") == ("True", "Resumed", "Job j stopped")


def test_a_kind_with_nothing_to_stop_yet_stays_running_and_is_followed() -> None:
    kind, res = Recorder(nothing_to_hold=True), resource("Running", suspend=True)
    run(kind, res)
    assert kind.calls == ["suspend", "follow"] and res.phase == Phase.DRAINING
    assert "conditions" not in res.status, "nothing was suspended, so no Suspended condition"


def test_a_revived_resource_runs_again() -> None:
    kind, res = Recorder(revive=True), resource("Failed")
    run(kind, res)
    assert kind.calls == ["revive"] and res.phase == "Running"


def test_the_operator_runs_exactly_the_kinds_of_the_api() -> None:
    assert [k.kind for k in KINDS] == [k.kind for k in API_KINDS]
    assert [k.plural for k in KINDS] == [k.plural for k in API_KINDS]
    assert [k.spec_model for k in KINDS] == [k.spec for k in API_KINDS]
    assert KINDS == (reconsume.LIFECYCLE, backfill.LIFECYCLE, lakereplay.LIFECYCLE)


def test_every_kind_implements_every_hook() -> None:
    hooks = ("plan", "start", "suspend", "resume", "while_suspended", "follow", "teardown", "revive")
    hooks += ("ttl_seconds", "cleanup")
    for kind in KINDS:
        missing = [h for h in hooks if not callable(getattr(kind, h, None))]
        assert not missing, f"{kind.kind} lacks {missing}"


def _condition(res: Resource, type_: str) -> tuple[str, str, str]:
    found = next(c for c in res.status["conditions"] if c["type"] == type_)
    return found["status"], found["reason"], found["message"]


@pytest.mark.parametrize(
    ("kind", "plural"), [("Reconsume", "reconsumes"), ("Backfill", "backfills"), ("LakeReplay", "lakereplays")]
)
def test_the_plan_tail_is_the_drivers_for_every_kind(kind: str, plural: str) -> None:
    res = resource("Planning", approval="Manual")
    res.kind, res.plural = kind, plural
    plan_ready(res, "12 records in 3 partitions")
    assert res.phase == Phase.PLAN_READY
    assert _condition(res, "PlanReady") == ("True", "PlanComputed", "12 records in 3 partitions")
    status, reason, message = _condition(res, "Approved")
    assert (status, reason) == ("False", "AwaitingApproval")
    assert message == f"annotate to start: kubectl annotate {kind.lower()} r reprise.io/approve=true"


def test_a_refused_plan_says_why_on_plan_ready_and_fails_with_the_same_reason() -> None:
    res = resource("Planning")
    refused = plan_refused(res, "RetentionExceeded", "orders-0 starts before the log start")
    assert isinstance(refused, Failure)
    assert (refused.reason, refused.message) == ("RetentionExceeded", "orders-0 starts before the log start")
    assert _condition(res, "PlanReady") == ("False", "RetentionExceeded", "orders-0 starts before the log start")


def test_an_automatic_plan_asks_for_no_approval() -> None:
    res = resource("Planning")
    plan_ready(res, "1 record")
    assert res.approved()
    assert res.phase == Phase.PLAN_READY
    assert all(c["type"] != "Approved" for c in res.status["conditions"])


def test_suspend_and_resume_write_the_same_conditions_for_every_kind() -> None:
    res = resource("Running")
    mark_suspended(res, "Job j suspended", "Job j suspended; state kept")
    assert res.phase == Phase.SUSPENDED
    assert _condition(res, "Suspended") == ("True", "Suspended", "spec.suspend is true: Job j suspended")
    assert _condition(res, "Running") == ("False", "Suspended", "suspended")
    mark_resumed(res, "Job j resumed", "Job j resumed from its offsets")
    assert res.phase == Phase.RUNNING
    assert _condition(res, "Suspended") == ("False", "Resumed", "spec.suspend is false")
    assert _condition(res, "Running") == ("True", "Resumed", "Job j resumed")
