"""The Backfill completion barrier: targets, remaining, passing, and catching-up versus stuck."""

from datetime import datetime, timedelta, timezone

from reprise_operator.api import BarrierStatus
from reprise_operator.kinds.backfill.barrier import (
    GroupPosition,
    ProducedRange,
    barrier_status,
    observe,
    previous_from_status,
    ranges_between,
    ranges_from_worker,
    stalled_message,
    view_of,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
S = timedelta(seconds=1)
RANGES = [ProducedRange("users", 0, 100, 110), ProducedRange("users", 2, 40, 41)]


def test_target_is_last_produced_offset_plus_one():
    (r,) = ranges_from_worker("users", {"3": {"first": 10, "last": 14, "count": 5}})
    assert (r.partition, r.start, r.end, r.target, r.records) == (3, 10, 15, 15, 5)


def test_ranges_between_keep_only_partitions_that_moved():
    ranges = ranges_between("users", {0: 5, 1: 7, 2: 0}, {0: 9, 1: 7, 2: 3, 3: 1})
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 5, 9), (2, 0, 3), (3, 0, 1)]


def test_group_passes_only_at_or_past_the_target():
    committed = {"billing": {("users", 0): 110, ("users", 2): 40}}
    positions = observe(RANGES, ["billing"], committed, {}, T0)
    view = view_of(positions, ["billing"])
    by_partition = {p.partition: p for p in positions}
    assert by_partition[0].passed and by_partition[0].remaining == 0
    assert not by_partition[2].passed and by_partition[2].remaining == 1
    assert not view.passed and view.groups_passed == 0 and view.remaining() == 1


def test_group_without_committed_offset_owes_everything_produced():
    positions = observe(RANGES, ["new-group"], {}, {}, T0)
    assert [p.remaining for p in positions] == [10, 1]
    assert all(p.committed is None and not p.passed for p in positions)


def test_barrier_passes_when_every_group_is_past_every_partition():
    done = {("users", 0): 120, ("users", 2): 41}
    view = view_of(observe(RANGES, ["a", "b"], {"a": done, "b": done}, {}, T0), ["a", "b"])
    assert view.passed and view.groups_passed == 2 and view.remaining() == 0


def test_moving_group_is_never_stalled():
    previous: dict = {}
    for i in range(10):
        positions = observe(RANGES[:1], ["billing"], {"billing": {("users", 0): 100 + i}}, previous, T0 + i * 60 * S)
        previous = {p.key: p for p in positions}
        assert not positions[0].stalled(T0 + i * 60 * S, timedelta(minutes=1))


def test_unchanged_offset_with_lag_stalls_after_the_configured_time():
    committed = {"billing": {("users", 0): 104}}
    first = observe(RANGES[:1], ["billing"], committed, {}, T0)
    previous = {p.key: p for p in first}
    later = observe(RANGES[:1], ["billing"], committed, previous, T0 + 29 * S)
    assert not later[0].stalled(T0 + 29 * S, 30 * S)
    previous = {p.key: p for p in later}
    stuck = observe(RANGES[:1], ["billing"], committed, previous, T0 + 30 * S)
    assert stuck[0].stalled(T0 + 30 * S, 30 * S)
    assert stuck[0].unchanged_since == T0


def test_a_move_resets_the_stall_clock():
    previous = {p.key: p for p in observe(RANGES[:1], ["g"], {"g": {("users", 0): 101}}, {}, T0)}
    moved = observe(RANGES[:1], ["g"], {"g": {("users", 0): 102}}, previous, T0 + 100 * S)
    assert moved[0].unchanged_since == T0 + 100 * S and not moved[0].stalled(T0 + 100 * S, 30 * S)


def test_passed_group_has_no_stall_clock():
    previous = {p.key: p for p in observe(RANGES[:1], ["g"], {"g": {("users", 0): 101}}, {}, T0)}
    passed = observe(RANGES[:1], ["g"], {"g": {("users", 0): 110}}, previous, T0 + 100 * S)
    assert passed[0].passed and passed[0].unchanged_since is None and not passed[0].stalled(T0 + 100 * S, S)


def test_stalled_message_names_group_partition_and_offset():
    position = GroupPosition("billing", "users", 2, 40, 57, 41, T0)
    message = stalled_message([position], T0 + timedelta(minutes=5))
    assert "group billing" in message and "users partition 2 at offset 41" in message
    assert "at least 57" in message and "16 records to go" in message and "5m" in message
    assert "key ordering" in message


def test_stalled_message_for_a_group_that_never_committed():
    message = stalled_message([GroupPosition("search", "users", 0, 100, 110, None, T0)], T0 + 60 * S)
    assert "group search has no committed offset on users partition 0" in message


def test_stalled_message_is_bounded():
    many = [GroupPosition("g", "users", p, 0, 10, 1, T0) for p in range(20)]
    message = stalled_message(many, T0 + 60 * S)
    assert "and 15 more" in message and "partition 19" not in message


def test_status_shape_and_stalled_since_only_after_a_second_look():
    committed = {"billing": {("users", 0): 104, ("users", 2): 41}}
    first = observe(RANGES, ["billing"], committed, {}, T0)
    status = barrier_status(view_of(first, ["billing"]), T0)
    assert status["groupsTotal"] == 1 and status["groupsPassed"] == 0 and status["remaining"] == 6
    row = status["partitions"][0]
    assert row == {
        "group": "billing",
        "topic": "users",
        "partition": 0,
        "targetOffset": 110,
        "remaining": 6,
        "committedOffset": 104,
    }
    second = observe(RANGES, ["billing"], committed, {p.key: p for p in first}, T0 + 5 * S)
    status = barrier_status(view_of(second, ["billing"]), T0 + 5 * S)
    assert status["partitions"][0]["stalledSince"] == "2026-01-01T00:00:00Z"
    assert "stalledSince" not in status["partitions"][1]  # passed


def test_restart_keeps_the_stall_clock_from_status():
    committed = {"billing": {("users", 0): 104}}
    first = observe(RANGES[:1], ["billing"], committed, {}, T0)
    second = observe(RANGES[:1], ["billing"], committed, {p.key: p for p in first}, T0 + 5 * S)
    recorded = barrier_status(view_of(second, ["billing"]), T0 + 5 * S)
    after_restart = observe(
        RANGES[:1], ["billing"], committed, previous_from_status(BarrierStatus.model_validate(recorded)), T0 + 60 * S
    )
    assert after_restart[0].unchanged_since == T0 and after_restart[0].stalled(T0 + 60 * S, 60 * S)


def test_slowest_group_per_partition_for_progress():
    committed = {"a": {("users", 0): 108, ("users", 2): 41}, "b": {("users", 0): 103}}
    view = view_of(observe(RANGES, ["a", "b"], committed, {}, T0), ["a", "b"])
    assert view.slowest() == {("users", 0): 103, ("users", 2): None}
