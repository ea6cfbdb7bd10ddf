"""LakeReplay's pure rules: its names and defaults, the SparkApplication and drain settings it asks for,
the backfill topic's size and configuration, and the plan's summary.

`steps` does the I/O around them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from replay_worker.contract import EndSpec, StartSpec, WorkerSettings

from ...api import (
    LakeReplaySpec,
)
from ...rules.planning import Plan, refuse_future
from ...rules.workloads import KAFKA_CONFIG_DIR, Owner
from ...shared.constants import bounded_name, child_labels
from ...shared.settings import OperatorSettings
from .spark_application import (
    SparkDefaults,
    application_name,
    backfill_topic_name,
    progress_uri,
    rfc3339_exact,
    spark_application_manifest,
)

KIND = "LakeReplay"
PLURAL = "lakereplays"
RECONSUME_PLURAL = "reconsumes"

#: Without then.reconsume (or when its topics cannot say), the backfill topic gets this many partitions.
DEFAULT_BACKFILL_PARTITIONS = 12
#: The backfill topic only lives for the replay.
DEFAULT_BACKFILL_RETENTION = timedelta(hours=168)
#: The drain's end bound: 9999-12-31T23:59:59.999Z. A Drain worker without an end finishes a partition
#: the first time it reaches the partition's end, which while Spark is still writing would leave the rest
#: unread; with an end time no record reaches it never finishes by itself, and the operator decides.
DRAIN_UNTIL_STOPPED_MS = 253_402_300_799_999


# ------------------------------------------------------------------------------------------ pure parts


def spark_defaults(settings: OperatorSettings) -> SparkDefaults:
    return SparkDefaults(
        image=settings.spark_image,
        spark_version=settings.spark_version,
        service_account=settings.spark_service_account,
        jars=settings.spark_jars,
        progress_base=settings.spark_progress_uri,
        allow_image_override=settings.spark_allow_image_override,
        allow_service_account_override=settings.spark_allow_service_account_override,
    )


def spark_application(
    *,
    owner: Owner,
    namespace: str,
    spec: LakeReplaySpec,
    defaults: SparkDefaults = SparkDefaults(),
    topic: str | None = None,
) -> dict:
    """The SparkApplication a LakeReplay (named by `owner`) runs; topic and progress as Reprise derives them."""
    return spark_application_manifest(
        owner=owner,
        name=application_name(owner.name),
        namespace=namespace,
        spec=spec,
        topic=topic or backfill_topic_name(namespace, owner.name, spec),
        progress=progress_uri(spec.source.uri, namespace, owner.name, owner.uid, defaults.progress_base),
        labels=child_labels(KIND, owner.name, "spark-application"),
        defaults=defaults,
    )


def drain_deployment_name(cr_name: str) -> str:
    return bounded_name(cr_name, "drain")


def backfill_partitions(spec: LakeReplaySpec, live_partitions: dict[str, list[int]]) -> int:
    """spec.backfillTopic.partitions, else the first live topic's count (keys then land on the same partition
    numbers as in the live topic), else DEFAULT_BACKFILL_PARTITIONS."""
    if spec.backfill_topic.partitions is not None:
        return spec.backfill_topic.partitions
    if spec.then is not None:
        first = spec.then.reconsume.topics[0]
        if live_partitions.get(first):
            return len(live_partitions[first])
    return DEFAULT_BACKFILL_PARTITIONS


def topic_config(spec: LakeReplaySpec) -> dict[str, str]:
    retention = spec.backfill_topic.retention or DEFAULT_BACKFILL_RETENTION
    return {"retention.ms": str(int(retention.total_seconds() * 1000))}


def drain_settings(
    spec: LakeReplaySpec,
    *,
    rid: str,
    topic: str,
    delivery: dict[str, str],
    handover_topic: str,
) -> WorkerSettings:
    """The drain consumers: the replay worker in mode Drain on the backfill topic, group spec.drainGroup,
    from the topic's start, with an end no record reaches (see DRAIN_UNTIL_STOPPED_MS)."""
    return WorkerSettings(
        bootstrap_servers=spec.kafka.bootstrap_servers,
        replay_id=rid,
        topics=(topic,),
        role="replay",
        mode="Drain",
        replay_group=spec.drain_group,
        start=StartSpec("earliest"),
        end=EndSpec("timestamp", timestamp_ms=DRAIN_UNTIL_STOPPED_MS),
        handler=delivery.get("REPRISE_HANDLER"),
        forward_topic=delivery.get("REPRISE_FORWARD_TOPIC"),
        handover_topic=handover_topic,
        kafka_config_dir=KAFKA_CONFIG_DIR if spec.kafka.config_from is not None else None,
    )


def plan_summary(spec: LakeReplaySpec, topic: str, partitions: int, continuation: Plan | None) -> str:
    """What the plan says, in one line: the lake range, the backfill topic, and the continuation."""
    source = spec.source
    start = rfc3339_exact(source.from_) if source.from_ is not None else "the oldest record"
    text = (
        f"lake {source.uri} ({source.format.value}) from {start} to {rfc3339_exact(source.to)}"
        + (f" where {source.filter}" if source.filter else "")
        + f", into backfill topic {topic} ({partitions} partitions), drained by group {spec.drain_group}"
    )
    if spec.then is not None and continuation is not None:
        then = spec.then.reconsume
        text += (
            f"; then {then.mode.value} on {', '.join(then.topics)} from the offsets at "
            f"{rfc3339_exact(source.to)} ({continuation.total_records} records there now)"
        )
    return text


def refuse_future_range(spec: LakeReplaySpec, now: Any) -> None:
    """PlanError when the lake range ends after `now` (the admission rules already put `from` before `to`).

    Decided as a Reconsume's start in the future is: the lake holds history only, and with then.reconsume the
    live topics would continue from offsets of a time not reached yet, so records written between the lake's
    last record and `to` would be replayed by neither side."""
    refuse_future("spec.source.to", spec.source.to, now, reason="EndInFuture")
