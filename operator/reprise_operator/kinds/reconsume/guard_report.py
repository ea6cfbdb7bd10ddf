"""What a Reconsume's status says about the live side's guards that cannot follow its replay. Pure.

A guard that meets bad input (a handover record it cannot read, a commit mark of a newer format, a filter it
cannot evaluate) skips nothing on that partition and publishes a `guard` record with `problem` set
(HANDOVER.md section 6, "Bad input"). No record is lost then, but the partition is no longer exact: the live
group processes again what the replay covers. A person must see that, so the partition and the reason go into
`status.progress.partitions[].guardProblem` and into the `GuardProblem` condition, the way Strimzi surfaces a
broker it cannot reconcile rather than hiding it in a log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from replay_worker.contract import PartitionHandover

from ...api.common import ConditionType

CONDITION = ConditionType.GUARD_PROBLEM
#: At most this many partitions are named in the condition's message; the rest are counted.
NAMED = 5


@dataclass(frozen=True)
class GuardProblem:
    topic: str
    partition: int
    #: The guard's reason code, e.g. `unreadable-handover-record:newer-version`.
    problem: str
    #: The live group member that reported it.
    member: str = ""


def guard_problem(part: PartitionHandover | None) -> str | None:
    """The problem the live side's guard reports on one partition, while it still matters: once the live side
    acknowledged the handover the partition is handed over, and an older report is history."""
    if part is None or part.guard is None or not part.guard.problem or part.acknowledged:
        return None
    return part.guard.problem


def guard_problems(partitions: Iterable[PartitionHandover]) -> list[GuardProblem]:
    found = []
    for part in partitions:
        problem = guard_problem(part)
        if problem is not None:
            assert part.guard is not None
            found.append(GuardProblem(part.topic, part.partition, problem, part.guard.member))
    return sorted(found, key=lambda p: (p.topic, p.partition))


def condition_message(problems: list[GuardProblem]) -> str:
    """Names each partition and its reason, and what it means for the data."""
    named = ", ".join(
        f"{p.topic}/{p.partition} ({p.problem}{', member ' + p.member if p.member else ''})" for p in problems[:NAMED]
    )
    more = f" and {len(problems) - NAMED} more" if len(problems) > NAMED else ""
    return (
        f"the live side's guard cannot follow this replay on {named}{more}: it skips nothing there, so those "
        "partitions are processed by both groups (at-least-once, nothing lost); see HANDOVER.md, Bad input"
    )
