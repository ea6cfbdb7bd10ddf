"""The replay plan: start offsets per start kind, retention risk, clamping, and clear errors."""

from datetime import datetime, timedelta, timezone

import pytest

from reprise_operator.kafka_admin import OffsetAtTime
from reprise_operator.planning import (
    PartitionFacts,
    PlanError,
    StartRequest,
    make_plan,
    plan_partition,
    plan_status,
    retention_message,
)

NOW = datetime(2026, 9, 30, tzinfo=timezone.utc)
T = datetime(2026, 9, 1, tzinfo=timezone.utc)


def test_earliest_starts_at_log_start_without_risk():
    plan = plan_partition("users", 0, StartRequest("earliest"), PartitionFacts(100, 500, first_timestamp_ms=7))
    assert (plan.start_offset, plan.end_offset, plan.records, plan.retention_risk) == (100, 500, 400, False)
    assert plan.oldest_timestamp_ms == 7


def test_timestamp_inside_retained_log_is_safe():
    facts = PartitionFacts(100, 500, at_start_time=OffsetAtTime(250, 1_000))
    plan = plan_partition("users", 0, StartRequest("timestamp", timestamp=T), facts)
    assert (plan.start_offset, plan.records, plan.retention_risk, plan.oldest_timestamp_ms) == (250, 250, False, 1_000)


def test_timestamp_answered_with_log_start_means_retention_deleted_part_of_the_range():
    facts = PartitionFacts(100, 500, at_start_time=OffsetAtTime(100, 1_000))
    plan = plan_partition("users", 3, StartRequest("timestamp", timestamp=T), facts)
    assert plan.retention_risk and not plan.clamped


def test_no_record_that_new_starts_at_end():
    facts = PartitionFacts(0, 42, at_start_time=None)
    plan = plan_partition("users", 0, StartRequest("timestamp", timestamp=T), facts)
    assert (plan.start_offset, plan.records, plan.retention_risk) == (42, 0, False)


def test_explicit_offset_below_log_start_is_a_risk_unless_clamped():
    offsets = {("users", 0): 10}
    risky = plan_partition("users", 0, StartRequest("offsets", offsets=offsets), PartitionFacts(100, 500))
    assert risky.retention_risk and risky.start_offset == 10
    clamped = plan_partition("users", 0, StartRequest("offsets", offsets=offsets, allow_clamp=True), PartitionFacts(100, 500))
    assert clamped.clamped and clamped.start_offset == 100 and clamped.records == 400


def test_explicit_offset_beyond_end_names_the_partition():
    with pytest.raises(PlanError, match=r"users/2 is 900, beyond the partition's end offset 500"):
        plan_partition("users", 2, StartRequest("offsets", offsets={("users", 2): 900}), PartitionFacts(0, 500))


def test_missing_explicit_offset_names_the_field():
    with pytest.raises(PlanError, match=r"spec.start.offsets has no offset for users/1"):
        plan_partition("users", 1, StartRequest("offsets", offsets={("users", 0): 1}), PartitionFacts(0, 5))


def test_duration_resolves_once_to_an_instant():
    start = StartRequest.from_duration(timedelta(hours=720), NOW)
    assert start.timestamp == NOW - timedelta(days=30)
    assert start.timestamp_ms == int((NOW - timedelta(days=30)).timestamp() * 1000)


def test_plan_totals_status_and_retention_message():
    facts = {
        ("users", 1): PartitionFacts(100, 300, at_start_time=OffsetAtTime(100, 5)),
        ("users", 0): PartitionFacts(0, 200, at_start_time=OffsetAtTime(50, 9)),
    }
    plan = make_plan(StartRequest("timestamp", timestamp=T), facts, NOW)
    assert [p.partition for p in plan.partitions] == [0, 1]
    assert plan.total_records == 150 + 200
    assert [p.partition for p in plan.at_risk] == [1]
    status = plan_status(plan)
    assert status["totalRecords"] == 350
    assert status["partitions"][1]["retentionRisk"] is True
    assert status["partitions"][0]["oldestTimestamp"] == "1970-01-01T00:00:00.009Z"
    message = retention_message(plan)
    assert "users/1" in message and "LakeReplay" in message and "spec.start.allowClamp" in message


def test_retention_message_names_the_partitions_log_start_for_an_offsets_start():
    # Asked for offset 0 where the log starts at 500: the message must say 500, not the offset asked for.
    facts = {("users", 0): PartitionFacts(500, 900)}
    plan = make_plan(StartRequest("offsets", offsets={("users", 0): 0}), facts, NOW)
    message = retention_message(plan)
    assert "users/0 (log starts at 500)" in message, message
    timestamp_plan = make_plan(StartRequest("timestamp", timestamp=T),
                               {("users", 0): PartitionFacts(500, 900, at_start_time=OffsetAtTime(500, 5))}, NOW)
    assert "users/0 (log starts at 500)" in retention_message(timestamp_plan)
