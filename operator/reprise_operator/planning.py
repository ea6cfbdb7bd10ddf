"""The replay plan: per partition, where a replay starts and ends, how much it reads, and what it risks.

Pure: it takes what Kafka said about each partition (`PartitionFacts`) and the user's start request,
and returns the plan that goes into `status.plan`. Kafka's own reset tool silently clamps a start that
retention already deleted; a replay product must say so loudly instead (REFERENCE.md section 1), so
`retention_risk` is computed for every partition and `PlanError` names the partition and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Literal, Mapping

from .kafka_admin import OffsetAtTime, TopicPartitionKey

StartKind = Literal["timestamp", "duration", "earliest", "offsets"]


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
        f"{field} {_rfc3339(moment)} is in the future (the operator's clock says {_rfc3339(now)}): a replay reads "
        f"records that already exist, so nothing would be replayed. Set a time in the past",
        reason,
    )


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class StartRequest:
    """The user's `spec.start`, with a duration already turned into the instant it means."""

    kind: StartKind
    timestamp: datetime | None = None
    offsets: Mapping[TopicPartitionKey, int] | None = None
    allow_clamp: bool = False

    @classmethod
    def from_duration(cls, back: timedelta, now: datetime, allow_clamp: bool = False) -> "StartRequest":
        # A duration is resolved once, at planning time; the plan then pins offsets, so a restart
        # of the operator or the workers never moves the start.
        return cls("duration", timestamp=now - back, allow_clamp=allow_clamp)

    @property
    def timestamp_ms(self) -> int | None:
        if self.timestamp is None:
            return None
        return int(self.timestamp.timestamp() * 1000)


@dataclass(frozen=True)
class PartitionFacts:
    """What Kafka reported for one partition when the plan was made."""

    log_start: int
    end: int
    #: For time-based starts: the first offset at or after the start time, None when no record is that new.
    at_start_time: OffsetAtTime | None = None
    #: The timestamp of the record at `log_start`, when known (for the plan's oldest timestamp).
    first_timestamp_ms: int | None = None


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


def plan_partition(topic: str, partition: int, start: StartRequest, facts: PartitionFacts) -> PartitionPlan:
    """The plan of one partition, or PlanError when the request cannot be met."""
    oldest: int | None = None
    if start.kind == "earliest":
        offset, risk = facts.log_start, False
        oldest = facts.first_timestamp_ms if facts.end > facts.log_start else None
    elif start.kind in ("timestamp", "duration"):
        found = facts.at_start_time
        if found is None:
            # No record is that new: the partition's replay starts (and ends) at its end offset.
            offset = facts.end
            # When retention deleted everything, nothing proves the deleted records were older.
            risk = facts.log_start > 0 and facts.log_start == facts.end
        else:
            offset = found.offset
            oldest = found.timestamp_ms
            # Kafka answers the log start when every retained record is newer than the start time;
            # records deleted below it may have been in range.
            risk = found.offset == facts.log_start and facts.log_start > 0
    elif start.kind == "offsets":
        wanted = (start.offsets or {}).get((topic, partition))
        if wanted is None:
            raise PlanError(
                f"spec.start.offsets has no offset for {topic}/{partition}: list every partition of the topics "
                f"(the topic has partitions up to {partition} at least)"
            )
        if wanted > facts.end:
            raise PlanError(
                f"spec.start.offsets for {topic}/{partition} is {wanted}, beyond the partition's end offset {facts.end}"
            )
        offset, risk = wanted, wanted < facts.log_start
    else:  # pragma: no cover - the CRD schema admits only the kinds above
        raise PlanError(f"spec.start: unknown start kind {start.kind!r}")

    clamped = False
    if risk and start.allow_clamp:
        offset, clamped = max(offset, facts.log_start), True
    return PartitionPlan(topic, partition, offset, facts.end, oldest, risk, clamped, facts.log_start)


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
    start: StartRequest,
    facts: Mapping[TopicPartitionKey, PartitionFacts],
    computed_at: datetime,
) -> Plan:
    parts = tuple(plan_partition(t, p, start, facts[(t, p)]) for (t, p) in sorted(facts))
    return Plan(parts, computed_at)


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


def plan_status(plan: Plan) -> dict:
    """`status.plan` as the API stores it."""
    return {
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "startOffset": p.start_offset,
                "endOffset": p.end_offset,
                "records": p.records,
                **({"oldestTimestamp": _iso(p.oldest_timestamp_ms)} if p.oldest_timestamp_ms is not None else {}),
                "retentionRisk": p.retention_risk,
            }
            for p in plan.partitions
        ],
        "totalRecords": plan.total_records,
        "computedAt": plan.computed_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def partitions_of(topics: Mapping[str, Iterable[int]]) -> list[TopicPartitionKey]:
    return [(t, p) for t in sorted(topics) for p in sorted(topics[t])]
