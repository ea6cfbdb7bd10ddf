"""`status.plan` of a plan over Kafka offsets (Reconsume, and LakeReplay's continuation), with each partition's
retention risk named Safe, Clamped or Lost, and the (start, end) per partition read back from it.
"""

from __future__ import annotations

from replay_worker.contract import TopicPartitionKey, rfc3339_ms

from .planning import Plan, plan_status


def plan_partitions_status(plan: Plan) -> dict:
    """`status.plan` in the API's shape (retention risk as Safe / Clamped / Lost)."""
    status = plan_status(plan)
    worst = "Safe"
    for part, raw in zip(plan.partitions, status["partitions"]):
        risk = "Clamped" if part.clamped else ("Lost" if part.retention_risk else "Safe")
        raw["retentionRisk"] = risk
        if risk == "Lost" or (risk == "Clamped" and worst == "Safe"):
            worst = risk
    status["partitionCount"] = len(plan.partitions)
    status["retentionRisk"] = worst
    stamps = [p.oldest_timestamp_ms for p in plan.partitions if p.oldest_timestamp_ms is not None]
    if stamps:
        status["oldestTimestamp"] = rfc3339_ms(min(stamps))
    return status


def plan_from_status(raw: dict) -> dict[TopicPartitionKey, tuple[int, int]]:
    """(start, end) per partition from `status.plan`."""
    return {(p["topic"], p["partition"]): (p["startOffset"], p["endOffset"]) for p in raw.get("partitions") or []}
