"""The table of invalid manifests: each is a valid example with one change that the API server must refuse
at admission, and the substrings its error message must contain (the offending field's path first).

Shared by the integration test (the real API server refuses each one) and a unit test (the pydantic
models refuse the same ones, so the Python mirror of the CEL rules cannot drift unnoticed).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


#: A change that removes the field.
DELETE = _Delete()


@dataclass(frozen=True)
class Invalid:
    """One invalid manifest: `base` example with `changes` applied; the error must contain `expect`."""

    id: str
    base: str
    changes: dict[str, Any]
    expect: tuple[str, ...]
    #: False when only the API server can tell (metadata rules, unknown fields under kubectl's strict
    #: field validation, rules the models leave to CEL).
    python: bool = True
    notes: str = field(default="", compare=False)

    def manifest(self) -> dict[str, Any]:
        document = load_example(self.base)
        for path, value in self.changes.items():
            set_path(document, path, value)
        return document


def load_example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text())


def set_path(document: dict[str, Any], path: str, value: Any) -> None:
    """Set (or, with DELETE, remove) a dotted path; integer parts index lists."""
    parts = path.split(".")
    node: Any = document
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = copy.deepcopy(value)
    elif value is DELETE:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


HANDOVER = "reconsume-handover.yaml"
PARALLEL = "reconsume-parallel.yaml"
REWIND = "reconsume-rewind.yaml"
BF_TOPIC = "backfill-topic.yaml"
BF_JOB = "backfill-job.yaml"
BF_DEBEZIUM = "backfill-debezium.yaml"
LAKE = "lakereplay.yaml"
LAKE_THEN = "lakereplay-then-reconsume.yaml"
SERVICE = "reconsume-handover-service.yaml"

INVALID: tuple[Invalid, ...] = (
    # --- Reconsume: start
    Invalid(
        "start-two-modes",
        HANDOVER,
        {"spec.start": {"timestamp": "2026-09-01T00:00:00Z", "duration": "24h"}},
        ("spec.start", "exactly one of timestamp, duration, earliest"),
    ),
    Invalid(
        "start-empty",
        HANDOVER,
        {"spec.start": {"allowClamp": True}},
        ("spec.start", "exactly one of timestamp, duration, earliest"),
    ),
    Invalid(
        "start-earliest-false",
        HANDOVER,
        {"spec.start": {"earliest": False}},
        ("spec.start", "exactly one of timestamp, duration, earliest"),
    ),
    Invalid(
        "start-duration-words",
        HANDOVER,
        {"spec.start": {"duration": "1 week"}},
        ("spec.start.duration", "should match"),
    ),
    Invalid(
        "start-timestamp-not-rfc3339",
        HANDOVER,
        {"spec.start": {"timestamp": "yesterday"}},
        ("spec.start.timestamp", "date-time"),
    ),
    Invalid(
        "start-offsets-unknown-topic",
        HANDOVER,
        {"spec.start": {"offsets": [{"topic": "orders", "partition": 0, "offset": 10}]}},
        ("spec.start.offsets", "every topic must be one of spec.topics"),
    ),
    Invalid(
        "start-offsets-negative-partition",
        HANDOVER,
        {"spec.start": {"offsets": [{"topic": "users", "partition": -1, "offset": 10}]}},
        ("spec.start.offsets[0].partition", "greater than or equal to 0"),
    ),
    Invalid(
        "start-offsets-duplicate",
        HANDOVER,
        {
            "spec.start": {
                "offsets": [
                    {"topic": "users", "partition": 0, "offset": 1},
                    {"topic": "users", "partition": 0, "offset": 2},
                ]
            }
        },
        ("spec.start.offsets[1]", "Duplicate value"),
    ),
    # --- Reconsume: mode and consumers
    Invalid(
        "rewind-with-consumer",
        REWIND,
        {"spec.consumer": {"deploymentRef": {"name": "search-indexer"}}},
        ("spec.consumer", "not allowed with mode Rewind"),
    ),
    Invalid(
        "rewind-without-live-deployment",
        REWIND,
        {"spec.liveDeployment": DELETE},
        ("spec.liveDeployment", "required with mode Rewind"),
    ),
    Invalid(
        "rewind-with-filter",
        REWIND,
        {"spec.filter": {"keys": ["p-1"]}},
        ("spec.filter", "not allowed with mode Rewind"),
    ),
    Invalid(
        "rewind-with-replay-group",
        REWIND,
        {"spec.replayGroup": "search-indexer-replay"},
        ("spec.replayGroup", "not allowed with mode Rewind"),
    ),
    Invalid(
        "parallel-without-consumer",
        PARALLEL,
        {"spec.consumer": DELETE},
        ("spec.consumer", "required with modes Parallel and Handover"),
    ),
    Invalid(
        "handover-with-live-deployment",
        HANDOVER,
        {"spec.liveDeployment": {"name": "accounts-consumer"}},
        ("spec.liveDeployment", "only used with mode Rewind"),
    ),
    Invalid("mode-unknown", HANDOVER, {"spec.mode": "Replay"}, ("spec.mode", "Unsupported value", "Handover")),
    Invalid(
        "replay-group-is-live-group",
        HANDOVER,
        {"spec.replayGroup": "accounts-service"},
        ("spec.replayGroup", "must not be the live group"),
    ),
    # --- Reconsume: verify before cutover (issue 20)
    Invalid(
        "rewind-with-verify",
        REWIND,
        {"spec.verify": {"template": {"spec": {"containers": [{"name": "check", "image": "reprise/check"}]}}}},
        ("spec.verify", "not allowed with mode Rewind"),
    ),
    Invalid(
        "handover-with-hold",
        HANDOVER,
        {"spec.completion": {"hold": "UntilCutover"}},
        ("spec.completion.hold", "only with mode Parallel"),
    ),
    Invalid(
        "hold-with-entrypoint-service",
        PARALLEL,
        {
            "spec.completion": {"hold": "UntilCutover"},
            "spec.consumer.entrypoint": "Service",
            "spec.consumer.env": DELETE,
        },
        ("spec.completion.hold", "needs consumer.entrypoint ReplayWorker"),
    ),
    Invalid(
        "hold-unknown",
        PARALLEL,
        {"spec.completion": {"hold": "Forever"}},
        ("spec.completion.hold", "Unsupported value", "UntilCutover"),
    ),
    Invalid(
        "verify-without-template", PARALLEL, {"spec.verify": {"retries": 1}}, ("spec.verify.template", "Required value")
    ),
    Invalid(
        "verify-retries-negative",
        PARALLEL,
        {"spec.verify": {"template": {"spec": {}}, "retries": -1}},
        ("spec.verify.retries", "greater than or equal to 0"),
    ),
    Invalid(
        "consumer-both-sources",
        HANDOVER,
        {"spec.consumer.template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
        ("spec.consumer", "exactly one of deploymentRef or template"),
    ),
    Invalid(
        "consumer-no-source",
        HANDOVER,
        {"spec.consumer.deploymentRef": DELETE},
        ("spec.consumer", "exactly one of deploymentRef or template"),
    ),
    Invalid(
        "consumer-replicas-zero",
        HANDOVER,
        {"spec.consumer.replicas": 0},
        ("spec.consumer.replicas", "greater than or equal to 1"),
    ),
    Invalid(
        "consumer-replicas-huge",
        HANDOVER,
        {"spec.consumer.replicas": 5000},
        ("spec.consumer.replicas", "less than or equal to 1000"),
    ),
    Invalid(
        "consumer-deployment-not-dns",
        HANDOVER,
        {"spec.consumer.deploymentRef.name": "Accounts_Consumer"},
        ("spec.consumer.deploymentRef.name", "should match"),
    ),
    Invalid(
        "consumer-env-bad-name",
        HANDOVER,
        {"spec.consumer.env": [{"name": "1 BAD", "value": "x"}]},
        ("spec.consumer.env[0].name", "should match"),
    ),
    Invalid(
        "consumer-env-duplicate",
        HANDOVER,
        {"spec.consumer.env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]},
        ("spec.consumer.env[1]", "Duplicate value"),
    ),
    # --- Reconsume: the consumers' entrypoint
    Invalid(
        "entrypoint-unknown",
        SERVICE,
        {"spec.consumer.entrypoint": "Java"},
        ("spec.consumer.entrypoint", "Unsupported value", "ReplayWorker", "Service"),
    ),
    Invalid(
        "entrypoint-service-with-handler",
        SERVICE,
        {"spec.consumer.env": [{"name": "REPRISE_HANDLER", "value": "accounts.replay:handle"}]},
        ("spec.consumer.env", "REPRISE_HANDLER and REPRISE_FORWARD_TOPIC are read only by entrypoint ReplayWorker"),
    ),
    Invalid(
        "entrypoint-service-with-forward-topic",
        SERVICE,
        {
            "spec.consumer.env": [
                {"name": "REPRISE_BATCH_SIZE", "value": "10"},
                {"name": "REPRISE_FORWARD_TOPIC", "value": "users.copy"},
            ]
        },
        ("spec.consumer.env", "with entrypoint Service the service's own code handles the records"),
    ),
    Invalid(
        "entrypoint-service-with-follow",
        SERVICE,
        {"spec.consumer.env": [{"name": "REPRISE_FOLLOW", "value": "true"}]},
        ("spec.consumer.env", "the service's replay role (Java, Go) does not support", "REPRISE_FOLLOW"),
    ),
    Invalid(
        "entrypoint-service-with-backfill-role",
        SERVICE,
        {"spec.consumer.env": [{"name": "REPRISE_ROLE", "value": "backfill"}]},
        ("spec.consumer.env", "does not support REPRISE_ROLE=backfill"),
    ),
    Invalid(
        "lake-entrypoint-service-with-handler",
        LAKE,
        {
            "spec.consumer.entrypoint": "Service",
            "spec.consumer.env": [{"name": "REPRISE_FORWARD_TOPIC", "value": "users.copy"}],
        },
        ("spec.consumer.env", "read only by entrypoint ReplayWorker"),
    ),
    # --- Reconsume: names
    Invalid("topics-empty", HANDOVER, {"spec.topics": []}, ("spec.topics", "at least 1 items")),
    Invalid("topic-with-space", HANDOVER, {"spec.topics": ["user events"]}, ("spec.topics[0]", "should match")),
    Invalid("topic-dot-dot", HANDOVER, {"spec.topics": [".."]}, ("spec.topics[0]", "must not be '.' or '..'")),
    Invalid("topic-too-long", HANDOVER, {"spec.topics": ["t" * 250]}, ("spec.topics[0]", "249")),
    Invalid("topics-duplicate", HANDOVER, {"spec.topics": ["users", "users"]}, ("spec.topics[1]", "Duplicate value")),
    Invalid(
        "group-with-space", HANDOVER, {"spec.consumerGroup": "accounts service"}, ("spec.consumerGroup", "should match")
    ),
    Invalid("group-too-long", HANDOVER, {"spec.consumerGroup": "g" * 256}, ("spec.consumerGroup", "255")),
    Invalid("group-missing", HANDOVER, {"spec.consumerGroup": DELETE}, ("spec.consumerGroup", "Required value")),
    Invalid(
        "name-not-dns-label", HANDOVER, {"metadata.name": "accounts.add.locale"}, ("metadata.name", "DNS-1123 label")
    ),
    Invalid("name-too-long", HANDOVER, {"metadata.name": "a" * 64}, ("metadata.name", "at most 63 characters")),
    # --- Reconsume: Kafka, filter, lifecycle
    Invalid(
        "kafka-inline-password",
        HANDOVER,
        {"spec.kafka.saslPassword": "hunter2"},
        ('unknown field "spec.kafka.saslPassword"',),
    ),
    Invalid(
        "kafka-bootstrap-without-port",
        HANDOVER,
        {"spec.kafka.bootstrapServers": "kafka-bootstrap"},
        ("spec.kafka.bootstrapServers", "should match"),
    ),
    Invalid(
        "kafka-secret-not-dns",
        HANDOVER,
        {"spec.kafka.configFrom.secretRef.name": "My Secret"},
        ("spec.kafka.configFrom.secretRef.name", "should match"),
    ),
    Invalid(
        "filter-empty", HANDOVER, {"spec.filter": {}}, ("spec.filter", "at least one of headers, keys or jsonFields")
    ),
    Invalid(
        "filter-json-path-bad",
        PARALLEL,
        {"spec.filter.jsonFields": [{"path": "$..type[0]", "values": ["x"]}]},
        ("spec.filter.jsonFields[0].path", "should match"),
    ),
    # -- record formats and the schema registry (docs/schemas.md)
    Invalid(
        "format-raw-with-field-filter",
        HANDOVER,
        {"spec.format": {"value": "raw"}, "spec.filter": {"jsonFields": [{"path": "type", "values": ["x"]}]}},
        ("spec.filter", "spec.filter.jsonFields: raw values (spec.format.value: raw) have no fields"),
    ),
    Invalid(
        "format-avro-without-registry",
        HANDOVER,
        {"spec.format": {"value": "avro"}},
        ("spec.format", "spec.schemaRegistry: required when spec.format.value is avro or protobuf"),
    ),
    Invalid(
        "format-protobuf-without-registry",
        PARALLEL,
        {"spec.format": {"value": "protobuf"}},
        ("spec.format", "spec.schemaRegistry: required when spec.format.value is avro or protobuf"),
    ),
    Invalid(
        "format-avro-keys-with-key-filter",
        HANDOVER,
        {"spec.format": {"key": "avro"}, "spec.filter": {"keys": ["u1"]}},
        ("spec.filter", "spec.filter.keys: compares a key's bytes", "spec.format.key"),
    ),
    Invalid(
        "format-unknown",
        HANDOVER,
        {"spec.format": {"value": "xml"}},
        ("spec.format.value", "Unsupported value", "avro"),
    ),
    Invalid(
        "format-avro-with-service-entrypoint",
        SERVICE,
        {"spec.format": {"value": "avro"}, "spec.schemaRegistry": {"url": "http://registry.kafka:8081"}},
        ("spec.format", "not supported yet by the Java and Go replay roles", "consumer.entrypoint: Service"),
    ),
    Invalid(
        "schema-registry-url-not-http",
        HANDOVER,
        {"spec.format": {"value": "avro"}, "spec.schemaRegistry": {"url": "registry.kafka:8081"}},
        ("spec.schemaRegistry.url", "should match"),
    ),
    Invalid(
        "schema-registry-url-with-credentials",
        HANDOVER,
        {"spec.format": {"value": "avro"}, "spec.schemaRegistry": {"url": "http://reader:s3cret@registry.kafka:8081"}},
        ("spec.schemaRegistry.url", "should match"),
        notes="credentials in the URL would be shown in status and logs (a wait names the URL): credentialsSecret",
    ),
    Invalid(
        "schema-registry-secret-not-dns",
        HANDOVER,
        {
            "spec.format": {"value": "avro"},
            "spec.schemaRegistry": {"url": "http://registry.kafka:8081", "credentialsSecret": {"name": "My Secret"}},
        },
        ("spec.schemaRegistry.credentialsSecret.name", "should match"),
    ),
    Invalid(
        "drained-for-words",
        HANDOVER,
        {"spec.completion.drainedFor": "soon"},
        ("spec.completion.drainedFor", "should match"),
    ),
    Invalid("approval-unknown", HANDOVER, {"spec.approval": "Auto"}, ("spec.approval", "Unsupported value", "Manual")),
    Invalid(
        "ttl-negative",
        HANDOVER,
        {"spec.cleanup.ttlSecondsAfterFinished": -1},
        ("spec.cleanup.ttlSecondsAfterFinished", "greater than or equal to 0"),
    ),
    Invalid("spec-missing", HANDOVER, {"spec": DELETE}, ("spec", "Required value")),
    # --- Backfill
    Invalid(
        "backfill-keys-and-keys-from",
        BF_TOPIC,
        {"spec.keysFrom": {"configMapRef": {"name": "ids", "key": "keys.txt"}}},
        ("spec.keys, spec.keysFrom", "exactly one of keys or keysFrom"),
    ),
    Invalid(
        "backfill-no-keys",
        BF_TOPIC,
        {"spec.keys": DELETE},
        ("spec.keys, spec.keysFrom", "exactly one of keys or keysFrom"),
    ),
    Invalid(
        "backfill-two-sources",
        BF_TOPIC,
        {
            "spec.source.debezium": {
                "signalTopic": "s",
                "topicPrefix": "p",
                "dataCollection": "public.t",
                "keyColumn": "id",
            }
        },
        ("spec.source", "exactly one of topic, job or debezium"),
    ),
    Invalid(
        "backfill-no-source", BF_TOPIC, {"spec.source": {}}, ("spec.source", "exactly one of topic, job or debezium")
    ),
    Invalid("backfill-keys-duplicate", BF_TOPIC, {"spec.keys": ["u-1", "u-1"]}, ("spec.keys[1]", "Duplicate value")),
    Invalid(
        "backfill-groups-duplicate",
        BF_TOPIC,
        {"spec.downstreamGroups": ["billing", "billing"]},
        ("spec.downstreamGroups[1]", "Duplicate value"),
    ),
    Invalid(
        "backfill-stalled-after-words",
        BF_TOPIC,
        {"spec.barrier.stalledAfter": "5 minutes"},
        ("spec.barrier.stalledAfter", "should match"),
    ),
    Invalid(
        "backfill-debezium-key-column-sql",
        BF_DEBEZIUM,
        {"spec.source.debezium.keyColumn": "id; DROP TABLE x"},
        ("spec.source.debezium.keyColumn", "should match"),
    ),
    Invalid(
        "backfill-keys-from-bad-key",
        BF_JOB,
        {"spec.keysFrom.configMapRef.key": "keys/all.txt"},
        ("spec.keysFrom.configMapRef.key", "should match"),
    ),
    Invalid(
        "backfill-job-backoff-huge",
        BF_JOB,
        {"spec.source.job.backoffLimit": 50},
        ("spec.source.job.backoffLimit", "less than or equal to 10"),
    ),
    Invalid("backfill-topic-dot", BF_TOPIC, {"spec.topic": "."}, ("spec.topic", "must not be '.' or '..'")),
    # --- LakeReplay
    Invalid(
        "lake-from-after-to",
        LAKE,
        {"spec.source.from": "2025-08-01T00:00:00Z"},
        ("spec.source.from", "must be before spec.source.to"),
    ),
    Invalid(
        "lake-from-equals-to",
        LAKE,
        {"spec.source.from": "2025-07-01T00:00:00Z"},
        ("spec.source.from", "must be before spec.source.to"),
    ),
    Invalid("lake-to-missing", LAKE, {"spec.source.to": DELETE}, ("spec.source.to", "Required value")),
    Invalid(
        "lake-format-unknown",
        LAKE,
        {"spec.source.format": "csv"},
        ("spec.source.format", "Unsupported value", "parquet"),
    ),
    Invalid(
        "lake-avro-without-schema",
        LAKE,
        {"spec.source.format": "avro", "spec.source.schema": DELETE},
        ("spec.source.schema", "required for format avro", "reader schema"),
    ),
    Invalid(
        "lake-s3-on-a-file-uri",
        LAKE,
        {"spec.source.uri": "file:///data/lake/users", "spec.source.s3": {"endpoint": "http://s3proxy:9400"}},
        ("spec.source.s3", "only for an s3a://"),
    ),
    Invalid(
        "lake-s3-endpoint-without-scheme",
        LAKE,
        {"spec.source.s3": {"endpoint": "s3proxy:9400"}},
        ("spec.source.s3.endpoint", "should match"),
    ),
    Invalid(
        "lake-s3-credentials-without-secret-name",
        LAKE,
        {"spec.source.s3": {"credentialsSecretRef": {"accessKeyIdKey": "id"}}},
        ("spec.source.s3.credentialsSecretRef.name", "Required value"),
    ),
    Invalid(
        "lake-s3-inline-secret-key",
        LAKE,
        {"spec.source.s3": {"secretAccessKey": "abc"}},
        ("spec.source.s3", "secretAccessKey"),
        python=True,
    ),
    Invalid(
        "lake-as-of-on-parquet",
        LAKE,
        {"spec.source.asOf": {"version": 1}},
        ("spec.source.asOf", "only for format delta or iceberg"),
    ),
    Invalid(
        "lake-as-of-version-and-timestamp",
        LAKE,
        {"spec.source.format": "delta", "spec.source.asOf": {"version": 1, "timestamp": "2025-01-01T00:00:00Z"}},
        ("spec.source.asOf", "exactly one of version and timestamp"),
    ),
    Invalid("lake-uri-no-scheme", LAKE, {"spec.source.uri": "/data/lake/users"}, ("spec.source.uri", "should match")),
    Invalid(
        "lake-backfill-partitions-zero",
        LAKE,
        {"spec.backfillTopic.partitions": 0},
        ("spec.backfillTopic.partitions", "greater than or equal to 1"),
    ),
    Invalid(
        "lake-executors-zero",
        LAKE,
        {"spec.spark.executor.instances": 0},
        ("spec.spark.executor.instances", "greater than or equal to 1"),
    ),
    Invalid(
        "lake-driver-memory-words",
        LAKE,
        {"spec.spark.driver.memory": "lots"},
        ("spec.spark.driver.memory", "should match"),
    ),
    Invalid(
        "lake-retry-interval-zero",
        LAKE,
        {"spec.spark.retries.intervalSeconds": 0},
        ("spec.spark.retries.intervalSeconds", "greater than or equal to 1"),
    ),
    Invalid(
        "lake-inline-s3-secret",
        LAKE,
        {"spec.spark.hadoopConf": {"fs.s3a.secret.key": "abc"}},
        ("spec.spark.hadoopConf", "must not hold credentials"),
    ),
    Invalid(
        "lake-sparkconf-moves-the-driver",
        LAKE,
        {"spec.spark.sparkConf": {"spark.kubernetes.namespace": "kube-system"}},
        ('spec.spark.sparkConf["spark.kubernetes.namespace"]', "not allowed"),
    ),
    Invalid(
        "lake-sparkconf-off-the-allow-list",
        LAKE,
        {"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "8", "spark.driver.extraJavaOptions": "-Dx"}},
        ('spec.spark.sparkConf["spark.driver.extraJavaOptions"]', "not allowed", "docs/lakereplay.md"),
    ),
    Invalid("lake-consumer-missing", LAKE, {"spec.consumer": DELETE}, ("spec.consumer", "Required value")),
    # Review M4: the drain group was spec.consumerGroup, the live group's name everywhere else.
    Invalid(
        "lake-old-consumer-group-name",
        LAKE,
        {"spec.drainGroup": DELETE, "spec.consumerGroup": "accounts-service"},
        ("spec.consumerGroup", "renamed spec.drainGroup"),
    ),
    Invalid("lake-drain-group-missing", LAKE, {"spec.drainGroup": DELETE}, ("spec.drainGroup", "required")),
    Invalid(
        "lake-consumer-group-next-to-drain-group",
        LAKE,
        {"spec.consumerGroup": "accounts-service"},
        ("spec.consumerGroup", "renamed spec.drainGroup", "spec.then.reconsume.consumerGroup"),
    ),
    # Review L4: podLabels may not move a replay pod out of (or into) a replay's selector.
    Invalid(
        "pod-labels-reserved",
        PARALLEL,
        {"spec.consumer.podLabels": {"team": "billing", "reprise.io/replay": "other"}},
        ("spec.consumer.podLabels", "the keys Reprise selects its replay pods by"),
    ),
    Invalid(
        "pod-labels-app-component",
        PARALLEL,
        {"spec.consumer.podLabels": {"app.kubernetes.io/component": "web"}},
        ("spec.consumer.podLabels", "the keys Reprise selects its replay pods by"),
    ),
    Invalid(
        "pod-labels-bad-key",
        PARALLEL,
        {"spec.consumer.podLabels": {"a/b/c": "x"}},
        ("spec.consumer.podLabels", "must be a Kubernetes label key"),
    ),
    Invalid(
        "pod-labels-bad-value",
        PARALLEL,
        {"spec.consumer.podLabels": {"team": "not a label value"}},
        ("spec.consumer.podLabels", "should match"),
    ),
    Invalid(
        "lake-then-rewind-without-live-deployment",
        LAKE_THEN,
        {"spec.then.reconsume.mode": "Rewind", "spec.then.reconsume.filter": DELETE},
        ("spec.then.reconsume.liveDeployment", "required with mode Rewind"),
    ),
    Invalid(
        "lake-then-rewind-with-consumer",
        LAKE_THEN,
        {
            "spec.then.reconsume.mode": "Rewind",
            "spec.then.reconsume.filter": DELETE,
            "spec.then.reconsume.liveDeployment": {"name": "accounts-consumer"},
            "spec.then.reconsume.consumer": {"deploymentRef": {"name": "accounts-consumer"}},
        },
        ("spec.then.reconsume.consumer", "not allowed with mode Rewind"),
    ),
)


@dataclass(frozen=True)
class Update:
    """A change to an existing object: refused (immutable) or accepted (mutable)."""

    id: str
    base: str
    changes: dict[str, Any]
    expect: tuple[str, ...] = ()

    @property
    def refused(self) -> bool:
        return bool(self.expect)


UPDATES: tuple[Update, ...] = (
    Update("topics", HANDOVER, {"spec.topics": ["users", "orders"]}, ("spec.topics", "immutable")),
    Update("mode", HANDOVER, {"spec.mode": "Parallel"}, ("spec.mode", "immutable")),
    Update("start", HANDOVER, {"spec.start": {"timestamp": "2026-08-01T00:00:00Z"}}, ("spec.start", "immutable")),
    Update("consumer-group", HANDOVER, {"spec.consumerGroup": "other"}, ("spec.consumerGroup", "immutable")),
    Update("filter-changed", HANDOVER, {"spec.filter": {"keys": ["u-1"]}}, ("spec.filter", "immutable")),
    Update("filter-removed", HANDOVER, {"spec.filter": DELETE}, ("spec.filter", "cannot be added or removed")),
    Update(
        "bootstrap",
        HANDOVER,
        {"spec.kafka.bootstrapServers": "other:9092"},
        ("spec.kafka.bootstrapServers", "immutable"),
    ),
    Update("backfill-keys", BF_TOPIC, {"spec.keys": ["u-1"]}, ("spec.keys", "immutable")),
    Update("backfill-source", BF_TOPIC, {"spec.source": {"topic": {"name": "other"}}}, ("spec.source", "immutable")),
    Update("lake-source", LAKE, {"spec.source.to": "2025-06-01T00:00:00Z"}, ("spec.source", "immutable")),
    Update("suspend", HANDOVER, {"spec.suspend": True}),
    Update("approval", HANDOVER, {"spec.approval": "Manual"}),
    Update("cleanup", HANDOVER, {"spec.cleanup": {"deleteReplayGroup": False}}),
    Update("replicas", HANDOVER, {"spec.consumer.replicas": 5}),
    Update(
        "entrypoint", SERVICE, {"spec.consumer.entrypoint": "ReplayWorker"}, ("spec.consumer.entrypoint", "immutable")
    ),
    Update(
        "entrypoint-added",
        HANDOVER,
        {"spec.consumer.entrypoint": "Service", "spec.consumer.env": DELETE},
        ("spec.consumer.entrypoint", "immutable"),
    ),
    Update("backfill-groups", BF_TOPIC, {"spec.downstreamGroups": ["billing"]}),
    Update("lake-suspend", LAKE, {"spec.suspend": True}),
)
