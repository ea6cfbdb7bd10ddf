"""`status.plan` of a plan over Kafka offsets (Reconsume, and LakeReplay's continuation), with each partition's
retention risk named Safe, Clamped or Lost, and the (start, end) per partition read back from it.

The status is built with the API's `Plan` and `PartitionPlan` models, so it has the CRD's shape: record times
at millisecond precision, the time of the plan at second precision.
"""

from __future__ import annotations

from datetime import datetime

from replay_worker.contract import TopicPartitionKey, from_epoch_ms

from ..api.common import PartitionPlan as PartitionPlanStatus
from ..api.common import Plan as PlanStatus
from ..api.common import RetentionRisk
from .planning import PartitionPlan, Plan


def partition_risk(part: PartitionPlan) -> RetentionRisk:
    """Clamped (allowClamp moved the start to the log start), Lost (retention deleted the start), else Safe."""
    if part.clamped:
        return RetentionRisk.CLAMPED
    return RetentionRisk.LOST if part.retention_risk else RetentionRisk.SAFE


def plan_partitions_status(plan: Plan) -> dict:
    """`status.plan` in the API's shape: per partition its range, records, oldest record and retention risk;
    over all, the worst risk (Lost before Clamped before Safe) and the oldest record."""
    worst = RetentionRisk.SAFE
    partitions = []
    for part in plan.partitions:
        risk = partition_risk(part)
        if risk is RetentionRisk.LOST or (risk is RetentionRisk.CLAMPED and worst is RetentionRisk.SAFE):
            worst = risk
        partitions.append(
            PartitionPlanStatus(
                topic=part.topic,
                partition=part.partition,
                start_offset=part.start_offset,
                end_offset=part.end_offset,
                records=part.records,
                oldest_timestamp=_record_time(part.oldest_timestamp_ms),
                retention_risk=risk,
            )
        )
    stamps = [p.oldest_timestamp_ms for p in plan.partitions if p.oldest_timestamp_ms is not None]
    return PlanStatus(
        partitions=partitions,
        total_records=plan.total_records,
        computed_at=plan.computed_at,
        partition_count=len(plan.partitions),
        retention_risk=worst,
        oldest_timestamp=_record_time(min(stamps)) if stamps else None,
    ).as_status()


def _record_time(epoch_ms: int | None) -> datetime | None:
    return from_epoch_ms(epoch_ms) if epoch_ms is not None else None


def plan_from_status(plan: PlanStatus | None) -> dict[TopicPartitionKey, tuple[int, int]]:
    """(start, end) per partition from `status.plan` (none before the plan is computed)."""
    return {(p.topic, p.partition): (p.start_offset, p.end_offset) for p in plan.partitions} if plan else {}
