"""The Backfill kind: producer-side re-emission of a limited set of named entities (seed 000's
"targeted surgery"), with a completion barrier on the downstream consumer groups.

The entities are named by key (`keys` or `keysFrom`), re-emitted to `topic` by exactly one source
(`topic`: the latest record per key from a retained or compacted topic; `job`: the upstream service's own
backfill command; `debezium`: an incremental snapshot signal to a Debezium connector), and the Backfill is
done when every group in `downstreamGroups` has committed past what was produced.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, Optional

from pydantic import ConfigDict, Field, model_validator

from .common import (
    AGE_COLUMN,
    StatusTime,
    APPROVAL_DESCRIPTION,
    PHASE_COLUMN,
    SUSPEND_DESCRIPTION,
    ApiModel,
    Approval,
    Cleanup,
    ConfigMapKeyReference,
    Duration,
    FreeformObject,
    GroupId,
    KafkaConnection,
    KindDefinition,
    PrinterColumn,
    Progress,
    RecordKey,
    ResourceStatus,
    StatusModel,
    TopicName,
    immutable,
    ResourceObject,
    name_rules,
    presence_immutable,
    rule,
    validations,
)


class TopicSource(ApiModel):
    """Re-emit the latest record of each key found in a retained or compacted topic."""

    name: TopicName = Field(
        description=(
            "The topic to read the latest record per key from (for example a compacted state topic). It "
            "may be spec.topic itself when that topic still holds every key."
        )
    )


class JobSource(ApiModel):
    """Run the upstream service's own backfill command as a Job."""

    template: FreeformObject = Field(
        description=(
            "A pod template (core/v1 PodTemplateSpec) running the upstream service's backfill command. "
            "Reprise mounts the keys as a file (one per line) whose path is in REPRISE_KEYS_FILE, and sets "
            "REPRISE_KEYS (comma-separated) and REPRISE_TOPIC. restartPolicy defaults to Never."
        )
    )
    backoff_limit: int = Field(default=2, ge=0, le=10, description="Retries of the Job before it fails.")
    active_deadline_seconds: Optional[int] = Field(
        default=None, ge=1, le=604_800, description="Fail the Job if it runs longer than this."
    )


class DebeziumSource(ApiModel):
    """Ask a Debezium connector for an incremental snapshot of the named rows."""

    signal_topic: TopicName = Field(description="The connector's Kafka signal topic (its signal.kafka.topic setting).")
    topic_prefix: str = Field(
        min_length=1,
        max_length=249,
        pattern=r"^[a-zA-Z0-9._-]+$",
        description="The connector's topic.prefix; the signal record's key must equal it.",
    )
    data_collection: str = Field(
        min_length=1,
        max_length=512,
        pattern=r"^[A-Za-z0-9_$.\"-]+$",
        description="The table to snapshot, as the connector names it, for example public.users.",
    )
    key_column: str = Field(
        min_length=1,
        max_length=256,
        pattern=r"^[A-Za-z_][A-Za-z0-9_$]*$",
        description=(
            "The column the keys are values of; the snapshot's additional-conditions filter is <keyColumn> IN (<keys>)."
        ),
    )
    notification_topic: Optional[TopicName] = Field(
        default=None,
        description=(
            "The connector's notification topic, when it has one (notification.sink.topic.name): Reprise "
            "follows the snapshot to COMPLETED there. Without it, Reprise compares spec.topic's end offsets."
        ),
    )


class BackfillSource(ApiModel):
    """How the entities are re-emitted: exactly one of topic, job, debezium."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            rule(
                "(has(self.topic) ? 1 : 0) + (has(self.job) ? 1 : 0) + (has(self.debezium) ? 1 : 0) == 1",
                "spec.source: set exactly one of topic, job or debezium",
            )
        )
    )

    topic: Optional[TopicSource] = Field(
        default=None, description="Re-emit the latest record per key from a retained or compacted topic."
    )
    job: Optional[JobSource] = Field(
        default=None, description="Run the upstream service's own backfill command as a Job."
    )
    debezium: Optional[DebeziumSource] = Field(
        default=None, description="Send an execute-snapshot signal to a Debezium connector."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> "BackfillSource":
        if self.kind is None:
            raise ValueError("spec.source: set exactly one of topic, job or debezium")
        return self

    @property
    def kind(self) -> Optional[str]:
        """Which source is set: "topic", "job" or "debezium" (None if not exactly one)."""
        chosen = [name for name in ("topic", "job", "debezium") if getattr(self, name) is not None]
        return chosen[0] if len(chosen) == 1 else None


class KeysFrom(ApiModel):
    """Keys listed in a ConfigMap, for more than fit comfortably in the spec."""

    config_map_ref: ConfigMapKeyReference = Field(
        description="The ConfigMap key whose value lists the keys, one per line (blank lines ignored)."
    )


class Barrier(ApiModel):
    """How the completion barrier on the downstream groups behaves."""

    stalled_after: Duration = Field(
        default=timedelta(minutes=5),
        description=(
            "A downstream group whose committed offset on a partition has not moved for this long while "
            "it still has records to pass sets the Stalled condition (naming the group, partition and "
            "offset). Go duration; default 5m."
        ),
        json_schema_extra={"default": "5m"},
    )


class BackfillSpec(ApiModel):
    """Which entities to re-emit, how, and which consumers must see them."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            rule(
                "has(self.keys) != has(self.keysFrom)",
                "spec.keys, spec.keysFrom: set exactly one of keys or keysFrom",
            ),
            *presence_immutable("spec", "keys", "keysFrom"),
        )
    )

    kafka: KafkaConnection = Field(description="The Kafka cluster of the target topic.")
    topic: TopicName = Field(
        description="The topic the entities are re-emitted to (the one downstream services consume). Immutable.",
        json_schema_extra=immutable("spec.topic"),
    )
    keys: Optional[list[RecordKey]] = Field(
        default=None,
        min_length=1,
        max_length=10000,
        description=(
            "The keys of the entities to re-emit, as UTF-8 text (up to 10000; use keysFrom for more). Immutable."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set", **immutable("spec.keys")},
    )
    keys_from: Optional[KeysFrom] = Field(
        default=None,
        description="Read the keys from a ConfigMap instead of keys. Immutable.",
        json_schema_extra=immutable("spec.keysFrom"),
    )
    source: BackfillSource = Field(
        description="How the entities are re-emitted: exactly one of topic, job, debezium. Immutable.",
        json_schema_extra=immutable("spec.source"),
    )
    downstream_groups: Optional[list[GroupId]] = Field(
        default=None,
        min_length=1,
        max_length=32,
        description=(
            "Consumer groups that must consume past what was produced, on every partition written to, "
            "before the Backfill completes. Unset: complete once produced. Can be changed (for example to "
            "drop a group that will never catch up)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    barrier: Barrier = Field(
        default_factory=Barrier,
        description="How the barrier on downstreamGroups behaves.",
        json_schema_extra={"default": {}},
    )
    approval: Approval = Field(default=Approval.AUTOMATIC, description=APPROVAL_DESCRIPTION)
    suspend: bool = Field(default=False, description=SUSPEND_DESCRIPTION)
    cleanup: Cleanup = Field(
        default_factory=Cleanup,
        description="What happens after the Backfill finished.",
        json_schema_extra={"default": {}},
    )

    @model_validator(mode="after")
    def _keys(self) -> "BackfillSpec":
        if (self.keys is None) == (self.keys_from is None):
            raise ValueError("spec.keys, spec.keysFrom: set exactly one of keys or keysFrom")
        return self


class KeyPartitionPlan(StatusModel):
    """The keys that map to one partition of the target topic."""

    partition: int = Field(ge=0, description="Partition of spec.topic.")
    keys: int = Field(ge=0, description="Number of keys the producer's partitioner maps to it.")
    start_offset: Optional[int] = Field(
        default=None, ge=0, description="The partition's end offset before anything was produced."
    )


class BackfillPlan(StatusModel):
    """What the Backfill will do, computed before anything is produced."""

    key_count: int = Field(default=0, ge=0, description="Number of keys to re-emit.")
    partitions: list[KeyPartitionPlan] = Field(
        default_factory=list, description="The partitions of spec.topic the keys map to."
    )
    downstream_groups: list[str] = Field(default_factory=list, description="The groups the barrier waits for.")
    computed_at: Optional[StatusTime] = Field(default=None, description="When the plan was computed.")


class OffsetRange(StatusModel):
    """A range of offsets written to one partition."""

    topic: str = Field(description="Kafka topic name.")
    partition: int = Field(ge=0, description="Partition number.")
    start_offset: int = Field(ge=0, description="First offset written (inclusive).")
    end_offset: int = Field(
        ge=0, description="End offset after writing (exclusive): consumers must commit at least this."
    )


class BarrierPartition(StatusModel):
    """How far one downstream group is on one partition written to."""

    group: str = Field(description="The downstream consumer group.")
    topic: str = Field(description="Kafka topic name.")
    partition: int = Field(ge=0, description="Partition number.")
    target_offset: int = Field(ge=0, description="The offset the group must commit (the produced end offset).")
    committed_offset: Optional[int] = Field(
        default=None, ge=0, description="The group's committed offset now; unset if it has none."
    )
    remaining: int = Field(default=0, ge=0, description="targetOffset minus committedOffset, at least 0.")
    stalled_since: Optional[StatusTime] = Field(
        default=None,
        description="Since when the committed offset has not moved while records remain; unset if moving.",
    )


class BarrierStatus(StatusModel):
    """The completion barrier: every downstream group past every produced offset."""

    partitions: list[BarrierPartition] = Field(
        default_factory=list, description="Per downstream group and partition written to."
    )
    groups_passed: int = Field(default=0, ge=0, description="Groups past every produced offset.")
    groups_total: int = Field(default=0, ge=0, description="Groups in spec.downstreamGroups.")
    remaining: int = Field(default=0, ge=0, description="Records still to pass, summed over groups and partitions.")


class DebeziumSignalStatus(StatusModel):
    """The execute-snapshot signal sent to the connector, and what it said back."""

    id: Optional[str] = Field(default=None, description="The signal's id (also Reprise's idempotency key).")
    sent_at: Optional[StatusTime] = Field(default=None, description="When the signal was produced.")
    last_notification: Optional[str] = Field(
        default=None,
        description="The latest notification type: STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED, COMPLETED, ...",
    )
    notified_at: Optional[StatusTime] = Field(default=None, description="When it arrived.")


class BackfillChildren(StatusModel):
    """What Reprise made for this Backfill."""

    jobs: list[str] = Field(default_factory=list, description="Jobs Reprise created (topic and job sources).")
    config_maps: list[str] = Field(default_factory=list, description="ConfigMaps Reprise created (the keys file).")


class BackfillStatus(ResourceStatus):
    """What the operator observed and did. Written by Reprise only."""

    children: BackfillChildren = Field(
        default_factory=BackfillChildren, description="What Reprise made for this Backfill."
    )
    plan: Optional[BackfillPlan] = Field(default=None, description="The keys, their partitions and the groups.")
    produced_range: list[OffsetRange] = Field(
        default_factory=list, description="The offsets written per partition of spec.topic."
    )
    keys_produced: Optional[int] = Field(default=None, ge=0, description="Keys re-emitted so far.")
    keys_not_found: list[str] = Field(
        default_factory=list,
        description="Keys named in the spec that the source did not have (at most 1000 listed).",
    )
    keys_not_found_count: Optional[int] = Field(
        default=None, ge=0, description="Number of keys not found (all of them, also beyond those listed)."
    )
    barrier: Optional[BarrierStatus] = Field(default=None, description="The completion barrier on downstreamGroups.")
    progress: Optional[Progress] = Field(
        default=None,
        description=(
            "The barrier per partition written to, in the shape every kind shares: position is the slowest "
            "downstream group's committed offset, lag what it still has to pass, with totals and ETA."
        ),
    )
    signal: Optional[DebeziumSignalStatus] = Field(default=None, description="Debezium source: the signal sent.")


class Backfill(ResourceObject):
    """A whole Backfill object."""

    kind: Literal["Backfill"] = Field(default="Backfill", description="Kind.")
    spec: BackfillSpec = Field(description="Desired backfill.")
    status: Optional[BackfillStatus] = Field(default=None, description="Observed state.")


BACKFILL = KindDefinition(
    kind="Backfill",
    plural="backfills",
    singular="backfill",
    short_names=("bf",),
    description=(
        "Backfill re-emits the current state of a limited set of named entities to a topic (from a "
        "retained topic, the upstream service's own command, or a Debezium snapshot) and completes when "
        "every downstream consumer group has consumed past what was produced."
    ),
    spec=BackfillSpec,
    status=BackfillStatus,
    printer_columns=(
        PHASE_COLUMN,
        PrinterColumn("Keys", ".status.plan.keyCount", "integer", "Number of keys to re-emit."),
        PrinterColumn(
            "Barrier", ".status.barrier.remaining", "integer", "Records downstream groups still have to pass."
        ),
        AGE_COLUMN,
        PrinterColumn("Topic", ".spec.topic", "string", "The target topic.", priority=1),
        PrinterColumn("Not-Found", ".status.keysNotFoundCount", "integer", "Keys the source did not have.", priority=1),
    ),
    root_rules=name_rules("Backfill"),
)

__all__ = [
    "BACKFILL",
    "Backfill",
    "BackfillChildren",
    "BackfillPlan",
    "BackfillSource",
    "BackfillSpec",
    "BackfillStatus",
    "Barrier",
    "BarrierPartition",
    "BarrierStatus",
    "DebeziumSignalStatus",
    "DebeziumSource",
    "JobSource",
    "KeyPartitionPlan",
    "KeysFrom",
    "OffsetRange",
    "TopicSource",
]
