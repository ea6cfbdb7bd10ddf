"""The Reconsume kind: a consumer-side replay of retained Kafka history for one service.

Its three modes are seed 000's three approaches to reconsuming:
- Rewind: the live group itself is rewound (the live Deployment is scaled to zero, its offsets are moved
  to the start, and it is scaled back). Reprise runs no consumers of its own, so `consumer` is refused and
  `liveDeployment` names the Deployment to stop. A snapshot of the old offsets is kept for rollback.
- Parallel: a temporary replay group reprocesses history next to the live group until it catches up.
- Handover: the replay group processes history and each partition is handed back to the live group at an
  exact offset, so every record is processed once.
Parallel and Handover need `consumer`, the standby replay-consumer Deployment Reprise runs.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, model_validator

from .common import (
    AGE_COLUMN,
    StatusTime,
    APPROVAL_DESCRIPTION,
    PHASE_COLUMN,
    SUSPEND_DESCRIPTION,
    ApiModel,
    Approval,
    Consumer,
    CreatedInKafka,
    Filter,
    GroupId,
    KafkaConnection,
    KindDefinition,
    LocalObjectReference,
    Plan,
    PrinterColumn,
    Progress,
    REGISTRY_ENCODINGS,
    RecordEncoding,
    RecordFormat,
    SchemaRegistryConnection,
    ReplayCleanup,
    ResourceStatus,
    Start,
    StatusModel,
    TopicName,
    immutable,
    ResourceObject,
    name_rules,
    presence_immutable,
    rule,
    validations,
)
from .verify import ReconsumeCompletion, VerificationStatus, Verify, check_verify, verify_rules


class ReconsumeMode(str, Enum):
    """How the history is replayed (seed 000's approaches 1, 2 and 3)."""

    REWIND = "Rewind"
    PARALLEL = "Parallel"
    HANDOVER = "Handover"


MODE_DESCRIPTION = (
    "Rewind: move the live group's offsets back to the start and let the live service reprocess "
    "everything (needs liveDeployment, refuses consumer). Parallel: a temporary replay group reprocesses "
    "history next to the live group until it catches up; records after the start are processed by both. "
    "Handover: the replay group processes history and hands each partition back to the live group at an "
    "exact offset, so each record is processed once (the live service must embed Reprise's handover "
    "guard). Parallel and Handover need consumer. Immutable."
)
TOPICS_DESCRIPTION = "The topics to replay, as the live group consumes them. Immutable."

_TOPICS_FIELD: dict[str, Any] = dict(
    min_length=1,
    max_length=100,
    description=TOPICS_DESCRIPTION,
    json_schema_extra={
        "x-kubernetes-list-type": "set",
        **immutable("spec.topics"),
    },
)


def mode_rules(parent: str, *, consumer_required: bool) -> list[dict[str, str]]:
    """The rules tying the mode to consumer, liveDeployment, filter and replayGroup.

    `consumer_required` is False for LakeReplay's then.reconsume, which may inherit the LakeReplay's
    consumer.
    """
    rules = [
        rule(
            "self.mode != 'Rewind' || !has(self.consumer)",
            f"{parent}.consumer: not allowed with mode Rewind, which replays the live group in place and "
            f"runs no replay consumers; name the live Deployment in {parent}.liveDeployment",
            field_path=".consumer",
            reason="FieldValueForbidden",
        ),
        rule(
            "self.mode != 'Rewind' || has(self.liveDeployment)",
            f"{parent}.liveDeployment: required with mode Rewind (the Deployment that runs the live group, "
            "which Reprise scales to zero while it moves the offsets)",
            field_path=".liveDeployment",
            reason="FieldValueRequired",
        ),
        rule(
            "self.mode == 'Rewind' || !has(self.liveDeployment)",
            f"{parent}.liveDeployment: only used with mode Rewind; Parallel and Handover leave the live "
            "Deployment running",
            field_path=".liveDeployment",
            reason="FieldValueForbidden",
        ),
        rule(
            "self.mode != 'Rewind' || !has(self.filter)",
            f"{parent}.filter: not allowed with mode Rewind, where the live consumers read every record",
            field_path=".filter",
            reason="FieldValueForbidden",
        ),
        rule(
            "self.mode != 'Rewind' || !has(self.replayGroup)",
            f"{parent}.replayGroup: not allowed with mode Rewind, which uses the live group",
            field_path=".replayGroup",
            reason="FieldValueForbidden",
        ),
    ]
    if consumer_required:
        rules.append(
            rule(
                "self.mode == 'Rewind' || has(self.consumer)",
                f"{parent}.consumer: required with modes Parallel and Handover (the standby replay "
                "consumers Reprise runs)",
                field_path=".consumer",
                reason="FieldValueRequired",
            )
        )
    return rules


def check_mode(
    parent: str,
    mode: ReconsumeMode,
    consumer: Any,
    live_deployment: Any,
    filter_: Any,
    replay_group: Any,
    *,
    consumer_required: bool,
) -> None:
    """The Python mirror of `mode_rules`."""
    if mode is ReconsumeMode.REWIND:
        if consumer is not None:
            raise ValueError(f"{parent}.consumer: not allowed with mode Rewind")
        if live_deployment is None:
            raise ValueError(f"{parent}.liveDeployment: required with mode Rewind")
        if filter_ is not None:
            raise ValueError(f"{parent}.filter: not allowed with mode Rewind")
        if replay_group is not None:
            raise ValueError(f"{parent}.replayGroup: not allowed with mode Rewind")
    else:
        if live_deployment is not None:
            raise ValueError(f"{parent}.liveDeployment: only used with mode Rewind")
        if consumer_required and consumer is None:
            raise ValueError(f"{parent}.consumer: required with modes Parallel and Handover")


_OFFSETS_IN_TOPICS = rule(
    "!has(self.start.offsets) || self.start.offsets.all(o, o.topic in self.topics)",
    "spec.start.offsets: every topic must be one of spec.topics",
    field_path=".start.offsets",
)

_REPLAY_GROUP_NOT_LIVE = rule(
    "!has(self.replayGroup) || self.replayGroup != self.consumerGroup",
    "spec.replayGroup: must not be the live group spec.consumerGroup",
    field_path=".replayGroup",
)


_SCHEMA_FORMATS = "['avro', 'protobuf']"
#: The format rules, in CEL (the API server) and in `check_format` (the models): the same refusals, each
#: naming the field to change.
_FORMAT_MESSAGES = {
    "raw-fields": "spec.filter.jsonFields: raw values (spec.format.value: raw) have no fields; filter on headers "
    "or keys, or declare the values' format (json, avro, protobuf)",
    "no-registry": "spec.schemaRegistry: required when spec.format.value is avro or protobuf (records are read "
    "by schema id)",
    "schema-keys": "spec.filter.keys: compares a key's bytes with the UTF-8 of the keys listed, so it cannot "
    "match avro or protobuf keys (spec.format.key); filter on value fields instead",
    "service-schemas": "spec.format.value: avro and protobuf values are not supported yet by the Java and Go "
    "replay roles and guards (consumer.entrypoint: Service); use entrypoint ReplayWorker (docs/schemas.md)",
}
_FORMAT_RULES = (
    rule(
        "self.format.value != 'raw' || !has(self.filter) || !has(self.filter.jsonFields)",
        _FORMAT_MESSAGES["raw-fields"],
        field_path=".filter",
    ),
    rule(
        f"!(self.format.value in {_SCHEMA_FORMATS}) || has(self.schemaRegistry)",
        _FORMAT_MESSAGES["no-registry"],
        field_path=".format",
    ),
    rule(
        f"!(self.format.key in {_SCHEMA_FORMATS}) || !has(self.filter) || !has(self.filter.keys)",
        _FORMAT_MESSAGES["schema-keys"],
        field_path=".filter",
    ),
    rule(
        f"!(self.format.value in {_SCHEMA_FORMATS}) || !has(self.consumer) || !has(self.consumer.entrypoint) "
        "|| self.consumer.entrypoint != 'Service'",
        _FORMAT_MESSAGES["service-schemas"],
        field_path=".format",
    ),
)


def check_format(
    record_format: RecordFormat,
    registry: SchemaRegistryConnection | None,
    record_filter: Filter | None,
    consumer: Consumer | None,
) -> None:
    """`_FORMAT_RULES` on the models (for specs validated outside the API server, and the same words)."""
    if record_format.value is RecordEncoding.RAW and record_filter is not None and record_filter.json_fields:
        raise ValueError(_FORMAT_MESSAGES["raw-fields"])
    if record_format.value in REGISTRY_ENCODINGS and registry is None:
        raise ValueError(_FORMAT_MESSAGES["no-registry"])
    if record_format.key in REGISTRY_ENCODINGS and record_filter is not None and record_filter.keys:
        raise ValueError(_FORMAT_MESSAGES["schema-keys"])
    if record_format.value in REGISTRY_ENCODINGS and consumer is not None and consumer.entrypoint.value == "Service":
        raise ValueError(_FORMAT_MESSAGES["service-schemas"])


class ReconsumeSpec(ApiModel):
    """What to replay, how, and with which consumers."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            *mode_rules("spec", consumer_required=True),
            _OFFSETS_IN_TOPICS,
            _REPLAY_GROUP_NOT_LIVE,
            *verify_rules("spec"),
            *presence_immutable("spec", "filter", "replayGroup", "liveDeployment", "schemaRegistry"),
            *_FORMAT_RULES,
        )
    )

    kafka: KafkaConnection = Field(description="The Kafka cluster that holds the topics.")
    topics: list[TopicName] = Field(**_TOPICS_FIELD)
    consumer_group: GroupId = Field(
        description=(
            "The live service's consumer group. Rewind moves its offsets; Parallel and Handover read its "
            "position and never change it. Immutable."
        ),
        json_schema_extra=immutable("spec.consumerGroup"),
    )
    mode: ReconsumeMode = Field(description=MODE_DESCRIPTION, json_schema_extra=immutable("spec.mode"))
    start: Start = Field(
        description=(
            "Where the replay starts, per partition: exactly one of timestamp, duration, earliest or "
            "offsets, plus allowClamp for starts older than retention. Immutable."
        ),
        json_schema_extra=immutable("spec.start"),
    )
    filter: Optional[Filter] = Field(
        default=None,
        description=(
            "Which records the replay consumers process (Parallel and Handover); the others are skipped "
            "but still count as consumed. All criteria given must match. Unset: all records. Immutable."
        ),
        json_schema_extra=immutable("spec.filter"),
    )
    format: RecordFormat = Field(
        default_factory=RecordFormat,
        description=(
            "How the topics' keys and values are written (json, avro, protobuf, raw); filter.jsonFields read "
            "the value decoded in its format. Default: raw keys, JSON values. Immutable."
        ),
        json_schema_extra={"default": {}, **immutable("spec.format")},
    )
    schema_registry: Optional[SchemaRegistryConnection] = Field(
        default=None,
        description=(
            "The schema registry that holds the schemas of avro and protobuf records (required with them): "
            "the replay and the guard read each record with its writer's schema, by id. Immutable."
        ),
        json_schema_extra=immutable("spec.schemaRegistry"),
    )
    consumer: Optional[Consumer] = Field(
        default=None,
        description=(
            "The standby replay consumers (Parallel and Handover): a Deployment Reprise creates from the "
            "live Deployment's pod template or the template given, and deletes when done."
        ),
    )
    live_deployment: Optional[LocalObjectReference] = Field(
        default=None,
        description=(
            "Rewind only: the Deployment whose pods form the live consumer group. Reprise scales it to "
            "zero, waits until the group is Empty, moves the offsets, and scales it back to its replica "
            "count. Immutable."
        ),
        json_schema_extra=immutable("spec.liveDeployment"),
    )
    replay_group: Optional[GroupId] = Field(
        default=None,
        description=(
            "Parallel and Handover: the temporary consumer group of the replay consumers, which Reprise "
            "creates and deletes when done. Default: reprise.<namespace>.<name>. It must not be the live "
            "group, and a group that already has members or committed offsets is refused when planning "
            "(it is someone's). Immutable."
        ),
        json_schema_extra=immutable("spec.replayGroup"),
    )
    approval: Approval = Field(default=Approval.AUTOMATIC, description=APPROVAL_DESCRIPTION)
    completion: ReconsumeCompletion = Field(
        default_factory=ReconsumeCompletion,
        description="When the replay counts as finished, and whether it holds for the cutover (Parallel).",
        json_schema_extra={"default": {}},
    )
    verify: Optional[Verify] = Field(
        default=None,
        description=(
            "Parallel and Handover: a check Reprise runs as a Job once the replay caught up (the shadow "
            "pattern's go/no-go step). Passing lets the replay complete; failing ends it Failed with reason "
            "VerifyFailed and keeps its children; the annotation reprise.io/reverify=<any new value> runs "
            "the check again."
        ),
    )
    cleanup: ReplayCleanup = Field(
        default_factory=ReplayCleanup,
        description="What Reprise removes after the replay finished.",
        json_schema_extra={"default": {}},
    )
    suspend: bool = Field(default=False, description=SUSPEND_DESCRIPTION)

    @model_validator(mode="after")
    def _rules(self) -> "ReconsumeSpec":
        check_mode(
            "spec",
            self.mode,
            self.consumer,
            self.live_deployment,
            self.filter,
            self.replay_group,
            consumer_required=True,
        )
        if self.start.offsets and any(o.topic not in self.topics for o in self.start.offsets):
            raise ValueError("spec.start.offsets: every topic must be one of spec.topics")
        if self.replay_group is not None and self.replay_group == self.consumer_group:
            raise ValueError("spec.replayGroup: must not be the live group spec.consumerGroup")
        check_verify(
            "spec",
            self.mode.value,
            self.verify,
            self.completion,
            self.consumer.entrypoint.value if self.consumer is not None else None,
        )
        check_format(self.format, self.schema_registry, self.filter, self.consumer)
        return self


class SnapshotOffset(StatusModel):
    """A committed offset of one partition."""

    topic: str = Field(description="Kafka topic name.")
    partition: int = Field(ge=0, description="Partition number.")
    offset: int = Field(ge=0, description="The committed offset.")


class RollbackSnapshot(StatusModel):
    """Rewind: the live group's offsets before Reprise moved them, to undo the rewind by hand."""

    config_map: Optional[str] = Field(
        default=None,
        description=(
            "The ConfigMap holding the same offsets as a kafka-consumer-groups --reset-offsets --from-file "
            "CSV; it is kept after the resource is deleted."
        ),
    )
    taken_at: Optional[StatusTime] = Field(default=None, description="When the snapshot was taken.")
    deployment_replicas: Optional[int] = Field(
        default=None, ge=0, description="The live Deployment's replica count before it was scaled to zero."
    )
    offsets: list[SnapshotOffset] = Field(
        default_factory=list, description="The live group's committed offset per partition before the rewind."
    )


class ReconsumeChildren(StatusModel):
    """What Reprise made for this replay (and deletes when done)."""

    deployment: Optional[str] = Field(default=None, description="The standby replay-consumer Deployment.")
    replay_group: Optional[str] = Field(default=None, description="The temporary consumer group in Kafka.")
    handover_topic: Optional[str] = Field(
        default=None, description="Handover: the compacted topic holding the per-partition handover records."
    )
    config_maps: list[str] = Field(default_factory=list, description="ConfigMaps Reprise created.")


class ReconsumeStatus(ResourceStatus):
    """What the operator observed and did. Written by Reprise only."""

    children: ReconsumeChildren = Field(
        default_factory=ReconsumeChildren, description="What Reprise made for this replay."
    )
    plan: Optional[Plan] = Field(default=None, description="The computed plan, per partition.")
    progress: Optional[Progress] = Field(default=None, description="How far the replay is, per partition.")
    rollback: Optional[RollbackSnapshot] = Field(
        default=None, description="Rewind: the live group's offsets before the rewind."
    )
    verification: Optional[VerificationStatus] = Field(
        default=None, description="spec.verify: the go/no-go check's state."
    )
    created: Optional[CreatedInKafka] = Field(
        default=None,
        description=(
            "What Reprise created in Kafka (the replay group): deleted when done, and nothing else is. Absent "
            "on a replay an older operator started, whose group is then left in place."
        ),
    )


class Reconsume(ResourceObject):
    """A whole Reconsume object."""

    kind: Literal["Reconsume"] = Field(default="Reconsume", description="Kind.")
    spec: ReconsumeSpec = Field(description="Desired replay.")
    status: Optional[ReconsumeStatus] = Field(default=None, description="Observed state.")


RECONSUME = KindDefinition(
    kind="Reconsume",
    plural="reconsumes",
    singular="reconsume",
    short_names=("rcs",),
    description=(
        "Reconsume replays a service's retained Kafka history, consumer-side: by rewinding the live group "
        "(Rewind), by a temporary replay group next to it (Parallel), or by a replay group that hands each "
        "partition back to the live group at an exact offset (Handover)."
    ),
    spec=ReconsumeSpec,
    status=ReconsumeStatus,
    printer_columns=(
        PHASE_COLUMN,
        PrinterColumn("Mode", ".spec.mode", "string", "Rewind, Parallel or Handover."),
        PrinterColumn("Progress", ".status.progress.percent", "integer", "Percent of planned records consumed."),
        PrinterColumn("Lag", ".status.progress.lag", "integer", "Records still to consume."),
        PrinterColumn("ETA", ".status.progress.eta", "string", "Estimated time until drained."),
        PrinterColumn(
            "Verified", ".status.verification.state", "string", "spec.verify: Waiting, Running, Passed or Failed."
        ),
        AGE_COLUMN,
        PrinterColumn("Group", ".spec.consumerGroup", "string", "The live consumer group.", priority=1),
        PrinterColumn("Started", ".status.startedAt", "date", "When the replay started.", priority=1),
    ),
    root_rules=name_rules("Reconsume"),
)

__all__ = [
    "RECONSUME",
    "Reconsume",
    "ReconsumeChildren",
    "ReconsumeMode",
    "ReconsumeSpec",
    "ReconsumeStatus",
    "RollbackSnapshot",
    "SnapshotOffset",
]
