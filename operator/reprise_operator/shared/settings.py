"""The operator's one settings object, read from environment variables at start, rejecting bad values."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from . import bootstrap_aliases


#: The token endpoints a Secret's OAUTHBEARER setup may name; `kubectl reprise` reads the same variable.
OAUTH_TOKEN_ENDPOINTS_ENV = "REPRISE_OAUTH_TOKEN_ENDPOINTS"


class SettingsError(ValueError):
    """A bad operator setting; the message names the environment variable."""


def _float(env: dict[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _int(env: dict[str, str], name: str, default: int, minimum: int) -> int:
    value = _float(env, name, default, minimum)
    if value != int(value):
        raise SettingsError(f"{name}={env[name]!r} must be a whole number")
    return int(value)


def _bool(env: dict[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw not in ("true", "false"):
        raise SettingsError(f"{name}={env[name]!r} must be true or false")
    return raw == "true"


def _list(env: dict[str, str], name: str) -> tuple[str, ...] | None:
    items = tuple(i.strip() for i in env.get(name, "").split(",") if i.strip())
    return items or None


@dataclass(frozen=True)
class OperatorSettings:
    poll_interval: float = 5.0
    """Seconds between two looks at Kafka for every running replay (default 5). Completion follows
    within two intervals of the drained hold ending."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch (`REPRISE_NAMESPACES`, comma-separated); empty means the whole cluster."""

    handover_topic: str = "reprise.handover.{namespace}"
    """The compacted topic that holds handover state and worker progress: a template whose `{namespace}` is the
    resource's namespace (`handover_topic_for`), so each namespace has its own and no team reads, writes or floods
    another's (security review C2.1, M3). A name without `{namespace}` is one topic for the whole cluster."""

    def handover_topic_for(self, namespace: str) -> str:
        """The handover topic of a resource in `namespace`: what its replay pods and its live guards use."""
        return self.handover_topic.replace("{namespace}", namespace)

    worker_image: str = "ghcr.io/reprise-io/reprise:0.1.0"
    """The project's own image, for workloads that run Reprise's code (Backfill topic Jobs, drains)."""

    metrics_port: int = 8080
    """Port of the Prometheus endpoint (`/metrics`) and the liveness probe (`/healthz`)."""

    leader_election: bool = True
    """Run only while holding a Lease, so two replicas can run safely (`REPRISE_LEADER_ELECTION`)."""

    lease_namespace: str = field(default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"))
    """Namespace of the leader Lease (`REPRISE_LEASE_NAMESPACE`, default the pod's namespace)."""

    group_empty_timeout: float = 120.0
    """Seconds a Rewind waits for the live group to become Empty after scaling it down before it refuses."""

    replay_role_timeout: float = 120.0
    """Seconds the replay consumers of a `consumer.entrypoint: Service` replay have to start the service's
    replay role (bootstrap the replay in the handover topic) before the status says ReplayRoleNotStarted
    (`REPRISE_REPLAY_ROLE_TIMEOUT`). Long enough for a JVM to start and join its group."""

    spark_image: str = "ghcr.io/reprise-io/reprise-spark:0.1.0"
    """LakeReplay: the Spark image (spark_app/Dockerfile) when `spec.spark.image` is unset (`REPRISE_SPARK_IMAGE`)."""

    spark_version: str = "4.1.4"
    """LakeReplay: the Spark version of that image when `spec.spark.sparkVersion` is unset (`REPRISE_SPARK_VERSION`)."""

    spark_service_account: str | None = None
    """LakeReplay: the driver's service account (it creates the executor pods) when
    `spec.spark.driver.serviceAccount` is unset (`REPRISE_SPARK_SERVICE_ACCOUNT`); empty: the namespace's default."""

    spark_allow_image_override: bool = True
    """LakeReplay: whether `spec.spark.image` may name another image than `spark_image`
    (`REPRISE_SPARK_ALLOW_IMAGE_OVERRIDE`, default true as before). false pins the image: a LakeReplay that names
    another one waits with reason SparkImagePinned and runs nothing."""

    spark_allow_service_account_override: bool = True
    """LakeReplay: whether `spec.spark.driver.serviceAccount` may name another ServiceAccount than
    `spark_service_account` (`REPRISE_SPARK_ALLOW_SERVICE_ACCOUNT_OVERRIDE`, default true as before). false pins
    it: a LakeReplay that names another one waits with reason SparkServiceAccountPinned and runs nothing."""

    spark_jars: tuple[str, ...] | None = None
    """LakeReplay: the jar URIs of every SparkApplication's `deps.jars` (`REPRISE_SPARK_JARS`, comma-separated);
    unset: the Kafka connector jars the Spark image bakes into /opt/spark/jars at its Spark version."""

    spark_progress_uri: str | None = None
    """LakeReplay: base Hadoop URI under which the Spark job records the days it wrote, for its retries
    (`REPRISE_SPARK_PROGRESS_URI`); unset: `_reprise/progress` beside the lake table."""

    oauth_token_endpoints: tuple[str, ...] = ()
    """The OAuth token endpoints a tenant's Kafka Secret may name for OAUTHBEARER (OIDC client_credentials) in
    the operator's own clients (`REPRISE_OAUTH_TOKEN_ENDPOINTS`, comma-separated; the chart's
    `kafka.oauthTokenEndpoints`). Empty: no OAUTHBEARER in the operator; any other URL is refused
    (`replay_worker.connection.setting_allow_list`), so a Secret cannot make the operator POST to an address it chose."""

    kafka_bootstrap_aliases: bootstrap_aliases.Aliases = ()
    """`pattern=host:port` entries that map the Kafka addresses specs name to ones reachable here
    (`REPRISE_KAFKA_BOOTSTRAP_ALIASES`; see `bootstrap_aliases`). Empty on a real cluster; the local platform
    of `make run` maps `*.kafka:*` to its broker so the examples apply unchanged."""

    webhook_port: int = 0
    """Port of the validating admission webhook (HTTPS; `REPRISE_WEBHOOK_PORT`); 0: no webhook. The webhook
    refuses a resource that asks for a right its requester lacks, and an approval by someone without the
    `approve` verb (`admission`, `implied_rights`)."""

    webhook_address: str = ""
    """Address the webhook listens on (`REPRISE_WEBHOOK_ADDRESS`); empty: every interface (in a pod)."""

    webhook_cert_dir: str | None = None
    """Folder with the webhook's certificate `tls.crt`, its key `tls.key` and, when the certificate is not
    self-signed, the CA `ca.crt` (`REPRISE_WEBHOOK_CERT_DIR`, a mounted Secret). Required with a port.
    Re-read when the files change."""

    webhook_configuration: str | None = None
    """Name of a ValidatingWebhookConfiguration the operator writes itself, pointing at
    https://<webhook_address>:<webhook_port> (`REPRISE_WEBHOOK_CONFIGURATION`; the local platform's operator,
    which runs outside the cluster). Unset: the chart ships the configuration. A managed configuration is
    emptied when the operator stops."""

    approver_role: str = "reprise-approver"
    """The ClusterRole that grants the `approve` verb, named in the webhook's refusals of an approval
    (`REPRISE_APPROVER_ROLE`; the chart sets `<fullname>-approver`)."""
    kafka_connections: int = 32
    """Kafka connections (an admin client and its offset readers, per bootstrap list and Secret content) kept
    open at most (`REPRISE_KAFKA_CONNECTIONS`, default 32); the least recently used is closed beyond it. Each
    costs about 5 threads and 1 MiB, plus its offset readers."""

    handover_readers: int = 16
    """Handover topic readers (a follower thread with a copy of the topic, and a writer, per connection and
    topic) kept open at most (`REPRISE_HANDOVER_READERS`, default 16); the least recently used is closed beyond it."""

    offset_readers: int = 64
    """Committed-offset readers (one consumer per followed group) per Kafka connection (`REPRISE_OFFSET_READERS`,
    default 64); the least recently used is closed beyond it."""

    kafka_idle_seconds: float = 600.0
    """Seconds a Kafka connection or handover reader may go unused before it is closed (`REPRISE_KAFKA_IDLE_SECONDS`,
    default 600): longer than the longest retry backoff (30 poll intervals), so a replay that waits keeps its own."""

    kafka_threads: int = 16
    """Threads that run the operator's blocking Kafka calls (`REPRISE_KAFKA_THREADS`, default 16)."""

    kafka_threads_per_namespace: int = 4
    """Of those, how many one namespace may hold at once (`REPRISE_KAFKA_THREADS_PER_NAMESPACE`, default 4): a
    namespace whose brokers do not answer (15 s per call) cannot take the threads of the others."""

    max_active_per_namespace: int = 20
    """Active resources (admitted to planning and not finished, of all three kinds) per namespace
    (`REPRISE_MAX_ACTIVE_PER_NAMESPACE`, default 20; 0: no limit); more wait in Waiting/NamespaceLimit."""

    max_active: int = 200
    """Active resources in the whole operator (`REPRISE_MAX_ACTIVE`, default 200; 0: no limit)."""

    max_backfill_partitions: int = 256
    """The most partitions a LakeReplay's backfill topic may have (`REPRISE_MAX_BACKFILL_PARTITIONS`, default 256):
    they come out of the shared Kafka cluster's partition budget."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "OperatorSettings":
        env = dict(os.environ if env is None else env)
        namespaces = tuple(n.strip() for n in env.get("REPRISE_NAMESPACES", "").split(",") if n.strip())
        leader = env.get("REPRISE_LEADER_ELECTION", "true").lower()
        if leader not in ("true", "false"):
            raise SettingsError(f"REPRISE_LEADER_ELECTION={leader!r} must be true or false")
        return cls(
            poll_interval=_float(env, "REPRISE_POLL_INTERVAL", cls.poll_interval, 0.2),
            namespaces=namespaces,
            handover_topic=_handover_topic(env.get("REPRISE_HANDOVER_TOPIC") or cls.handover_topic),
            worker_image=env.get("REPRISE_WORKER_IMAGE", cls.worker_image),
            metrics_port=_int(env, "REPRISE_METRICS_PORT", cls.metrics_port, 0),
            leader_election=leader == "true",
            lease_namespace=env.get("REPRISE_LEASE_NAMESPACE") or env.get("POD_NAMESPACE", "default"),
            group_empty_timeout=_float(env, "REPRISE_GROUP_EMPTY_TIMEOUT", cls.group_empty_timeout, 1.0),
            replay_role_timeout=_float(env, "REPRISE_REPLAY_ROLE_TIMEOUT", cls.replay_role_timeout, 1.0),
            spark_image=env.get("REPRISE_SPARK_IMAGE") or cls.spark_image,
            spark_version=env.get("REPRISE_SPARK_VERSION") or cls.spark_version,
            spark_service_account=env.get("REPRISE_SPARK_SERVICE_ACCOUNT") or None,
            spark_allow_image_override=_bool(env, "REPRISE_SPARK_ALLOW_IMAGE_OVERRIDE", cls.spark_allow_image_override),
            spark_allow_service_account_override=_bool(
                env, "REPRISE_SPARK_ALLOW_SERVICE_ACCOUNT_OVERRIDE", cls.spark_allow_service_account_override
            ),
            spark_jars=_list(env, "REPRISE_SPARK_JARS"),
            spark_progress_uri=env.get("REPRISE_SPARK_PROGRESS_URI") or None,
            oauth_token_endpoints=_list(env, OAUTH_TOKEN_ENDPOINTS_ENV) or (),
            kafka_bootstrap_aliases=_aliases(env),
            **_webhook(env),
            kafka_connections=_int(env, "REPRISE_KAFKA_CONNECTIONS", cls.kafka_connections, 1),
            handover_readers=_int(env, "REPRISE_HANDOVER_READERS", cls.handover_readers, 1),
            offset_readers=_int(env, "REPRISE_OFFSET_READERS", cls.offset_readers, 1),
            kafka_idle_seconds=_float(env, "REPRISE_KAFKA_IDLE_SECONDS", cls.kafka_idle_seconds, 10.0),
            kafka_threads=_int(env, "REPRISE_KAFKA_THREADS", cls.kafka_threads, 2),
            kafka_threads_per_namespace=_int(
                env, "REPRISE_KAFKA_THREADS_PER_NAMESPACE", cls.kafka_threads_per_namespace, 1
            ),
            max_active_per_namespace=_int(env, "REPRISE_MAX_ACTIVE_PER_NAMESPACE", cls.max_active_per_namespace, 0),
            max_active=_int(env, "REPRISE_MAX_ACTIVE", cls.max_active, 0),
            max_backfill_partitions=_int(env, "REPRISE_MAX_BACKFILL_PARTITIONS", cls.max_backfill_partitions, 1),
        )


#: What a Kafka topic name may hold; `{namespace}` stands for a namespace name, which always fits it.
_TOPIC_TEMPLATE = re.compile(r"^(?:[a-zA-Z0-9._-]|\{namespace\})+$")


def _handover_topic(template: str) -> str:
    """The handover topic template, refused when no namespace could make it a Kafka topic name."""
    if not _TOPIC_TEMPLATE.match(template) or len(template.replace("{namespace}", "n" * 63)) > 249:
        raise SettingsError(
            f"REPRISE_HANDOVER_TOPIC={template!r} must be a Kafka topic name (letters, digits, '.', '_', '-'; at "
            "most 249 with the namespace in it) in which `{namespace}` may stand for the resource's namespace, "
            "for example reprise.handover.{namespace}"
        )
    return template


def _webhook(env: dict[str, str]) -> dict:
    port = _int(env, "REPRISE_WEBHOOK_PORT", 0, 0)
    if port > 65535:
        raise SettingsError(f"REPRISE_WEBHOOK_PORT={port} must be a port number (at most 65535)")
    cert_dir = env.get("REPRISE_WEBHOOK_CERT_DIR") or None
    if port and cert_dir is None:
        raise SettingsError(
            "REPRISE_WEBHOOK_CERT_DIR is required with REPRISE_WEBHOOK_PORT: the folder of the webhook's "
            "tls.crt and tls.key (the API server calls webhooks over HTTPS only)"
        )
    return {
        "webhook_port": port,
        "webhook_address": env.get("REPRISE_WEBHOOK_ADDRESS", ""),
        "webhook_cert_dir": cert_dir,
        "webhook_configuration": env.get("REPRISE_WEBHOOK_CONFIGURATION") or None,
        "approver_role": env.get("REPRISE_APPROVER_ROLE") or OperatorSettings.approver_role,
    }


def _aliases(env: dict[str, str]) -> bootstrap_aliases.Aliases:
    try:
        return bootstrap_aliases.parse(env.get(bootstrap_aliases.ENV, ""))
    except bootstrap_aliases.AliasError as exc:
        raise SettingsError(str(exc)) from None
