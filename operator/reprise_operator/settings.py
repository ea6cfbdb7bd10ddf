"""The operator's one settings object, read from environment variables at start, rejecting bad values."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import bootstrap_aliases


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

    handover_topic: str = "reprise.handover"
    """The compacted topic that holds handover state and worker progress, one per Kafka cluster."""

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

    kafka_bootstrap_aliases: bootstrap_aliases.Aliases = ()
    """`pattern=host:port` entries that map the Kafka addresses specs name to ones reachable here
    (`REPRISE_KAFKA_BOOTSTRAP_ALIASES`; see `bootstrap_aliases`). Empty on a real cluster; the local platform
    of `make run` maps `*.kafka:*` to its broker so the examples apply unchanged."""

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
            handover_topic=env.get("REPRISE_HANDOVER_TOPIC", cls.handover_topic),
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
            kafka_bootstrap_aliases=_aliases(env),
        )


def _aliases(env: dict[str, str]) -> bootstrap_aliases.Aliases:
    try:
        return bootstrap_aliases.parse(env.get(bootstrap_aliases.ENV, ""))
    except bootstrap_aliases.AliasError as exc:
        raise SettingsError(str(exc)) from None
