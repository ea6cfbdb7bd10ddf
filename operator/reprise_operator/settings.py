"""The operator's one settings object, read from environment variables at start, rejecting bad values."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


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
        )
