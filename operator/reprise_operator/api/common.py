"""The pieces the three kinds share: the model base, name and duration types, Kafka connection, start,
filter, consumer, approval, completion, cleanup, conditions, and the status parts every kind reports.

These pydantic models are the single source of truth of the API: `generate.py` turns them into the CRDs,
and the operator parses `spec` with them and builds `status` with them. Python attributes are snake_case,
the YAML is camelCase. Every field carries a description, because that text is what `kubectl explain`
shows the user.

Cross-field rules live twice, on purpose: as CEL (`x-kubernetes-validations`) so the API server rejects a
bad manifest at admission, and as a model validator so a bad object fails in Python too. The CEL text is
the authority; the Python mirror only keeps the operator and the tests honest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from replay_worker.contract import (
    GO_DURATION,
    epoch_ms,
    format_duration,
    parse_go_duration,
    rfc3339,
    rfc3339_ms,
    service_unsupported,
    service_unsupported_asked,
)

GROUP = "reprise.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
#: `kubectl get replays` lists every kind in this category.
CATEGORY = "replays"


# ---------------------------------------------------------------------------------------------------
# CEL rules


def rule(
    expression: str,
    message: str,
    *,
    field_path: str | None = None,
    reason: str | None = None,
) -> dict[str, str]:
    """One `x-kubernetes-validations` entry. The message must name the field it is about.

    `field_path` (a path relative to the object the rule sits on, such as `.consumer`) makes the API
    server report the error at that field instead of at the object; `reason` is one of FieldValueInvalid,
    FieldValueForbidden, FieldValueRequired, FieldValueDuplicate.
    """
    entry = {"rule": expression, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return entry


def validations(*rules: dict[str, str]) -> dict[str, Any]:
    """`json_schema_extra` that attaches CEL rules to a field or a model."""
    return {"x-kubernetes-validations": list(rules)}


#: Marks a field immutable in its schema; `openapi.py` turns it into a `self == oldSelf` rule appended to the
#: field's other rules (a second `x-kubernetes-validations` in json_schema_extra would replace the first).
IMMUTABLE_KEY = "x-reprise-immutable"


def immutable(path: str) -> dict[str, Any]:
    """`json_schema_extra` for a replay-defining field: once created, it cannot change.

    A transition rule only runs when the old object had the field, so adding or removing an optional
    immutable field is guarded separately, by `presence_immutable` on the parent.
    """
    return {IMMUTABLE_KEY: path}


def immutable_rule(path: str) -> dict[str, str]:
    return rule("self == oldSelf", f"{path} is immutable: create a new resource to replay something else")


def presence_immutable(parent: str, *names: str) -> list[dict[str, str]]:
    """Transition rules on `parent` that forbid adding or removing the optional immutable `names`."""
    return [
        rule(
            f"has(self.{name}) == has(oldSelf.{name})",
            f"{parent}.{name} is immutable: it cannot be added or removed after creation",
            field_path=f".{name}",
        )
        for name in names
    ]


# ---------------------------------------------------------------------------------------------------
# Model bases


class ApiModel(BaseModel):
    """Base of every spec model: camelCase in YAML, snake_case in Python, unknown fields refused.

    The API server prunes fields the schema does not know, so `extra="forbid"` never refuses what the
    server accepted; it catches typos in examples and in objects the operator builds.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=False,
        validate_default=False,
    )

    def dump(self) -> dict[str, Any]:
        """The camelCase, JSON-ready dict the API server expects (None fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @model_validator(mode="after")
    def _unique_list_items(self) -> "ApiModel":
        """Lists marked `x-kubernetes-list-type: set` or `map` hold no duplicates, as the API server checks."""
        for name, info in type(self).model_fields.items():
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            list_type = extra.get("x-kubernetes-list-type")
            items = getattr(self, name)
            if list_type not in ("set", "map") or not items:
                continue
            map_keys = extra.get("x-kubernetes-list-map-keys", [])
            seen: set[Any] = set()
            for index, item in enumerate(items):
                if list_type == "map":
                    dumped = item.model_dump(mode="json", by_alias=True) if isinstance(item, BaseModel) else item
                    key: Any = tuple(dumped.get(k) for k in map_keys)
                else:
                    key = item
                if key in seen:
                    raise ValueError(f"{info.alias or name}[{index}]: duplicate value {key!r}")
                seen.add(key)
        return self


class StatusModel(ApiModel):
    """Base of the status models: tolerant of fields it does not know (a newer operator may add some)."""

    model_config = ConfigDict(extra="ignore")

    def as_status(self) -> dict[str, Any]:
        """The camelCase, JSON-ready dict the operator writes into `status`: the fields the builder set, and
        no others (a default it did not set is not written, so a status says only what was observed)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)


def _record_time(moment: datetime) -> str:
    return rfc3339_ms(epoch_ms(moment))


#: A time the operator observed (a condition's transition, when a plan was computed): written at second
#: precision in UTC with a `Z`, as Kubernetes writes its own (`lastTransitionTime`, `creationTimestamp`).
StatusTime = Annotated[AwareDatetime, PlainSerializer(rfc3339, return_type=str, when_used="json")]
#: A Kafka record's time (epoch milliseconds): written at millisecond precision, so it is the record's own.
RecordTime = Annotated[AwareDatetime, PlainSerializer(_record_time, return_type=str, when_used="json")]


# ---------------------------------------------------------------------------------------------------
# Constrained scalar types (each gives both the Python check and the OpenAPI pattern/bounds)

#: RFC 1123 subdomain: the names of Deployments, ConfigMaps, Secrets.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: RFC 1123 label: what a resource name must be to also fit in a label value.
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
KAFKA_TOPIC = r"^[a-zA-Z0-9._-]+$"
#: Kafka accepts almost any group id; Reprise asks for printable ASCII without spaces, which every
#: tool can quote and every log line can show.
KAFKA_GROUP = r"^[!-~]+$"
#: Go's `time.ParseDuration` units, without signs (a negative wait means nothing here).
DURATION = GO_DURATION
CONFIGMAP_KEY = r"^[-._a-zA-Z0-9]+$"
ENV_VAR_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
NO_WHITESPACE = r"^\S+$"


def _check_topic(value: str) -> str:
    if value in (".", ".."):
        raise ValueError("a Kafka topic name must not be '.' or '..'")
    return value


ResourceName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)]
TopicName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=249,
        pattern=KAFKA_TOPIC,
        json_schema_extra=validations(
            rule("self != '.' && self != '..'", "a Kafka topic name must not be '.' or '..'")
        ),
    ),
    AfterValidator(_check_topic),
]
GroupId = Annotated[str, Field(min_length=1, max_length=255, pattern=KAFKA_GROUP)]
Partition = Annotated[int, Field(ge=0, le=1_000_000)]
Offset = Annotated[int, Field(ge=0)]
#: An object whose fields the schema does not describe (a pod template, Kopf's bookkeeping).
FreeformObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


# ---------------------------------------------------------------------------------------------------
# Durations: Go-style strings on the wire (`720h`, `1h30m`, `30s`), `timedelta` in Python

# One grammar with the worker (`replay_worker.protocol.durations`); the API reads Go's form of it.
parse_duration = parse_go_duration


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "maxLength": 32, "pattern": DURATION}),
]


# ---------------------------------------------------------------------------------------------------
# References


class LocalObjectReference(ApiModel):
    """A reference to an object in the same namespace as the resource."""

    name: ResourceName = Field(description="Name of the object, in the resource's own namespace.")


class SecretReference(ApiModel):
    """A Secret in the resource's namespace."""

    name: ResourceName = Field(description="Name of the Secret, in the resource's own namespace.")


class ConfigMapKeyReference(ApiModel):
    """One key of a ConfigMap in the resource's namespace."""

    name: ResourceName = Field(description="Name of the ConfigMap, in the resource's own namespace.")
    key: str = Field(
        min_length=1,
        max_length=253,
        pattern=CONFIGMAP_KEY,
        description="Key within the ConfigMap's data whose value is used.",
    )


# ---------------------------------------------------------------------------------------------------
# Kafka connection


class KafkaConfigFrom(ApiModel):
    """Where the Kafka client settings come from. Credentials are only ever read from a Secret."""

    secret_ref: SecretReference = Field(
        description=(
            "A Secret whose keys are librdkafka client properties, for example security.protocol, "
            "sasl.mechanism, sasl.username, sasl.password, ssl.ca.pem. Reprise mounts it into the pods it "
            "runs and reads it for its own admin client; its values never appear in a spec, a status or "
            "an Event."
        )
    )


class KafkaConnection(ApiModel):
    """How Reprise and the pods it runs reach the Kafka cluster."""

    bootstrap_servers: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[^,\s]+:[0-9]{1,5}(,[^,\s]+:[0-9]{1,5})*$",
        description=(
            "Comma-separated host:port list of the cluster's bootstrap brokers, for example "
            "kafka-bootstrap.kafka:9092. Immutable: a replay runs against one cluster."
        ),
        json_schema_extra=immutable("spec.kafka.bootstrapServers"),
    )
    config_from: Optional[KafkaConfigFrom] = Field(
        default=None,
        description=(
            "Client settings (security protocol, SASL, TLS) from a Secret. There is deliberately no field "
            "for inline credentials."
        ),
    )


# ---------------------------------------------------------------------------------------------------
# Where a replay starts


class PartitionOffset(ApiModel):
    """An offset in one partition of one topic."""

    topic: TopicName = Field(description="Kafka topic name.")
    partition: Partition = Field(description="Partition number, from 0.")
    offset: Offset = Field(description="Offset within the partition.")


_START_COUNT = (
    "(has(self.timestamp) ? 1 : 0) + (has(self.duration) ? 1 : 0)"
    " + ((has(self.earliest) && self.earliest) ? 1 : 0) + (has(self.offsets) ? 1 : 0) == 1"
)


class Start(ApiModel):
    """Where the replay starts: exactly one of timestamp, duration, earliest, offsets."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            rule(
                _START_COUNT,
                "spec.start: set exactly one of timestamp, duration, earliest (true) or offsets",
            )
        )
    )

    timestamp: Optional[AwareDatetime] = Field(
        default=None,
        description=(
            "Start at the first record whose timestamp is at or after this RFC 3339 time, per partition. "
            "A partition with no record that new starts at its end."
        ),
    )
    duration: Optional[Duration] = Field(
        default=None,
        description=(
            "Start this long before the moment the plan is computed, as a Go duration such as 720h, 36h or 1h30m."
        ),
    )
    earliest: Optional[bool] = Field(
        default=None,
        description="true: start at the oldest record Kafka still holds in each partition.",
    )
    offsets: Optional[list[PartitionOffset]] = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description=(
            "Explicit start offsets per topic and partition. List every partition of the topics the "
            "resource replays: a partition not listed fails the plan with reason InvalidStart (it is never "
            "silently skipped). Each topic must be one the resource replays."
        ),
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["topic", "partition"],
        },
    )
    allow_clamp: bool = Field(
        default=False,
        description=(
            "What to do when the start lies before a partition's log start offset (retention already "
            "deleted those records). false (default): the plan fails with a RetentionExceeded reason that "
            "points at LakeReplay for the missing history. true: start at the log start offset instead "
            "and mark the partition Clamped in status.plan."
        ),
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> "Start":
        if self.mode is None:
            raise ValueError("spec.start: set exactly one of timestamp, duration, earliest (true) or offsets")
        return self

    @property
    def mode(self) -> Optional[str]:
        """Which start mode is set: "timestamp", "duration", "earliest" or "offsets" (None if not one)."""
        chosen = [
            name
            for name, is_set in (
                ("timestamp", self.timestamp is not None),
                ("duration", self.duration is not None),
                ("earliest", bool(self.earliest)),
                ("offsets", self.offsets is not None),
            )
            if is_set
        ]
        return chosen[0] if len(chosen) == 1 else None


# ---------------------------------------------------------------------------------------------------
# Which records a replay processes

HeaderValues = Annotated[list[Annotated[str, Field(max_length=1024)]], Field(min_length=1, max_length=64)]
RecordKey = Annotated[str, Field(min_length=1, max_length=1024)]


class JsonFieldMatch(ApiModel):
    """A match on one field of a JSON record value."""

    path: str = Field(
        min_length=1,
        max_length=256,
        pattern=r"^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$",
        description="Dotted path of the field in the record's JSON value, for example payload.type.",
    )
    values: list[Annotated[str, Field(max_length=1024)]] = Field(
        min_length=1,
        max_length=64,
        description=(
            "Allowed values, compared with the field's value as text (numbers and booleans in their "
            "JSON spelling). A record whose value is not JSON, or lacks the field, does not match."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class Filter(ApiModel):
    """Which records the replay consumers process; the rest are skipped (and still count as consumed).

    Every criterion given must match (they are ANDed); within one criterion any listed value matches.
    """

    model_config = ConfigDict(
        json_schema_extra=validations(
            rule(
                "has(self.headers) || has(self.keys) || has(self.jsonFields)",
                "spec.filter: set at least one of headers, keys or jsonFields",
            )
        )
    )

    headers: Optional[dict[str, HeaderValues]] = Field(
        default=None,
        min_length=1,
        max_length=16,
        description=(
            "Header name to allowed values: a record matches when, for every header named here, its "
            "value (as UTF-8) is one of the values listed, for example event-type: [UserCreated]."
        ),
    )
    keys: Optional[list[RecordKey]] = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="Record keys (as UTF-8) to process; records with any other key are skipped.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    json_fields: Optional[list[JsonFieldMatch]] = Field(
        default=None,
        min_length=1,
        max_length=16,
        description=(
            "Matches on fields of the record value, decoded in its format (spec.format.value: json, avro or "
            "protobuf; the name is kept from when values were JSON only); all must match."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["path"]},
    )

    @model_validator(mode="after")
    def _not_empty(self) -> "Filter":
        if self.headers is None and self.keys is None and self.json_fields is None:
            raise ValueError("spec.filter: set at least one of headers, keys or jsonFields")
        return self


# ---------------------------------------------------------------------------------------------------
# What the records' keys and values are, and where their schemas are


class RecordEncoding(str, Enum):
    """How a topic's keys or values are written."""

    JSON = "json"
    AVRO = "avro"
    PROTOBUF = "protobuf"
    RAW = "raw"


#: The encodings whose records carry a schema id (the Confluent wire format), read through a schema registry.
REGISTRY_ENCODINGS = (RecordEncoding.AVRO, RecordEncoding.PROTOBUF)


class RecordFormat(ApiModel):
    """The format of the topics' record keys and values (docs/schemas.md)."""

    key: RecordEncoding = Field(
        default=RecordEncoding.RAW,
        description=(
            "How record keys are written. filter.keys compares a key's bytes with the UTF-8 of the keys "
            "listed, so it is refused for avro and protobuf keys."
        ),
    )
    value: RecordEncoding = Field(
        default=RecordEncoding.JSON,
        description=(
            "How record values are written: json, avro or protobuf in the Confluent wire format (a zero "
            "byte, a 4-byte schema id, the payload; read with the writer's schema from spec.schemaRegistry), "
            "or raw bytes (no fields to filter on). filter.jsonFields match fields of the decoded value."
        ),
    )


class SchemaRegistryConnection(ApiModel):
    """A Confluent-compatible schema registry (Confluent's, Apicurio's ccompat API, Karapace)."""

    url: str = Field(
        min_length=1,
        max_length=1024,
        # No user info (`user:password@`): the URL appears in status and logs when the registry cannot be reached.
        pattern=r"^https?://[^\s/?#@]+(/[^\s?#@]*)?$",
        description=(
            "Base URL of the registry's Confluent-compatible API, for example "
            "http://schema-registry.kafka:8081 or http://apicurio.kafka:8080/apis/ccompat/v7. No credentials "
            "in it (they would show in status): use credentialsSecret."
        ),
    )
    credentials_secret: Optional[SecretReference] = Field(
        default=None,
        description=(
            "A Secret with the registry's basic-auth credentials under the keys username and password (no "
            "other key is read). Given to the replay pods as environment from the Secret; its values never "
            "appear in a spec, a status, an Event or a log."
        ),
    )


# ---------------------------------------------------------------------------------------------------
# The pods Reprise runs

Quantity = Annotated[
    str | int,
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        }
    ),
]


class ResourceRequirements(ApiModel):
    """CPU and memory for each replay-consumer pod, as in a container's resources."""

    requests: Optional[dict[str, Quantity]] = Field(
        default=None,
        max_length=8,
        description="Minimum resources, for example cpu: 500m, memory: 512Mi.",
    )
    limits: Optional[dict[str, Quantity]] = Field(
        default=None, max_length=8, description="Maximum resources, for example memory: 1Gi."
    )


class EnvVar(ApiModel):
    """One environment variable with a literal value."""

    name: str = Field(min_length=1, max_length=256, pattern=ENV_VAR_NAME, description="Variable name.")
    value: str = Field(default="", max_length=32768, description="Variable value.")


class Entrypoint(str, Enum):
    """What the replay consumers' container runs."""

    REPLAY_WORKER = "ReplayWorker"
    SERVICE = "Service"


#: The variables that tell Reprise's Python worker what to do with a record; the service's own code needs none.
DELIVERY_VARIABLES = ("REPRISE_HANDLER", "REPRISE_FORWARD_TOPIC")


def _spellings(*words: str) -> str:
    return ", ".join(f"'{v}'" for w in words for v in dict.fromkeys((w, w.capitalize(), w.upper())))


def _asks_cel(entry: str) -> str:
    """CEL on one `consumer.env` item `e`: whether it asks for `entry` (`settings_table.UNSUPPORTED`'s form).
    A boolean asks unless it is a false spelling; a `VARIABLE=value` entry asks with that value. Spellings are
    listed rather than folded with lowerAscii, whose cost on 64 values of 32 KiB the API server would refuse;
    the model's validator folds every case (`service_unsupported_asked`)."""
    name, _, value = entry.partition("=")
    if value:
        return f"(e.name == '{name}' && e.value in [{_spellings(value)}])"
    if name in ("REPRISE_FOLLOW", "REPRISE_FORWARD_TRANSACTIONAL"):
        return f"(e.name == '{name}' && !(e.value in ['', {_spellings('0', 'false', 'no', 'off')}]))"
    return f"(e.name == '{name}' && e.value != '')"


#: Generated from the table of the `REPRISE_*` environment (`replay_worker/settings_table.py`): what the Java
#: and Go replay roles of entrypoint Service do not support. The operator cannot tell the image's language,
#: so it refuses what any of them does not support.
_SERVICE_UNSUPPORTED_CEL = " || ".join(_asks_cel(entry) for entry in service_unsupported())
SERVICE_UNSUPPORTED_MESSAGE = (
    "consumer.env: with entrypoint Service the service's replay role (Java, Go) does not support "
    + ", ".join(service_unsupported())
    + " (docs/settings.md); remove them, or set entrypoint ReplayWorker"
)

ENTRYPOINT_DESCRIPTION = (
    "What the replay consumers' container runs. ReplayWorker (default): Reprise's Python replay worker "
    "(python -m replay_worker) replaces the container's command and calls the handler named by "
    "REPRISE_HANDLER (or copies records to REPRISE_FORWARD_TOPIC); the image must hold Reprise's Python "
    "package. Service: the cloned container keeps its own command and args and gets only the REPRISE_* "
    "environment; the service's Reprise library (Java: io.reprise.kafka.replay) must start its replay role "
    "when REPRISE_REPLAY_ID is set, with the service's own record handler, so REPRISE_HANDLER and "
    "REPRISE_FORWARD_TOPIC are refused in env. The role serves /healthz on REPRISE_METRICS_PORT (the "
    "container's liveness probe). A service that does not start it shows the condition reason "
    "ReplayRoleNotStarted. Immutable."
)


#: The labels Reprise puts on its replay pods to select them (`constants.child_labels`): podLabels cannot set
#: them, or a platform's label could move a pod out of (or into) a replay's selector. Every `reprise.io/` key is
#: Reprise's too.
RESERVED_POD_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/name", "app.kubernetes.io/component")
RESERVED_LABEL_PREFIX = "reprise.io/"
#: A label key: an optional DNS subdomain prefix and a name of at most 63 characters (Kubernetes' own rule).
#: `[.]`, not an escaped dot: the pattern is also CEL string text, which has no such escape.
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LabelValue = Annotated[str, Field(max_length=63, pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")]
_RESERVED_LIST = ", ".join(f"'{k}'" for k in RESERVED_POD_LABELS)
PODLABELS_RESERVED_MESSAGE = (
    "consumer.podLabels: the keys Reprise selects its replay pods by (app.kubernetes.io/managed-by, "
    "app.kubernetes.io/name, app.kubernetes.io/component and every reprise.io/ key) cannot be set"
)
PODLABELS_KEY_MESSAGE = (
    "consumer.podLabels: every key must be a Kubernetes label key (an optional DNS subdomain prefix and '/', "
    "then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
)


class Consumer(ApiModel):
    """The standby replay consumers: a Deployment Reprise creates, owns and deletes when done.

    Its pods are a clone of the live service's pod template (deploymentRef) or the template given, with
    the replay settings injected as environment (replay group, start, filter, role, handover topic).
    `entrypoint` says whether the clone runs Reprise's Python worker or the service's own command.
    """

    model_config = ConfigDict(
        json_schema_extra=validations(
            rule(
                "has(self.deploymentRef) != has(self.template)",
                "consumer: set exactly one of deploymentRef or template",
            ),
            rule(
                "self.entrypoint != 'Service' || !has(self.env) || "
                "!self.env.exists(e, e.name == 'REPRISE_HANDLER' || e.name == 'REPRISE_FORWARD_TOPIC')",
                "consumer.env: REPRISE_HANDLER and REPRISE_FORWARD_TOPIC are read only by entrypoint "
                "ReplayWorker; with entrypoint Service the service's own code handles the records (remove "
                "them, or set entrypoint ReplayWorker)",
                field_path=".env",
                reason="FieldValueForbidden",
            ),
            rule(
                f"self.entrypoint != 'Service' || !has(self.env) || !self.env.exists(e, {_SERVICE_UNSUPPORTED_CEL})",
                SERVICE_UNSUPPORTED_MESSAGE,
                field_path=".env",
                reason="FieldValueForbidden",
            ),
        )
    )

    deployment_ref: Optional[LocalObjectReference] = Field(
        default=None,
        description=(
            "The live service's Deployment, in the same namespace: the replay consumers clone its pod "
            "template (so they run the same image with the same handlers). Reprise never changes it."
        ),
    )
    template: Optional[FreeformObject] = Field(
        default=None,
        description=(
            "A pod template (a core/v1 PodTemplateSpec: metadata and spec) for the replay consumers, "
            "when they should not be a clone of a live Deployment."
        ),
    )
    container: Optional[str] = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=DNS1123_LABEL,
        description="The container of the pod template that becomes the replay consumer; default: the first.",
    )
    replicas: int = Field(
        default=1,
        ge=1,
        le=1000,
        description=(
            "Number of replay-consumer pods. More than the replayed topics' partition count leaves pods "
            "idle. Use spec.suspend to stop them."
        ),
    )
    env: Optional[list[EnvVar]] = Field(
        default=None,
        max_length=64,
        description=(
            "Extra environment for the replay consumers, for example the handler to call "
            "(REPRISE_HANDLER). Overrides variables of the same name from the template. Use Secrets in "
            "the template, never here, for credentials."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    resources: Optional[ResourceRequirements] = Field(
        default=None,
        description="Resources of the replay-consumer container; default: those of the template.",
    )
    entrypoint: Entrypoint = Field(
        default=Entrypoint.REPLAY_WORKER,
        description=ENTRYPOINT_DESCRIPTION,
        json_schema_extra=immutable("consumer.entrypoint"),
    )
    pod_labels: Optional[dict[str, LabelValue]] = Field(
        default=None,
        max_length=32,
        description=(
            "Labels the replay pods carry on top of Reprise's own, for a platform's label-keyed "
            "NetworkPolicies, mesh policies and admission rules. The replay pods never carry the live pods' "
            "labels (a Service selecting the live pods must not route to them), so what such a policy needs "
            "is given here. The keys Reprise selects its pods by (app.kubernetes.io/managed-by, "
            "app.kubernetes.io/name, app.kubernetes.io/component, every reprise.io/ key) are refused. A label "
            "a Service of the live service selects makes it route to the replay pods too."
        ),
        json_schema_extra=validations(
            rule(f"self.all(k, k.size() <= 316 && k.matches('{LABEL_KEY}'))", PODLABELS_KEY_MESSAGE),
            rule(
                f"self.all(k, !k.startsWith('{RESERVED_LABEL_PREFIX}') && !(k in [{_RESERVED_LIST}]))",
                PODLABELS_RESERVED_MESSAGE,
                reason="FieldValueForbidden",
            ),
        ),
    )

    @model_validator(mode="after")
    def _one_source(self) -> "Consumer":
        if (self.deployment_ref is None) == (self.template is None):
            raise ValueError("consumer: set exactly one of deploymentRef or template")
        for key in self.pod_labels or {}:
            if len(key) > 316 or not re.fullmatch(LABEL_KEY, key):
                raise ValueError(f"{PODLABELS_KEY_MESSAGE} ({key!r})")
            if key.startswith(RESERVED_LABEL_PREFIX) or key in RESERVED_POD_LABELS:
                raise ValueError(f"{PODLABELS_RESERVED_MESSAGE} ({key!r})")
        if self.entrypoint is Entrypoint.SERVICE and any(e.name in DELIVERY_VARIABLES for e in self.env or []):
            raise ValueError(
                "consumer.env: REPRISE_HANDLER and REPRISE_FORWARD_TOPIC are read only by entrypoint "
                "ReplayWorker; with entrypoint Service the service's own code handles the records"
            )
        if self.entrypoint is Entrypoint.SERVICE:
            asked = service_unsupported_asked({e.name: e.value for e in self.env or []})
            if asked is not None:
                raise ValueError(f"{SERVICE_UNSUPPORTED_MESSAGE} ({asked})")
        return self


# ---------------------------------------------------------------------------------------------------
# Lifecycle


class Approval(str, Enum):
    """Whether the replay starts by itself once planned."""

    AUTOMATIC = "Automatic"
    MANUAL = "Manual"


APPROVAL_DESCRIPTION = (
    "Automatic (default): run as soon as the plan is computed. Manual: stop at phase PlanReady with the "
    "plan in status until someone approves it with the annotation reprise.io/approve=true "
    "(kubectl annotate <kind> <name> reprise.io/approve=true). Can be changed at any time."
)
SUSPEND_DESCRIPTION = (
    "true: stop the pods Reprise runs (scale them to zero) and keep all state; false resumes from the "
    "committed offsets. Can be changed at any time."
)


class Completion(ApiModel):
    """When a replay counts as finished."""

    drained_for: Duration = Field(
        default=timedelta(seconds=30),
        description=(
            "How long the replay group must stay drained (lag zero, or every consumer at the end of its "
            "partition) before the replay completes, as a Go duration such as 30s or 5m. Default 30s."
        ),
        json_schema_extra={"default": "30s"},
    )


TTL_DESCRIPTION = (
    "Delete the resource itself this many seconds after it finished (Complete or Failed); unset keeps it "
    "until someone deletes it."
)


class Cleanup(ApiModel):
    """What happens after the work is finished."""

    ttl_seconds_after_finished: Optional[int] = Field(default=None, ge=0, le=31_536_000, description=TTL_DESCRIPTION)


class ReplayCleanup(Cleanup):
    """What Reprise removes after a replay finished. The standby Deployment and handover records always go."""

    delete_replay_group: bool = Field(
        default=True,
        description=(
            "Delete the temporary replay consumer group (and its committed offsets) from Kafka when done. "
            "false keeps it for inspection."
        ),
    )


# ---------------------------------------------------------------------------------------------------
# Status parts


class CreatedInKafka(StatusModel):
    """What Reprise created in Kafka for this resource: at the end it deletes these, and nothing else.

    A name is recorded when Reprise claims it, after checking that no group or topic of that name exists
    (a group with members or committed offsets is someone's) and before anything uses it, so a restart
    mid-way recognises its own."""

    groups: list[str] = Field(
        default_factory=list, description="Consumer groups Reprise created (the replay or drain group)."
    )
    topics: list[str] = Field(default_factory=list, description="Topics Reprise created (the backfill topic).")


class Phase(str, Enum):
    """Where a resource is in its life. Conditions carry the detail; the phase is the summary."""

    PENDING = "Pending"
    PLANNING = "Planning"
    PLAN_READY = "PlanReady"
    RUNNING = "Running"
    SUSPENDED = "Suspended"
    DRAINING = "Draining"
    COMPLETE = "Complete"
    FAILED = "Failed"


PHASE_DESCRIPTION = (
    "Summary of where the resource is: Pending (accepted, not yet looked at), Planning (computing the "
    "plan), PlanReady (plan computed, waiting for approval), Running (doing the work), Suspended "
    "(spec.suspend is true), Draining (the work is done and Reprise waits for consumers to catch up), "
    "Complete, Failed. Decide with conditions, not with the phase."
)


class ConditionType(str, Enum):
    """The condition types Reprise sets. A resource is in state X when condition X is True and its
    observedGeneration equals metadata.generation (so `kubectl wait --for=condition=Complete` works)."""

    #: The plan is computed and shown in status.plan.
    PLAN_READY = "PlanReady"
    #: The plan is approved (always True with approval Automatic).
    APPROVED = "Approved"
    #: The work is under way: consumers, Jobs or the Spark application are running.
    RUNNING = "Running"
    #: spec.suspend is true and Reprise's pods are scaled to zero.
    SUSPENDED = "Suspended"
    #: Backfill and LakeReplay: every record was written to its target topic.
    PRODUCED = "Produced"
    #: Lag held at zero (or consumers at partition end) for completion.drainedFor; for Backfill, every
    #: downstream group committed past what was produced.
    DRAINED = "Drained"
    #: Finished and torn down.
    COMPLETE = "Complete"
    #: Finished without success; reason and message say why.
    FAILED = "Failed"
    #: Something that should move has not moved for a while (a partition, a downstream group).
    STALLED = "Stalled"
    #: Rewind's steps, as Knative's ResetOffset reports them: the live Deployment is scaled to zero and
    #: its group is Empty; the offsets are moved to the start; the live Deployment is scaled back.
    CONSUMERS_STOPPED = "ConsumersStopped"
    OFFSETS_RESET = "OffsetsReset"
    CONSUMERS_STARTED = "ConsumersStarted"
    #: spec.verify: the check passed (True), failed (False, reason VerifyFailed) or runs (Unknown).
    VERIFIED = "Verified"
    #: Handover mode: a live-side guard cannot follow the replay on some partitions (True, naming each
    #: partition and reason); it skips nothing there, so those partitions are at-least-once, not exact.
    GUARD_PROBLEM = "GuardProblem"
    #: completion.hold: the cutover of a shadow that caught up is approved (False, AwaitingCutover, while held).
    CUTOVER_APPROVED = "CutoverApproved"
    #: Blocked on something a person must provide, or retrying a transient failure (reason and message say
    #: which); False with reason Resolved once nothing is missing any more.
    WAITING = "Waiting"


class ConditionStatus(str, Enum):
    """The status of a condition."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(StatusModel):
    """One observation of the resource's state, following the Kubernetes condition conventions."""

    type: str = Field(
        min_length=1,
        max_length=316,
        pattern=(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        ),
        description=(
            "Condition type: PlanReady, Approved, Running, Suspended, Produced, Drained, Complete, Failed, "
            "Stalled, Verified, and for Rewind ConsumersStopped, OffsetsReset, ConsumersStarted."
        ),
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="One CamelCase word a program can match on, for example RetentionExceeded.",
    )
    message: str = Field(default="", max_length=32768, description="Human-readable detail.")
    last_transition_time: StatusTime = Field(
        description="When status last changed (not when the condition was last written)."
    )
    observed_generation: Optional[int] = Field(
        default=None,
        ge=0,
        description="The metadata.generation this condition was computed from.",
    )


class RetentionRisk(str, Enum):
    """How a partition's start relates to what Kafka still retains."""

    SAFE = "Safe"
    AT_RISK = "AtRisk"
    CLAMPED = "Clamped"
    LOST = "Lost"


RETENTION_RISK_DESCRIPTION = (
    "Safe: the start is well within retention. AtRisk: retention may delete the start before the "
    "consumers reach it at the expected rate. Clamped: the start was older than the log start offset and "
    "start.allowClamp moved it forward (records in between are not replayed). Lost: the start is older "
    "than the log start offset and clamping is not allowed (the plan fails)."
)


class PartitionPlan(StatusModel):
    """The planned range of one partition."""

    topic: str = Field(description="Kafka topic name.")
    partition: int = Field(ge=0, description="Partition number.")
    start_offset: int = Field(ge=0, description="First offset to process (inclusive).")
    end_offset: int = Field(ge=0, description="The partition's end offset when the plan was computed (exclusive).")
    records: int = Field(ge=0, description="end offset minus start offset.")
    oldest_timestamp: Optional[RecordTime] = Field(
        default=None, description="Timestamp of the record at the start offset, when there is one."
    )
    retention_risk: RetentionRisk = Field(default=RetentionRisk.SAFE, description=RETENTION_RISK_DESCRIPTION)


class Plan(StatusModel):
    """What the replay will do, computed before anything moves."""

    partitions: list[PartitionPlan] = Field(default_factory=list, description="The planned range of every partition.")
    partition_count: int = Field(default=0, ge=0, description="Number of partitions in the plan.")
    total_records: int = Field(default=0, ge=0, description="Sum of records over all partitions.")
    oldest_timestamp: Optional[RecordTime] = Field(
        default=None, description="The oldest start timestamp over all partitions."
    )
    retention_risk: RetentionRisk = Field(
        default=RetentionRisk.SAFE,
        description="The worst retention risk over all partitions. " + RETENTION_RISK_DESCRIPTION,
    )
    computed_at: Optional[StatusTime] = Field(default=None, description="When the plan was computed.")


class PartitionState(str, Enum):
    """Where one partition is in the replay."""

    PENDING = "Pending"
    REPLAYING = "Replaying"
    CAUGHT_UP = "CaughtUp"
    HANDED_OVER = "HandedOver"
    DRAINED = "Drained"


class PartitionProgress(StatusModel):
    """How far one partition is."""

    topic: str = Field(description="Kafka topic name.")
    partition: int = Field(ge=0, description="Partition number.")
    position: Optional[int] = Field(
        default=None, ge=0, description="The replay group's committed offset (next record to process)."
    )
    end_offset: Optional[int] = Field(default=None, ge=0, description="The partition's end offset now.")
    handover_offset: Optional[int] = Field(
        default=None,
        ge=0,
        description=(
            "Handover mode: the offset from which the live group processes this partition again; the "
            "replay group processed everything before it."
        ),
    )
    lag: Optional[int] = Field(default=None, ge=0, description="Records still to consume.")
    state: PartitionState = Field(
        default=PartitionState.PENDING,
        description=(
            "Pending (not started), Replaying, CaughtUp (Parallel: the replay group reached the live "
            "group), HandedOver (Handover: the boundary is recorded and the live group took over), "
            "Drained (nothing left to consume)."
        ),
    )
    guard_problem: Optional[str] = Field(
        default=None,
        max_length=256,
        description=(
            "Handover mode: why the live side's guard cannot follow the replay on this partition (a reason "
            "code such as unreadable-handover-record:newer-version or unevaluable-filter:bad-operator). It "
            "skips nothing here, so the live group processes these records again: at-least-once, nothing lost."
        ),
    )


class Progress(StatusModel):
    """How far the work is, refreshed while it runs."""

    partitions: list[PartitionProgress] = Field(default_factory=list, description="Progress of every partition.")
    total_records: Optional[int] = Field(default=None, ge=0, description="Records planned in total.")
    processed: Optional[int] = Field(default=None, ge=0, description="Records consumed so far.")
    percent: Optional[int] = Field(
        default=None, ge=0, le=100, description="processed as a whole percentage of totalRecords."
    )
    lag: Optional[int] = Field(default=None, ge=0, description="Records still to consume, all partitions.")
    eta_seconds: Optional[int] = Field(
        default=None, ge=0, description="Estimated seconds until drained, from the recent consumption rate."
    )
    eta: Optional[str] = Field(
        default=None,
        max_length=32,
        description="etaSeconds as a Go duration (for example 12m30s), for kubectl get.",
    )
    updated_at: Optional[StatusTime] = Field(default=None, description="When progress was last measured.")


class ResourceStatus(StatusModel):
    """The status fields every kind has."""

    phase: Phase = Field(default=Phase.PENDING, description=PHASE_DESCRIPTION)
    observed_generation: Optional[int] = Field(
        default=None, ge=0, description="The metadata.generation the operator last acted on."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description=(
            "Current conditions, at most one per type: PlanReady, Approved, Running, Suspended, Produced, "
            "Drained, Complete, Failed, Stalled (and Rewind's ConsumersStopped, OffsetsReset, "
            "ConsumersStarted). `kubectl wait --for=condition=Complete` waits for the end."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    started_at: Optional[StatusTime] = Field(default=None, description="When the work started running.")
    completed_at: Optional[StatusTime] = Field(
        default=None, description="When the resource reached Complete or Failed."
    )
    kopf: Optional[FreeformObject] = Field(
        default=None,
        description="Reserved for the Kopf framework's bookkeeping of handler progress; not for users.",
    )

    def condition(self, type_: str | ConditionType) -> Optional[Condition]:
        """The condition of that type, if set."""
        wanted = type_.value if isinstance(type_, ConditionType) else type_
        return next((c for c in self.conditions if c.type == wanted), None)

    def is_true(self, type_: str | ConditionType, generation: Optional[int] = None) -> bool:
        """Condition `type_` is True (and, when `generation` is given, computed from that generation)."""
        found = self.condition(type_)
        if found is None or found.status is not ConditionStatus.TRUE:
            return False
        return generation is None or found.observed_generation == generation


# ---------------------------------------------------------------------------------------------------
# What the generator needs to know about a kind


@dataclass(frozen=True)
class PrinterColumn:
    """One column of `kubectl get`."""

    name: str
    json_path: str
    type: str
    description: str
    priority: int = 0

    def dump(self) -> dict[str, Any]:
        column: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "jsonPath": self.json_path,
        }
        if self.priority:
            column["priority"] = self.priority
        return column


AGE_COLUMN = PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since the resource was created.")
PHASE_COLUMN = PrinterColumn("Phase", ".status.phase", "string", "Where the resource is in its life.")


@dataclass(frozen=True)
class KindDefinition:
    """A custom resource kind: its names, models and kubectl presentation."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    description: str
    spec: type[ApiModel]
    status: type[StatusModel]
    printer_columns: tuple[PrinterColumn, ...]
    #: CEL rules on the whole object (the only place metadata.name can be checked).
    root_rules: tuple[dict[str, str], ...] = field(default=())

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"


_NAME_RE = re.compile(DNS1123_LABEL)


class ResourceObject(ApiModel):
    """A whole object of one of the kinds, for reading manifests and watch events. Each kind's subclass
    gives `kind` (a Literal), `spec` and `status` their types."""

    api_version: Literal["reprise.io/v1alpha1"] = Field(default=API_VERSION, description="API version.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Object metadata.")

    @model_validator(mode="after")
    def _name(self) -> "ResourceObject":
        # The Python mirror of `name_rules`.
        name = self.metadata.get("name")
        if name is not None and (len(name) > 63 or not _NAME_RE.fullmatch(name)):
            kind = getattr(self, "kind")  # noqa: B009 - kind is each subclass's field, not this class's
            raise ValueError(f"metadata.name: a {kind} name must be a DNS-1123 label of at most 63 characters")
        return self


def name_rules(kind: str) -> tuple[dict[str, str], ...]:
    """metadata.name must also fit in a label value: Reprise labels every child with it."""
    return (
        rule(
            "self.metadata.name.size() <= 63 && self.metadata.name.matches('" + DNS1123_LABEL + "')",
            f"metadata.name: a {kind} name must be a DNS-1123 label (lowercase letters, digits and '-', "
            "at most 63 characters), because Reprise puts it in the labels of everything it creates",
        ),
    )
