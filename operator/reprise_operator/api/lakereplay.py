"""The LakeReplay kind: history that has left Kafka, read from the data lake by Spark (seed 001's "ETL
bridge").

A Spark application reads the time range from the lake, evolves each record to the latest schema, and
writes the records, in per-key order, to a temporary backfill topic; a drain consumer (a clone of the
service, as for Reconsume) consumes that topic. With `then.reconsume`, the replay continues on the live
Kafka topics from the offsets matching the lake's end time and hands over to the live group, so one
resource covers the whole journey from the lake, through Kafka, to live.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any, Literal, Optional

from pydantic import AwareDatetime, ConfigDict, Field, model_validator

from .common import (
    AGE_COLUMN,
    StatusTime,
    APPROVAL_DESCRIPTION,
    PHASE_COLUMN,
    SUSPEND_DESCRIPTION,
    ApiModel,
    Approval,
    Completion,
    ConfigMapKeyReference,
    Consumer,
    CreatedInKafka,
    Duration,
    Filter,
    GroupId,
    KafkaConnection,
    KindDefinition,
    NO_WHITESPACE,
    LocalObjectReference,
    Phase,
    PHASE_DESCRIPTION,
    Plan,
    PrinterColumn,
    Progress,
    ReplayCleanup,
    ResourceStatus,
    SecretReference,
    StatusModel,
    TopicName,
    immutable,
    ResourceObject,
    name_rules,
    presence_immutable,
    rule,
    validations,
)
from . import spark_conf
from .verify import VerificationStatus, Verify
from .reconsume import MODE_DESCRIPTION, TOPICS_DESCRIPTION, ReconsumeMode, check_mode, mode_rules


class LakeFormat(str, Enum):
    """The table format of the lake data."""

    PARQUET = "parquet"
    JSON = "json"
    AVRO = "avro"
    DELTA = "delta"
    ICEBERG = "iceberg"


ConfValue = Annotated[str, Field(max_length=4096)]
ColumnName = dict(min_length=1, max_length=256, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")


class LakeSchema(ApiModel):
    """The latest schema records are evolved to, and how older records map onto it."""

    config_map_ref: ConfigMapKeyReference = Field(
        description=(
            "A ConfigMap key holding the latest schema as JSON: an Avro record schema or a Spark StructType. "
            "Records written under older schemas are evolved to it: missing fields get defaults, renamed "
            "fields are mapped, types are widened."
        )
    )
    renames: Optional[dict[str, Annotated[str, Field(max_length=256)]]] = Field(
        default=None,
        max_length=64,
        description="Old field name to its name in the latest schema, for fields that were renamed.",
    )
    defaults: Optional[dict[str, ConfValue]] = Field(
        default=None,
        max_length=64,
        description=(
            'Field of the latest schema to the value (as JSON text, for example "0" or "\\"en\\"") '
            "it gets in records written before it existed; overrides the schema's own default."
        ),
    )


ENV_NAME = dict(min_length=1, max_length=253, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class S3Credentials(ApiModel):
    """The Secret keys holding the access key id and the secret access key of the object store."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="Name of the Secret, in the resource's own namespace.",
    )
    access_key_id_key: str = Field(
        default="AWS_ACCESS_KEY_ID", **ENV_NAME, description="Key of the access key id in the Secret."
    )
    secret_access_key_key: str = Field(
        default="AWS_SECRET_ACCESS_KEY", **ENV_NAME, description="Key of the secret access key in the Secret."
    )


class S3Access(ApiModel):
    """How the Spark job reaches an S3-compatible store for an s3a:// source."""

    endpoint: Optional[str] = Field(
        default=None,
        min_length=1,
        max_length=512,
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description="The S3 endpoint URL, for example http://s3proxy.storage:9400; unset: AWS's own for the region.",
    )
    region: Optional[str] = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9-]+$",
        description="The store's region (fs.s3a.endpoint.region); S3-compatible stores usually take us-east-1.",
    )
    path_style_access: bool = Field(
        default=False,
        description="Address buckets as <endpoint>/<bucket> rather than <bucket>.<endpoint> (most non-AWS stores).",
    )
    credentials_secret_ref: Optional[S3Credentials] = Field(
        default=None,
        description=(
            "The Secret with the access key id and secret access key, given to the driver and executors as "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; unset: the pods' own AWS identity (for example IRSA)."
        ),
    )


class AsOf(ApiModel):
    """A Delta or Iceberg table as it was: at a version (Delta) or snapshot id (Iceberg), or at a time."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            rule(
                "has(self.version) != has(self.timestamp)",
                "spec.source.asOf: give exactly one of version and timestamp",
            )
        )
    )

    version: Optional[int] = Field(
        default=None, ge=0, description="The Delta table version, or the Iceberg snapshot id, to read."
    )
    timestamp: Optional[AwareDatetime] = Field(
        default=None, description="Read the table as it was at this RFC 3339 time."
    )

    @model_validator(mode="after")
    def _one(self) -> "AsOf":
        if (self.version is None) == (self.timestamp is None):
            raise ValueError("spec.source.asOf: give exactly one of version and timestamp")
        return self


_AVRO_NEEDS_SCHEMA = (
    "spec.source.schema is required for format avro: Avro files are always read with the latest schema as the "
    "reader schema (an Avro record schema in spec.source.schema.configMapRef)"
)
_S3_NEEDS_S3A = "spec.source.s3 is only for an s3a:// spec.source.uri"
_AS_OF_TABLES = "spec.source.asOf is only for format delta or iceberg"


class LakeSource(ApiModel):
    """Where the history is in the lake, and which part of it to replay."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            rule(
                "!has(self.from) || self.from < self.to",
                "spec.source.from must be before spec.source.to",
                field_path=".from",
            ),
            rule(
                "!has(self.format) || self.format != 'avro' || has(self.schema)",
                _AVRO_NEEDS_SCHEMA,
                field_path=".schema",
            ),
            rule("!has(self.s3) || self.uri.startsWith('s3a://')", _S3_NEEDS_S3A, field_path=".s3"),
            rule(
                "!has(self.asOf) || (has(self.format) && (self.format == 'delta' || self.format == 'iceberg'))",
                _AS_OF_TABLES,
                field_path=".asOf",
            ),
        )
    )

    uri: str = Field(
        min_length=1,
        max_length=2048,
        pattern=r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$",
        description="Hadoop URI of the table, for example s3a://lake/events/users/ (file:// in tests).",
    )
    format: LakeFormat = Field(
        default=LakeFormat.PARQUET,
        description=(
            "parquet (default), json, avro (files, read with spec.source.schema as the reader schema), delta or "
            "iceberg; avro, delta and iceberg need their Spark packages in the image."
        ),
    )
    s3: Optional[S3Access] = Field(
        default=None, description="Endpoint, addressing and credentials of the object store of an s3a:// uri."
    )
    as_of: Optional[AsOf] = Field(
        default=None,
        alias="asOf",
        description="Delta and Iceberg: replay the table as it was at a version or a time (time travel).",
    )
    timestamp_column: str = Field(
        **ColumnName,
        description="The column with each record's event time: it bounds the range and orders records per key.",
    )
    key_column: str = Field(
        **ColumnName, description="The column that becomes the Kafka record key (per-key order is kept)."
    )
    partition_column: Optional[str] = Field(
        default=None,
        **ColumnName,
        description=(
            "A date column the table is partitioned by (for example day): Reprise prunes partitions to the "
            "from..to range through it, so only the needed files are read."
        ),
    )
    from_: Optional[AwareDatetime] = Field(
        default=None,
        alias="from",
        description="Replay records with event time at or after this RFC 3339 time; unset: from the oldest.",
    )
    to: AwareDatetime = Field(
        description=(
            "Replay records with event time before this RFC 3339 time. With then.reconsume, the live topics "
            "continue from the offsets matching this time."
        )
    )
    filter: Optional[str] = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A Spark SQL boolean expression records must satisfy, for example event_type IN ('UserCreated').",
    )
    schema_: Optional[LakeSchema] = Field(
        default=None,
        alias="schema",
        description="The latest schema to evolve records to; unset: records are written as read.",
    )

    @model_validator(mode="after")
    def _range(self) -> "LakeSource":
        if self.from_ is not None and not self.from_ < self.to:
            raise ValueError("spec.source.from must be before spec.source.to")
        if self.format == LakeFormat.AVRO and self.schema_ is None:
            raise ValueError(_AVRO_NEEDS_SCHEMA)
        if self.s3 is not None and not self.uri.startswith("s3a://"):
            raise ValueError(_S3_NEEDS_S3A)
        if self.as_of is not None and self.format not in (LakeFormat.DELTA, LakeFormat.ICEBERG):
            raise ValueError(_AS_OF_TABLES)
        return self


class BackfillTopic(ApiModel):
    """The temporary topic the Spark application writes to and the drain consumer reads."""

    name: Optional[TopicName] = Field(
        default=None,
        description="Topic name; default <namespace>.<name>.reprise-backfill. Created and deleted by Reprise.",
    )
    partitions: Optional[int] = Field(
        default=None,
        ge=1,
        le=10_000,
        description=(
            "Partition count; default: that of the first of then.reconsume.topics, else 12. Keep it equal "
            "to the live topic's so keys land on the same partition numbers."
        ),
    )
    replication_factor: Optional[int] = Field(
        default=None, ge=1, le=32, description="Replication factor; default: the broker's default."
    )
    retention: Optional[Duration] = Field(
        default=None,
        description="retention.ms of the topic as a Go duration; default 168h (it only lives for the replay).",
    )


MEMORY = dict(max_length=16, pattern=r"^[0-9]+([kmgtKMGT][bB]?)?$")


class SparkDriver(ApiModel):
    """The Spark driver pod."""

    cores: int = Field(default=1, ge=1, le=64, description="CPU cores.")
    memory: str = Field(default="1g", **MEMORY, description="Memory in Spark notation, for example 512m or 2g.")
    service_account: Optional[str] = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="Service account of the driver (it creates the executor pods); default: the operator's setting.",
    )


class SparkExecutor(ApiModel):
    """The Spark executor pods."""

    instances: int = Field(default=2, ge=1, le=1000, description="Number of executors.")
    cores: int = Field(default=1, ge=1, le=64, description="CPU cores per executor.")
    memory: str = Field(default="2g", **MEMORY, description="Memory per executor in Spark notation, for example 4g.")


class SparkRetries(ApiModel):
    """How often the Spark operator runs the application again after its driver failed (restartPolicy OnFailure).

    The job is resumable: a retry skips the days already written, so a retry only costs time. The n-th retry
    waits n x intervalSeconds after the failure, as the Spark operator counts it."""

    on_failure: int = Field(default=3, ge=0, le=10, description="Retries after the driver failed; 0: none.")
    interval_seconds: int = Field(
        default=10, ge=1, le=3600, description="Seconds before the first retry; the n-th retry waits n times this."
    )


_CREDENTIAL_KEY = "(password|secret|token|credential|access[.]key)"


def _no_inline_credentials(path: str) -> dict[str, str]:
    return rule(
        f"self.all(k, !k.lowerAscii().matches('{_CREDENTIAL_KEY}'))",
        f"{path}: must not hold credentials inline (a key names a password, secret, token, credential or "
        "access key); put them in a Secret listed in spec.spark.envFrom",
    )


class SparkEnvFrom(ApiModel):
    """A Secret exported as environment variables."""

    secret_ref: SecretReference = Field(description="The Secret, in the resource's own namespace.")


class SparkSpec(ApiModel):
    """The Spark application (Kubeflow Spark Operator v1beta2 SparkApplication) Reprise runs."""

    image: Optional[str] = Field(
        default=None,
        min_length=1,
        max_length=512,
        pattern=NO_WHITESPACE,
        description="Container image with Spark and Reprise's spark_app; default: the operator's setting.",
    )
    spark_version: Optional[str] = Field(
        default=None,
        max_length=32,
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="Spark version of the image, for example 4.1.1; default: the operator's setting.",
    )
    driver: SparkDriver = Field(
        default_factory=SparkDriver, description="The driver pod.", json_schema_extra={"default": {}}
    )
    executor: SparkExecutor = Field(
        default_factory=SparkExecutor, description="The executor pods.", json_schema_extra={"default": {}}
    )
    max_records_per_second: Optional[int] = Field(
        default=None,
        ge=1,
        le=100_000_000,
        description="Upper bound on the records written to the backfill topic per second; unset: unlimited.",
    )
    retries: SparkRetries = Field(
        default_factory=SparkRetries, description="Retries after a failed driver.", json_schema_extra={"default": {}}
    )
    spark_conf: Optional[dict[str, ConfValue]] = Field(
        default=None,
        max_length=64,
        description=(
            "Extra Spark configuration: only keys on the allow-list (docs/lakereplay.md, section sparkConf): "
            "spark.sql.*, shuffle, memory, serialiser and network tuning. Keys that would change where, how or as "
            "whom the driver runs (spark.kubernetes.*, spark.master, images, pod templates, jars, Java options) are "
            "refused. No credentials: use envFrom."
        ),
        json_schema_extra=validations(_no_inline_credentials("spec.spark.sparkConf"), spark_conf.sparkconf_rule()),
    )
    hadoop_conf: Optional[dict[str, ConfValue]] = Field(
        default=None,
        max_length=64,
        description="Extra Hadoop configuration, for example fs.s3a.endpoint. No credentials: use envFrom.",
        json_schema_extra=validations(_no_inline_credentials("spec.spark.hadoopConf")),
    )
    env_from: Optional[list[SparkEnvFrom]] = Field(
        default=None,
        max_length=8,
        description=(
            "Secrets whose keys become environment variables of the driver and executors, for example "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for s3a."
        ),
    )

    @model_validator(mode="after")
    def _settings_allowed(self) -> "SparkSpec":
        # The allow-list first: it names the key and why, also for a key that looks like a credential.
        refused = spark_conf.refusal(self.spark_conf)
        if refused is not None:
            raise ValueError(refused)
        for alias, conf in (("sparkConf", self.spark_conf), ("hadoopConf", self.hadoop_conf)):
            for key in conf or {}:
                if re.search(_CREDENTIAL_KEY, key.lower()):
                    raise ValueError(f"spec.spark.{alias}: must not hold credentials inline ({key})")
        return self


class ThenReconsume(ApiModel):
    """The Reconsume that continues on the live topics where the lake ends (its start is spec.source.to)."""

    model_config = ConfigDict(
        json_schema_extra=validations(*mode_rules("spec.then.reconsume", consumer_required=False))
    )

    topics: list[TopicName] = Field(
        min_length=1,
        max_length=100,
        description=TOPICS_DESCRIPTION,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    consumer_group: GroupId = Field(description="The live service's consumer group.")
    mode: ReconsumeMode = Field(
        default=ReconsumeMode.HANDOVER,
        description=MODE_DESCRIPTION.replace("Parallel and Handover need consumer.", "Default Handover."),
    )
    filter: Optional[Filter] = Field(
        default=None, description="Which records the replay consumers process on the live topics. Unset: all."
    )
    consumer: Optional[Consumer] = Field(
        default=None,
        description="The replay consumers on the live topics (Parallel, Handover); default: spec.consumer.",
    )
    live_deployment: Optional[LocalObjectReference] = Field(
        default=None, description="Rewind only: the Deployment that runs the live group."
    )
    replay_group: Optional[GroupId] = Field(
        default=None, description="Parallel and Handover: the temporary group on the live topics; default derived."
    )
    completion: Completion = Field(
        default_factory=Completion,
        description="When the continuation counts as finished.",
        json_schema_extra={"default": {}},
    )

    @model_validator(mode="after")
    def _rules(self) -> "ThenReconsume":
        check_mode(
            "spec.then.reconsume",
            self.mode,
            self.consumer,
            self.live_deployment,
            self.filter,
            self.replay_group,
            consumer_required=False,
        )
        return self


class Then(ApiModel):
    """What follows the lake replay."""

    reconsume: ThenReconsume = Field(
        description="Continue on the live Kafka topics from the lake's end time, as a Reconsume does."
    )


class LakeReplayCleanup(ReplayCleanup):
    """What Reprise removes after the LakeReplay finished."""

    delete_backfill_topic: bool = Field(
        default=True, description="Delete the backfill topic when done. false keeps it for inspection."
    )


#: The drain group's old name, refused with the new one named: "consumerGroup" is the live service's group
#: everywhere else (Reconsume, then.reconsume), and a live group given here got drain members and was deleted.
RENAMED_DRAIN_GROUP = (
    "spec.consumerGroup: renamed spec.drainGroup, the drain consumers' own new group on the backfill topic "
    "(Reprise creates it and deletes it when done); the live service's group goes in "
    "spec.then.reconsume.consumerGroup"
)


def _drain_group_rules(schema: dict[str, Any]) -> None:
    """The spec's CEL rules. drainGroup is required by a rule, not by `required`: the API server runs the CEL
    rules only once every other check passed, so a manifest written for the old name (consumerGroup, no
    drainGroup) would only hear "drainGroup: Required value", never that consumerGroup is the name it replaced."""
    schema["required"] = [name for name in schema.get("required", []) if name != "drainGroup"]
    schema.update(
        validations(
            *presence_immutable("spec", "then"),
            rule(
                "has(self.drainGroup)",
                "spec.drainGroup: required: the drain consumers' own new group on the backfill topic",
                field_path=".drainGroup",
                reason="FieldValueRequired",
            ),
            rule(
                "!has(self.consumerGroup)",
                RENAMED_DRAIN_GROUP,
                field_path=".consumerGroup",
                reason="FieldValueForbidden",
            ),
        )
    )


class LakeReplaySpec(ApiModel):
    """Which history to read from the lake, how to write it to Kafka, and who consumes it."""

    model_config = ConfigDict(json_schema_extra=_drain_group_rules)

    kafka: KafkaConnection = Field(description="The Kafka cluster of the backfill topic (and the live topics).")
    source: LakeSource = Field(
        description="Where the history is in the lake and which range to replay. Immutable.",
        json_schema_extra=immutable("spec.source"),
    )
    backfill_topic: BackfillTopic = Field(
        default_factory=BackfillTopic,
        description="The temporary topic between Spark and the drain consumer. Immutable.",
        json_schema_extra={"default": {}, **immutable("spec.backfillTopic")},
    )
    spark: SparkSpec = Field(
        default_factory=SparkSpec,
        description="The Spark application; changes apply when it is (re)submitted.",
        json_schema_extra={"default": {}},
    )
    consumer: Consumer = Field(
        description="The drain consumers of the backfill topic: a clone of the service, as for Reconsume."
    )
    drain_group: GroupId = Field(
        description=(
            "The drain consumers' consumer group on the backfill topic: a new group, which Reprise creates "
            "and deletes when done. Never the live service's group (that is then.reconsume.consumerGroup); a "
            "group that already has members or committed offsets is refused when planning. Immutable."
        ),
        json_schema_extra=immutable("spec.drainGroup"),
    )
    consumer_group: Optional[Annotated[str, Field(max_length=255)]] = Field(
        default=None,
        description="Renamed drainGroup; refused (kept in the schema only to say so).",
    )
    then: Optional[Then] = Field(
        default=None,
        description="Continue on the live topics after the lake (the lake-to-Kafka seam). Immutable.",
        json_schema_extra=immutable("spec.then"),
    )
    approval: Approval = Field(default=Approval.AUTOMATIC, description=APPROVAL_DESCRIPTION)
    suspend: bool = Field(default=False, description=SUSPEND_DESCRIPTION)
    completion: Completion = Field(
        default_factory=Completion,
        description="When draining the backfill topic counts as finished.",
        json_schema_extra={"default": {}},
    )
    cleanup: LakeReplayCleanup = Field(
        default_factory=LakeReplayCleanup,
        description="What Reprise removes after the LakeReplay finished.",
        json_schema_extra={"default": {}},
    )
    verify: Optional[Verify] = Field(
        default=None,
        description=(
            "A check Reprise runs as a Job once the replay has caught up: the backfill topic drained (and, "
            "with then.reconsume, its continuation complete), before anything is torn down. Passing lets the "
            "LakeReplay complete; failing ends it Failed with reason VerifyFailed and keeps its children; the "
            "annotation reprise.io/reverify=<any new value> runs the check again."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        # Before the fields: a LakeReplay stored by an older release fails with the new name, not "drainGroup
        # missing".
        if isinstance(data, dict) and data.get("consumerGroup", data.get("consumer_group")) is not None:
            raise ValueError(RENAMED_DRAIN_GROUP)
        return data


class SparkStatus(StatusModel):
    """The Spark application, as its controller reports it."""

    application_name: Optional[str] = Field(default=None, description="Name of the SparkApplication.")
    state: Optional[str] = Field(
        default=None,
        max_length=64,
        description=(
            "status.applicationState.state of the SparkApplication: SUBMITTED, RUNNING, COMPLETED, FAILED, "
            "SUBMISSION_FAILED, PENDING_RERUN, ... (empty before it is submitted)."
        ),
    )
    attempts: Optional[int] = Field(default=None, ge=0, description="Submission attempts so far.")
    records_written: Optional[int] = Field(
        default=None, ge=0, description="Records written to the backfill topic (its end offsets summed)."
    )
    updated_at: Optional[StatusTime] = Field(default=None, description="When the state was last read.")


class ContinuationOffset(StatusModel):
    """Where the continuation starts in one live partition."""

    topic: str = Field(description="Kafka topic name.")
    partition: int = Field(ge=0, description="Partition number.")
    offset: int = Field(ge=0, description="The first offset with a timestamp at or after spec.source.to.")


class ContinuationStatus(StatusModel):
    """then.reconsume: the replay on the live topics after the lake."""

    reconsume: Optional[str] = Field(
        default=None, description="The Reconsume Reprise created for the continuation, if it runs as one."
    )
    phase: Optional[Phase] = Field(default=None, description="The continuation's phase. " + PHASE_DESCRIPTION)
    start_offsets: list[ContinuationOffset] = Field(
        default_factory=list, description="The offsets matching spec.source.to on the live topics."
    )


class LakeReplayChildren(StatusModel):
    """What Reprise made for this LakeReplay."""

    backfill_topic: Optional[str] = Field(default=None, description="The temporary backfill topic.")
    spark_application: Optional[str] = Field(default=None, description="The SparkApplication.")
    deployment: Optional[str] = Field(default=None, description="The drain consumer Deployment.")
    replay_group: Optional[str] = Field(
        default=None, description="The drain group on the backfill topic (spec.drainGroup)."
    )
    reconsume: Optional[str] = Field(default=None, description="The Reconsume of then.reconsume, if created.")
    config_maps: list[str] = Field(default_factory=list, description="ConfigMaps Reprise created.")


class LakeReplayStatus(ResourceStatus):
    """What the operator observed and did. Written by Reprise only."""

    children: LakeReplayChildren = Field(
        default_factory=LakeReplayChildren, description="What Reprise made for this LakeReplay."
    )
    plan: Optional[Plan] = Field(
        default=None,
        description="With then.reconsume: the continuation's planned range on the live topics, per partition.",
    )
    progress: Optional[Progress] = Field(
        default=None, description="How far the drain consumer is on the backfill topic, per partition."
    )
    spark: Optional[SparkStatus] = Field(default=None, description="The Spark application's state.")
    continuation: Optional[ContinuationStatus] = Field(default=None, description="then.reconsume's progress.")
    verification: Optional[VerificationStatus] = Field(default=None, description="spec.verify: the check's state.")
    created: Optional[CreatedInKafka] = Field(
        default=None,
        description="What Reprise created in Kafka (the drain group, the backfill topic): deleted when done, and nothing else is.",
    )


class LakeReplay(ResourceObject):
    """A whole LakeReplay object."""

    kind: Literal["LakeReplay"] = Field(default="LakeReplay", description="Kind.")
    spec: LakeReplaySpec = Field(description="Desired lake replay.")
    status: Optional[LakeReplayStatus] = Field(default=None, description="Observed state.")


LAKE_REPLAY = KindDefinition(
    kind="LakeReplay",
    plural="lakereplays",
    singular="lakereplay",
    short_names=("lr",),
    description=(
        "LakeReplay replays history that has left Kafka: a Spark application reads a time range from the "
        "data lake into a temporary backfill topic, a clone of the service drains it, and then.reconsume "
        "optionally continues on the live topics and hands over to the live group."
    ),
    spec=LakeReplaySpec,
    status=LakeReplayStatus,
    printer_columns=(
        PHASE_COLUMN,
        PrinterColumn("Spark", ".status.spark.state", "string", "The Spark application's state."),
        PrinterColumn("Lag", ".status.progress.lag", "integer", "Records still to drain from the backfill topic."),
        PrinterColumn(
            "Verified", ".status.verification.state", "string", "spec.verify: Waiting, Running, Passed or Failed."
        ),
        AGE_COLUMN,
        PrinterColumn("Backfill-Topic", ".status.children.backfillTopic", "string", "The temporary topic.", priority=1),
        PrinterColumn("ETA", ".status.progress.eta", "string", "Estimated time until drained.", priority=1),
    ),
    root_rules=name_rules("LakeReplay"),
)

__all__ = [
    "LAKE_REPLAY",
    "BackfillTopic",
    "ContinuationOffset",
    "ContinuationStatus",
    "LakeFormat",
    "LakeReplay",
    "LakeReplayChildren",
    "LakeReplayCleanup",
    "LakeReplaySpec",
    "LakeReplayStatus",
    "LakeSchema",
    "LakeSource",
    "SparkDriver",
    "SparkEnvFrom",
    "SparkExecutor",
    "SparkSpec",
    "SparkStatus",
    "Then",
    "ThenReconsume",
]
