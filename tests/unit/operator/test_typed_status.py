"""Status is built with the API's status models: what the kinds write reads back through the kind's model
unchanged, times are written as the CRD stores them, and a value the model refuses never reaches status."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from replay_worker.contract import PartitionFacts, StartSpec
from reprise_operator.core import cutover
from reprise_operator.api import (
    BackfillStatus,
    Plan,
    ReconsumeChildren,
    ReconsumeStatus,
)
from reprise_operator.api.common import ConditionType, Phase
from reprise_operator.api.verify import VerificationState, VerificationStatus
from reprise_operator.kinds.backfill.rules import plan_status as backfill_plan_status
from reprise_operator.kinds.backfill.rules import ranges_status
from reprise_operator.kinds.backfill.barrier import ProducedRange, barrier_status, observe, view_of
from reprise_operator.core.lifecycle import Resource
from reprise_operator.rules.offset_plan_status import plan_partitions_status
from reprise_operator.rules.planning import make_plan
from reprise_operator.rules.progress import EtaWindow, PartitionView, progress_status, summarize

NOW = datetime(2026, 11, 23, 19, 0, 5, 750_000, tzinfo=timezone.utc)


def resource(kind: str = "Reconsume", status: dict | None = None) -> Resource:
    body = {"metadata": {"namespace": "ns", "name": "r", "uid": "u-1", "generation": 2}, "spec": {}}
    res = Resource(kind, kind.lower() + "s", body, dict(status or {}), rt=None)  # type: ignore[arg-type]
    res.now = lambda: NOW
    return res


def test_record_writes_camel_case_fields_through_the_kinds_model_and_keep_keeps_the_first() -> None:
    res = resource()
    res.record(children=ReconsumeChildren(deployment="r-replay", replay_group="g"), started_at=NOW)
    assert res.status == {
        "children": {"deployment": "r-replay", "replayGroup": "g"},  # no configMaps: [] the builder did not set
        "startedAt": "2026-11-23T19:00:05Z",  # second precision, as Kubernetes writes times
    }
    res.record(started_at=NOW + timedelta(hours=1), keep=True)
    assert res.status["startedAt"] == "2026-11-23T19:00:05Z"
    res.record(phase=Phase.RUNNING)
    assert res.status["phase"] == "Running"


def test_a_value_the_status_model_refuses_never_reaches_status() -> None:
    res = resource("Backfill")
    with pytest.raises(ValidationError):
        res.record(keys_produced=-1)
    with pytest.raises(ValidationError):
        res.record(phase="Finished")
    assert res.status == {}


def test_updated_changes_one_field_of_a_part_and_none_removes_one() -> None:
    res = resource(status={"verification": {"state": "Failed", "run": 1, "job": "r-verify-1", "message": "boom"}})
    rerun = res.updated("verification", VerificationStatus, state=VerificationState.RUNNING, run=2, message=None)
    res.record(verification=rerun)
    assert res.status["verification"] == {"state": "Running", "run": 2, "job": "r-verify-1"}


def test_what_a_reconsume_writes_reads_back_through_its_status_model_unchanged() -> None:
    facts = [
        PartitionFacts("invoices", 0, log_start=0, end=900, log_start_timestamp_ms=1_700_000_000_250),
        PartitionFacts("invoices", 1, log_start=0, end=500, log_start_timestamp_ms=1_700_000_100_000),
    ]
    plan = make_plan(StartSpec("earliest"), facts, NOW)
    views = [PartitionView("invoices", 0, 0, 900, 450), PartitionView("invoices", 1, 0, 500, None)]
    res = resource()
    res.record(
        plan=plan_partitions_status(plan),
        progress=progress_status(summarize(views, EtaWindow(), NOW), NOW),
        children=ReconsumeChildren(deployment="r-replay", replay_group="g", handover_topic="reprise-handover"),
    )
    res.condition(ConditionType.PLAN_READY, "True", "PlanComputed", "1400 records in 2 partitions")
    res.set_phase(Phase.RUNNING, "Started", "started", event=False)
    status = res.status
    assert ReconsumeStatus.model_validate(status).as_status() == status
    # Record times keep their milliseconds; the plan's own time is at seconds.
    assert status["plan"]["oldestTimestamp"] == "2023-11-14T22:13:20.250Z"
    assert status["plan"]["computedAt"] == "2026-11-23T19:00:05Z"
    assert status["conditions"][0]["lastTransitionTime"] == "2026-11-23T19:00:05Z"
    assert status["conditions"][0]["observedGeneration"] == 2


def test_what_a_backfill_writes_reads_back_through_its_status_model_unchanged() -> None:
    ranges = [ProducedRange("users", 0, 100, 110), ProducedRange("users", 2, 40, 45)]
    positions = observe(ranges, ["billing"], {"billing": {("users", 0): 104}}, {}, NOW)
    status = {
        "plan": backfill_plan_status(["a", "b", "c"], 3, ["billing"], NOW),
        "producedRange": ranges_status(ranges),
        "barrier": barrier_status(view_of(positions, ["billing"]), NOW),
    }
    assert BackfillStatus.model_validate(status).as_status() == status
    assert status["producedRange"][0] == {"topic": "users", "partition": 0, "startOffset": 100, "endOffset": 110}


def test_plan_status_times_round_trip_at_their_precision() -> None:
    raw = {"oldestTimestamp": "2024-05-01T12:00:00.250Z", "computedAt": "2024-05-01T12:00:01Z"}
    assert Plan.model_validate(raw).as_status() == raw


def test_the_cutover_records_its_approval_once_in_the_verification_status() -> None:
    res = resource()

    def gate() -> bool:
        return asyncio.run(
            cutover.gate(res, None, hold=True, approval="Automatic", env={}, caught_up=True)  # type: ignore[arg-type]
        )

    assert gate()
    assert res.status["verification"] == {"cutoverApprovedAt": "2026-11-23T19:00:05Z"}
    assert res.condition_true(ConditionType.CUTOVER_APPROVED)
    res.now = lambda: NOW + timedelta(minutes=5)
    assert gate()
    assert res.status["verification"] == {"cutoverApprovedAt": "2026-11-23T19:00:05Z"}, "approved once, kept"


def test_status_as_reads_the_status_by_python_names_and_ignores_what_it_does_not_know() -> None:
    """`Resource.status_as`: the typed read that replaces `status.get("children", {}).get("replayGroup")`."""
    status = {
        "phase": "Running",
        "children": {"deployment": "orders-replay", "replayGroup": "orders.reprise-1"},
        "rollback": {"deploymentReplicas": 3},
        "aFieldOfANewerOperator": {"x": 1},
    }
    resource = Resource("Reconsume", "reconsumes", {"metadata": {"name": "r", "namespace": "n"}}, status, None)  # type: ignore[arg-type]
    typed = resource.status_as(ReconsumeStatus)
    assert typed.children.deployment == "orders-replay"
    assert typed.children.replay_group == "orders.reprise-1"
    assert typed.rollback is not None and typed.rollback.deployment_replicas == 3
    empty = Resource("Reconsume", "reconsumes", {"metadata": {}}, {}, None).status_as(ReconsumeStatus)  # type: ignore[arg-type]
    assert empty.children.replay_group is None and empty.rollback is None
