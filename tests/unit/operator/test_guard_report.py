"""What the status says about guards that cannot follow a replay (guard_report), from handover-topic state."""

from __future__ import annotations

from datetime import datetime, timezone

from replay_worker.protocol.handover import PartitionHandover
from replay_worker.protocol.wire import AckInfo, GuardInfo, HandoverInfo, StartInfo

from reprise_operator.kinds.reconsume.guard_report import NAMED, condition_message, guard_problem, guard_problems
from reprise_operator.rules.progress import PartitionView, Progress, progress_status

RID = "ns/orders/abc"


def part(p: int, problem: str | None = None, acked: bool = False, member: str = "live-1") -> PartitionHandover:
    found = PartitionHandover("orders", p, start=StartInfo(RID, "orders", p, 0))
    if problem is not None or acked:
        found.guard = GuardInfo(RID, "orders", p, None, None, member, 0, problem)
    if acked:
        found.handover = HandoverInfo(RID, "orders", p, 10, "caught-up")
        found.ack = AckInfo(RID, "orders", p, 10, 10)
    return found


def test_a_guard_record_with_a_problem_is_reported_until_the_partition_is_acknowledged() -> None:
    assert (
        guard_problem(part(0, "unreadable-handover-record:newer-version")) == "unreadable-handover-record:newer-version"
    )
    assert guard_problem(part(0, "unevaluable-filter:bad-operator", acked=True)) is None
    assert guard_problem(part(0)) is None
    assert guard_problem(None) is None
    # A routine guard record (skipping, no problem) is not a problem.
    routine = part(1)
    routine.guard = GuardInfo(RID, "orders", 1, 3, 7, "live-1", 0, None)
    assert guard_problem(routine) is None


def test_the_message_names_each_partition_its_reason_and_member_sorted() -> None:
    problems = guard_problems([part(2, "unusable-commit-mark:newer-version"), part(0, "malformed"), part(1)])
    assert [(p.partition, p.problem) for p in problems] == [(0, "malformed"), (2, "unusable-commit-mark:newer-version")]
    message = condition_message(problems)
    assert "orders/0 (malformed, member live-1)" in message
    assert "orders/2 (unusable-commit-mark:newer-version, member live-1)" in message
    assert "at-least-once" in message and "nothing lost" in message


def test_many_partitions_are_counted_beyond_the_named_ones() -> None:
    problems = guard_problems([part(p, "malformed") for p in range(NAMED + 3)])
    message = condition_message(problems)
    assert f"orders/{NAMED - 1} " in message and f"orders/{NAMED} " not in message
    assert "and 3 more" in message


def test_progress_carries_the_problem_code_per_partition_only_where_there_is_one() -> None:
    views = (PartitionView("orders", 0, 0, 10, 4, guard_problem="malformed"), PartitionView("orders", 1, 0, 10, 4))
    status = progress_status(Progress(views, None), datetime(2026, 11, 23, tzinfo=timezone.utc))
    assert status["partitions"][0]["guardProblem"] == "malformed"
    assert "guardProblem" not in status["partitions"][1]
