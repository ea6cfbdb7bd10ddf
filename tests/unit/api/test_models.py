"""The pydantic models as the operator uses them: parsing every example, refusing what admission refuses,
durations, and building a status the API server accepts."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import yaml
from pydantic import ValidationError

from reprise_operator.api import (
    Approval,
    Backfill,
    BackfillSpec,
    BackfillStatus,
    Condition,
    ConditionStatus,
    ConditionType,
    LakeFormat,
    LakeReplay,
    LakeReplaySpec,
    LakeReplayStatus,
    PartitionPlan,
    PartitionProgress,
    PartitionState,
    Phase,
    Plan,
    Progress,
    Reconsume,
    ReconsumeMode,
    ReconsumeSpec,
    ReconsumeStatus,
    RetentionRisk,
    format_duration,
    parse_duration,
)
from tests.integration.api.invalid_cases import EXAMPLES, INVALID, Invalid

RESOURCE = {"Reconsume": Reconsume, "Backfill": Backfill, "LakeReplay": LakeReplay}
EXPECTED_EXAMPLES = {
    "reconsume-handover.yaml": ("Reconsume", "Handover"),
    "reconsume-handover-service.yaml": ("Reconsume", "Handover"),
    "reconsume-parallel.yaml": ("Reconsume", "Parallel"),
    "reconsume-rewind.yaml": ("Reconsume", "Rewind"),
    "reconsume-shadow.yaml": ("Reconsume", "Parallel"),
    "backfill-topic.yaml": ("Backfill", "topic"),
    "backfill-job.yaml": ("Backfill", "job"),
    "backfill-debezium.yaml": ("Backfill", "debezium"),
    "lakereplay.yaml": ("LakeReplay", None),
    "lakereplay-then-reconsume.yaml": ("LakeReplay", "Handover"),
}


def test_one_example_per_kind_and_mode() -> None:
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == set(EXPECTED_EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXPECTED_EXAMPLES))
def test_every_example_parses(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    document = yaml.safe_load(text)
    kind, variant = EXPECTED_EXAMPLES[name]
    assert document["apiVersion"] == "reprise.io/v1alpha1" and document["kind"] == kind
    assert "namespace" not in document["metadata"], "examples are applied with -n"
    assert text.lstrip().startswith("#"), "examples open with a comment saying what they show"
    resource = RESOURCE[kind].model_validate(document)
    if kind == "Reconsume":
        assert resource.spec.mode.value == variant
    elif kind == "Backfill":
        assert resource.spec.source.kind == variant
    elif variant:
        assert resource.spec.then.reconsume.mode.value == variant


@pytest.mark.parametrize("case", [c for c in INVALID if c.python], ids=lambda c: c.id)
def test_models_refuse_what_admission_refuses(case: Invalid) -> None:
    """The Python mirror of the CRD's rules: the operator never builds what the API server would refuse."""
    document = case.manifest()
    with pytest.raises(ValidationError):
        RESOURCE[document["kind"]].model_validate(document)


def test_parse_spec_as_the_operator_does() -> None:
    body = yaml.safe_load((EXAMPLES / "reconsume-handover.yaml").read_text())
    spec = ReconsumeSpec.model_validate(body["spec"])
    assert spec.mode is ReconsumeMode.HANDOVER
    assert spec.topics == ["users"] and spec.consumer_group == "accounts-service"
    assert spec.start.mode == "timestamp"
    assert spec.start.timestamp == datetime(2026, 9, 1, tzinfo=timezone.utc)
    assert spec.filter.headers == {"event-type": ["UserCreated", "UserUpdated"]}
    assert spec.consumer.deployment_ref.name == "accounts-consumer" and spec.consumer.replicas == 3
    assert spec.kafka.config_from.secret_ref.name == "accounts-kafka-client"
    assert spec.completion.drained_for == timedelta(seconds=30)
    assert spec.cleanup.delete_replay_group is True and spec.cleanup.ttl_seconds_after_finished == 3600
    assert spec.approval is Approval.AUTOMATIC and spec.suspend is False

    lake = LakeReplaySpec.model_validate(yaml.safe_load((EXAMPLES / "lakereplay.yaml").read_text())["spec"])
    assert lake.source.from_ == datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert lake.source.format is LakeFormat.PARQUET
    assert lake.source.schema_.config_map_ref.key == "schema.json"
    assert lake.dump()["source"]["from"] == "2025-01-01T00:00:00Z"

    backfill = BackfillSpec.model_validate(yaml.safe_load((EXAMPLES / "backfill-job.yaml").read_text())["spec"])
    assert backfill.keys is None and backfill.keys_from.config_map_ref.name == "orders-to-fix"
    assert backfill.barrier.stalled_after == timedelta(minutes=5)


def test_specs_can_be_built_in_python_with_snake_case() -> None:
    spec = ReconsumeSpec(
        kafka={"bootstrap_servers": "k:9092"},
        topics=["t"],
        consumer_group="live",
        mode="Rewind",
        start={"duration": "36h"},
        live_deployment={"name": "svc"},
    )
    assert spec.start.duration == timedelta(hours=36)
    dumped = spec.dump()
    assert dumped["liveDeployment"] == {"name": "svc"} and dumped["start"] == {"duration": "36h", "allowClamp": False}
    assert dumped["completion"] == {"drainedFor": "30s"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("720h", timedelta(days=30)),
        ("1h30m", timedelta(minutes=90)),
        ("30s", timedelta(seconds=30)),
        ("1.5s", timedelta(seconds=1.5)),
        ("250ms", timedelta(milliseconds=250)),
        ("2h45m10s", timedelta(hours=2, minutes=45, seconds=10)),
        ("0", timedelta(0)),
        ("90m", timedelta(minutes=90)),
        ("1500us", timedelta(microseconds=1500)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected
    assert parse_duration(format_duration(expected)) == expected


@pytest.mark.parametrize("text", ["", "1 week", "5", "-1h", "1d", "h", "1h 30m", "1.h", "30s\n"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_format_duration() -> None:
    assert format_duration(timedelta(minutes=90)) == "1h30m"
    assert format_duration(timedelta(days=30)) == "720h"
    assert format_duration(timedelta(0)) == "0s"
    assert format_duration(timedelta(milliseconds=250)) == "250ms"
    assert format_duration(timedelta(seconds=61.5)) == "1m1.5s"


def test_status_dump_is_what_the_api_server_expects() -> None:
    now = datetime(2026, 11, 20, 12, 0, 0, tzinfo=timezone.utc)
    status = ReconsumeStatus(
        phase=Phase.RUNNING,
        observed_generation=2,
        conditions=[
            Condition(
                type=ConditionType.PLAN_READY,
                status=ConditionStatus.TRUE,
                reason="PlanComputed",
                last_transition_time=now,
                observed_generation=2,
            ),
            Condition(
                type=ConditionType.RUNNING,
                status=ConditionStatus.TRUE,
                reason="ConsumersRunning",
                message="3 of 3 replicas ready",
                last_transition_time=now,
                observed_generation=2,
            ),
        ],
        children={"deployment": "accounts-add-locale-replay", "replay_group": "reprise-accounts-add-locale"},
        plan=Plan(
            partitions=[
                PartitionPlan(
                    topic="users",
                    partition=0,
                    start_offset=10,
                    end_offset=110,
                    records=100,
                    oldest_timestamp=now,
                    retention_risk=RetentionRisk.AT_RISK,
                )
            ],
            partition_count=1,
            total_records=100,
            computed_at=now,
            retention_risk=RetentionRisk.AT_RISK,
        ),
        progress=Progress(
            partitions=[
                PartitionProgress(
                    topic="users", partition=0, position=60, end_offset=110, lag=50, state=PartitionState.REPLAYING
                )
            ],
            total_records=100,
            processed=50,
            percent=50,
            lag=50,
            eta_seconds=750,
            eta="12m30s",
            updated_at=now,
        ),
        started_at=now,
    )
    dumped = status.dump()
    assert dumped["phase"] == "Running" and dumped["observedGeneration"] == 2
    assert dumped["conditions"][0] == {
        "type": "PlanReady",
        "status": "True",
        "reason": "PlanComputed",
        "message": "",
        "lastTransitionTime": "2026-11-20T12:00:00Z",
        "observedGeneration": 2,
    }
    assert dumped["children"]["replayGroup"] == "reprise-accounts-add-locale"
    assert dumped["plan"]["partitions"][0]["retentionRisk"] == "AtRisk"
    assert dumped["progress"]["partitions"][0]["state"] == "Replaying"
    assert dumped["startedAt"] == "2026-11-20T12:00:00Z"
    assert "completedAt" not in dumped and "rollback" not in dumped

    # What the operator reads back from the API server (with fields it does not know) parses again.
    again = ReconsumeStatus.model_validate({**dumped, "kopf": {"progress": {}}, "somethingNewer": 1})
    assert again.is_true(ConditionType.RUNNING, generation=2)
    assert not again.is_true("Complete")
    assert again.condition("PlanReady").reason == "PlanComputed"


def test_condition_reason_must_be_one_camel_case_word() -> None:
    with pytest.raises(ValidationError):
        Condition(type="Complete", status="True", reason="not a word", last_transition_time=datetime.now(timezone.utc))
    with pytest.raises(ValidationError, match="timezone"):
        Condition(type="Complete", status="True", reason="Done", last_transition_time=datetime(2026, 1, 1))


def test_backfill_and_lakereplay_status() -> None:
    now = datetime(2026, 11, 20, tzinfo=timezone.utc)
    backfill = BackfillStatus(
        phase="Draining",
        keys_not_found=["u-9"],
        keys_not_found_count=1,
        produced_range=[{"topic": "users", "partition": 3, "start_offset": 100, "end_offset": 102}],
        barrier={
            "partitions": [
                {
                    "group": "billing",
                    "topic": "users",
                    "partition": 3,
                    "target_offset": 102,
                    "committed_offset": 101,
                    "remaining": 1,
                    "stalled_since": now,
                }
            ],
            "groups_passed": 1,
            "groups_total": 2,
            "remaining": 1,
        },
        children={"jobs": ["users-missing-profiles-backfill"]},
    ).dump()
    assert backfill["keysNotFound"] == ["u-9"]
    assert backfill["barrier"]["partitions"][0]["stalledSince"] == "2026-11-20T00:00:00Z"
    assert backfill["producedRange"][0] == {"topic": "users", "partition": 3, "startOffset": 100, "endOffset": 102}

    lake = LakeReplayStatus(
        phase="Running",
        spark={"application_name": "accounts-2025h1-spark", "state": "RUNNING"},
        continuation={
            "reconsume": "accounts-full-history-live",
            "start_offsets": [{"topic": "users", "partition": 0, "offset": 42}],
        },
        children={"backfill_topic": "users.backfill.2025h1", "spark_application": "accounts-2025h1-spark"},
    ).dump()
    assert lake["spark"] == {"applicationName": "accounts-2025h1-spark", "state": "RUNNING"}
    assert lake["continuation"]["startOffsets"] == [{"topic": "users", "partition": 0, "offset": 42}]
    assert lake["children"]["sparkApplication"] == "accounts-2025h1-spark"


def test_unknown_spec_fields_are_refused_in_python() -> None:
    body = yaml.safe_load((EXAMPLES / "reconsume-handover.yaml").read_text())["spec"]
    body["kafka"]["password"] = "x"
    with pytest.raises(ValidationError, match="password"):
        ReconsumeSpec.model_validate(body)
