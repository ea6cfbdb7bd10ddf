"""The replay plan: start offsets per start kind, retention risk, clamping, and clear errors.

The plan decides each partition with the replay contract's `decide_start` (the rule the worker bootstraps
with); these tests pin what the operator adds around it: records, totals, status and messages."""

from datetime import datetime, timedelta, timezone

import pytest

from replay_worker.contract import PartitionFacts, StartSpec, epoch_ms
from reprise_operator.api import Start
from reprise_operator.rules.offset_plan_status import plan_partitions_status
from reprise_operator.rules.planning import (
    PlanError,
    make_plan,
    plan_partition,
    retention_message,
    start_spec,
)

NOW = datetime(2026, 9, 30, tzinfo=timezone.utc)
T = datetime(2026, 9, 1, tzinfo=timezone.utc)
AT_T = StartSpec("timestamp", timestamp_ms=epoch_ms(T))


def facts(
    partition: int,
    log_start: int,
    end: int,
    found: int | None = None,
    found_ms: int | None = None,
    first_ms: int | None = None,
) -> PartitionFacts:
    return PartitionFacts(
        "users",
        partition,
        log_start,
        end,
        time_lookup=found,
        time_lookup_timestamp_ms=found_ms,
        log_start_timestamp_ms=first_ms,
    )


def test_earliest_starts_at_log_start_without_risk():
    plan = plan_partition(StartSpec("earliest"), facts(0, 100, 500, first_ms=7))
    assert (plan.start_offset, plan.end_offset, plan.records, plan.retention_risk) == (100, 500, 400, False)
    assert plan.oldest_timestamp_ms == 7


def test_timestamp_inside_retained_log_is_safe():
    plan = plan_partition(AT_T, facts(0, 100, 500, found=250, found_ms=1_000))
    assert (plan.start_offset, plan.records, plan.retention_risk, plan.oldest_timestamp_ms) == (250, 250, False, 1_000)


def test_timestamp_answered_with_log_start_means_retention_deleted_part_of_the_range():
    plan = plan_partition(AT_T, facts(3, 100, 500, found=100, found_ms=1_000))
    assert plan.retention_risk and not plan.clamped and plan.log_start == 100


def test_no_record_that_new_starts_at_end():
    plan = plan_partition(AT_T, facts(0, 0, 42, found=-1))
    assert (plan.start_offset, plan.records, plan.retention_risk) == (42, 0, False)


def test_explicit_offset_below_log_start_is_a_risk_unless_clamped():
    offsets = StartSpec("offsets", offsets={"users": {0: 10}})
    risky = plan_partition(offsets, facts(0, 100, 500))
    assert risky.retention_risk and risky.start_offset == 10
    clamped = plan_partition(offsets, facts(0, 100, 500), allow_clamp=True)
    assert clamped.clamped and clamped.start_offset == 100 and clamped.records == 400


def test_explicit_offset_beyond_end_names_the_partition():
    with pytest.raises(PlanError, match=r"spec.start.offsets: users\[2\]=900 is beyond the partition's end offset 500"):
        plan_partition(StartSpec("offsets", offsets={"users": {2: 900}}), facts(2, 0, 500))


def test_an_unlisted_partition_fails_the_plan_as_the_crd_says():
    # The CRD: "a partition not listed fails the plan with reason InvalidStart (it is never silently skipped)".
    with pytest.raises(PlanError, match=r"spec.start.offsets has no offset for users\[1\]") as raised:
        plan_partition(StartSpec("offsets", offsets={"users": {0: 1}}), facts(1, 0, 5))
    assert raised.value.reason == "InvalidStart"
    described = Start.model_json_schema()["properties"]["offsets"]["description"]
    assert "a partition not listed fails the plan with reason InvalidStart" in described


def test_duration_resolves_once_to_an_instant():
    start = start_spec(Start.model_validate({"duration": "720h"}), NOW)
    assert start.lookup_timestamp(epoch_ms(NOW)) == epoch_ms(NOW - timedelta(days=30))


def test_the_api_start_in_the_contracts_terms():
    assert start_spec(Start.model_validate({"timestamp": "2026-09-01T00:00:00Z"}), NOW) == AT_T
    assert start_spec(Start.model_validate({"earliest": True}), NOW) == StartSpec("earliest")
    offsets = Start.model_validate(
        {"offsets": [{"topic": "users", "partition": 0, "offset": 5}, {"topic": "users", "partition": 1, "offset": 9}]}
    )
    assert start_spec(offsets, NOW) == StartSpec("offsets", offsets={"users": {0: 5, 1: 9}})
    with pytest.raises(PlanError, match="is in the future"):
        start_spec(Start.model_validate({"timestamp": "2026-10-01T00:00:00Z"}), NOW)


def test_plan_totals_status_and_retention_message():
    plan = make_plan(AT_T, [facts(1, 100, 300, found=100, found_ms=5), facts(0, 0, 200, found=50, found_ms=9)], NOW)
    assert [p.partition for p in plan.partitions] == [0, 1]
    assert plan.total_records == 150 + 200
    assert [p.partition for p in plan.at_risk] == [1]
    status = plan_partitions_status(plan)
    assert status["totalRecords"] == 350 and status["partitionCount"] == 2
    assert status["computedAt"] == "2026-09-30T00:00:00Z"
    assert [p["retentionRisk"] for p in status["partitions"]] == ["Safe", "Lost"] and status["retentionRisk"] == "Lost"
    assert status["partitions"][0]["oldestTimestamp"] == "1970-01-01T00:00:00.009Z"
    message = retention_message(plan)
    assert "users/1" in message and "LakeReplay" in message and "spec.start.allowClamp" in message


def test_retention_message_names_the_partitions_log_start_for_an_offsets_start():
    # Asked for offset 0 where the log starts at 500: the message must say 500, not the offset asked for.
    plan = make_plan(StartSpec("offsets", offsets={"users": {0: 0}}), [facts(0, 500, 900)], NOW)
    message = retention_message(plan)
    assert "users/0 (log starts at 500)" in message, message
    timestamp_plan = make_plan(AT_T, [facts(0, 500, 900, found=500, found_ms=5)], NOW)
    assert "users/0 (log starts at 500)" in retention_message(timestamp_plan)
