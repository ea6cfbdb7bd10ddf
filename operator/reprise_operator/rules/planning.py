"""The replay plan: per partition, where a replay starts and ends, how much it reads, and what it risks.

Pure: it takes what Kafka said about each partition (the contract's `PartitionFacts`) and the user's start
as the contract's `StartSpec`, and returns the plan that goes into `status.plan`. The start of each
partition is decided by the same rule the replay worker bootstraps with (`replay_worker.contract`,
`decide_start`), so the plan and the published start S cannot disagree. Kafka's own reset tool silently
clamps a start that retention already deleted; a replay product must say so loudly instead (REFERENCE.md
section 1), so the decision's `retention_risk` is kept for every partition and `PlanError` names the
partition and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Mapping

from replay_worker.contract import (
    PartitionFacts,
    SpecError,
    StartDecision,
    StartSpec,
    TopicPartitionKey,
    decide_start,
    epoch_ms,
    rfc3339,
)

from ..api import Start


class PlanError(ValueError):
    """The plan cannot be made as asked; the message names the partition, the field and the fix."""

    def __init__(self, message: str, reason: str = "InvalidStart") -> None:
        super().__init__(message)
        #: The condition reason the resource fails with.
        self.reason = reason


def refuse_future(field: str, moment: datetime | None, now: datetime, reason: str = "StartInFuture") -> None:
    """PlanError when a bound of the replayed range lies after `now`.

    A replay reads history: no record is newer than now, so a start in the future would plan zero records
    and an end in the future would leave the range open. The API server has no clock to refuse it at
    admission (CEL has no `now`), so it is refused here, when the plan is computed, with the field named."""
    if moment is None or moment <= now:
        return
    raise PlanError(
        f"{field} {rfc3339(moment)} is in the future (the operator's clock says {rfc3339(now)}): a replay reads "
        f"records that already exist, so nothing would be replayed. Set a time in the past",
        reason,
    )


def start_spec(start: Start, now: datetime) -> StartSpec:
    """The API's `spec.start` in the contract's terms (what the worker would be given), or PlanError."""
    refuse_future("spec.start.timestamp", start.timestamp, now)
    if start.timestamp is not None:
        return StartSpec("timestamp", timestamp_ms=epoch_ms(start.timestamp))
    if start.duration is not None:
        # A duration is resolved once, at planning time (`lookup_timestamp(now)`); the plan then pins
        # offsets, so a restart of the operator or the workers never moves the start.
        return StartSpec("duration", duration_s=start.duration.total_seconds())
    if start.offsets is not None:
        offsets: dict[str, dict[int, int]] = {}
        for o in start.offsets:
            offsets.setdefault(o.topic, {})[o.partition] = o.offset
        return StartSpec("offsets", offsets=offsets)
    return StartSpec("earliest")


@dataclass(frozen=True)
class PartitionPlan:
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    oldest_timestamp_ms: int | None
    retention_risk: bool
    clamped: bool = False
    #: The partition's log-start offset when the plan was made (what a retention message must name).
    log_start: int | None = None

    @property
    def records(self) -> int:
        return max(0, self.end_offset - self.start_offset)

    @property
    def key(self) -> TopicPartitionKey:
        return (self.topic, self.partition)


def plan_partition(start: StartSpec, facts: PartitionFacts, *, allow_clamp: bool = False) -> PartitionPlan:
    """The plan of one partition (the contract's start decision, up to the end offset now), or PlanError
    when the spec cannot be applied to this partition."""
    try:
        decision: StartDecision = decide_start(start, facts, allow_clamp)
    except SpecError as exc:
        raise PlanError(f"spec.{exc}") from None
    return PartitionPlan(
        facts.topic,
        facts.partition,
        decision.offset,
        facts.end,
        decision.oldest_timestamp_ms,
        decision.retention_risk,
        decision.clamped,
        facts.log_start,
    )


@dataclass(frozen=True)
class Plan:
    partitions: tuple[PartitionPlan, ...]
    computed_at: datetime

    @property
    def total_records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def at_risk(self) -> list[PartitionPlan]:
        """Partitions whose start retention already deleted and that were not clamped."""
        return [p for p in self.partitions if p.retention_risk and not p.clamped]

    def start_offsets(self) -> dict[TopicPartitionKey, int]:
        return {p.key: p.start_offset for p in self.partitions}

    def end_offsets(self) -> dict[TopicPartitionKey, int]:
        return {p.key: p.end_offset for p in self.partitions}


def make_plan(
    start: StartSpec,
    facts: Iterable[PartitionFacts],
    computed_at: datetime,
    *,
    allow_clamp: bool = False,
) -> Plan:
    ordered = sorted(facts, key=lambda f: (f.topic, f.partition))
    return Plan(tuple(plan_partition(start, f, allow_clamp=allow_clamp) for f in ordered), computed_at)


def retention_message(plan: Plan, lake_hint: str = "LakeReplay") -> str:
    """The one message that says which partitions lost their start to retention, and what to do."""
    risky = plan.at_risk
    names = ", ".join(f"{p.topic}/{p.partition} (log starts at {log_start(p)})" for p in risky[:5])
    more = f" and {len(risky) - 5} more" if len(risky) > 5 else ""
    return (
        f"the start is older than the retained log on {names}{more}: those records are gone from Kafka. "
        f"Replay them from the data lake with a {lake_hint}, or set spec.start.allowClamp: true to start "
        f"at the oldest retained record"
    )


def log_start(part: PartitionPlan) -> int:
    """Where the partition's retained log starts (not the offset asked for: that is what lies below it)."""
    return part.log_start if part.log_start is not None else part.start_offset


def partitions_of(topics: Mapping[str, Iterable[int]]) -> list[TopicPartitionKey]:
    return [(t, p) for t in sorted(topics) for p in sorted(topics[t])]
