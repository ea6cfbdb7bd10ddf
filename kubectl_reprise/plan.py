"""`kubectl reprise plan -f FILE`: the plan of a Reconsume manifest, computed the way the operator computes
it, without creating anything.

It reads Kafka directly with the connection and Secret the manifest names, through the operator's own
code: `Resource.kafka` (the Secret, its label, the settings the operator's allow-list lets run here, and the
messages when it is missing or refused), `reconsume.plan_reconsume`
(the facts and the plan) and `planning.retention_message` (the refusal). A plan the operator would refuse
is refused here with the operator's reason and message, so `plan` is a dry run of the planning step.
"""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml
from pydantic import ValidationError

from reprise_operator.kinds.reconsume import steps as reconsume
from reprise_operator.api import ReconsumeSpec
from reprise_operator.rules.conditions import utc_now
from reprise_operator.doors.kafka_admin import ClientRefused, KafkaCluster, KafkaUnavailable
from reprise_operator.core.lifecycle import Failure, Resource, Waiting
from reprise_operator.rules.planning import Plan, retention_message
from reprise_operator.core.runtime import Runtime
from reprise_operator.shared.settings import OperatorSettings

from reprise_operator.shared import bootstrap_aliases
from reprise_operator.shared.bootstrap_aliases import aliased_spec

from .connection import PluginError, Target, kind_of_manifest
from .kafka_address import KafkaAddressing


class PlanRefused(PluginError):
    """The operator would fail the resource: the reason and message it would put in status."""

    def __init__(self, reason: str, message: str, shown: dict | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        #: The plan as far as it was made (a retention refusal still shows which partitions lost what).
        self.shown = shown


@dataclass
class RewindStop:
    """What a Rewind stops: the live Deployment and the live group, as they are now."""

    deployment: str
    replicas: int
    group: str
    group_state: str
    members: tuple[str, ...]


@dataclass
class ManifestPlan:
    kind: str
    name: str
    namespace: str
    mode: str
    spec: ReconsumeSpec
    plan: Plan
    status_plan: dict
    consumers: int
    rate_per_consumer: float
    rewind: RewindStop | None = None

    @property
    def estimated_seconds(self) -> int:
        """Records over the consumers that can share them (no more than partitions), and never less than the
        largest partition at one consumer's rate: one partition is read by one consumer."""
        parts = self.plan.partitions
        if not parts or self.rate_per_consumer <= 0:
            return 0
        parallel = max(1, min(self.consumers, len(parts)))
        largest = max(p.records for p in parts)
        return int(
            round(max(self.plan.total_records / (self.rate_per_consumer * parallel), largest / self.rate_per_consumer))
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "mode": self.mode,
            "plan": self.status_plan,
            "estimate": {
                "seconds": self.estimated_seconds,
                "consumers": self.consumers,
                "recordsPerSecondPerConsumer": self.rate_per_consumer,
            },
            **(
                {
                    "rewind": {
                        "deployment": self.rewind.deployment,
                        "replicas": self.rewind.replicas,
                        "group": self.rewind.group,
                        "groupState": self.rewind.group_state,
                        "members": list(self.rewind.members),
                    }
                }
                if self.rewind
                else {}
            ),
        }


def read_manifests(path: str) -> list[dict]:
    """The Reprise objects in a YAML file (`-` for stdin); other documents are ignored."""
    try:
        text = (Path("/dev/stdin") if path == "-" else Path(path)).read_text()
    except OSError as exc:
        raise PluginError(f"-f {path}: {exc.strerror}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError as exc:
        raise PluginError(f"-f {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    found = [d for d in docs if str(d.get("apiVersion", "")).startswith("reprise.io/")]
    if not found:
        raise PluginError(f"-f {path}: no reprise.io object in the file (apiVersion: reprise.io/v1alpha1)")
    return found


def parse_spec(body: dict) -> ReconsumeSpec:
    """The spec as the operator reads it; a refusal names the field, like the operator's InvalidSpec."""
    kind = kind_of_manifest(str(body.get("kind", "")))
    if kind.kind != "Reconsume":
        raise PluginError(
            f"kind {kind.kind}: `plan` computes Reconsume plans; a {kind.kind} shows its plan in "
            f"status once applied with approval: Manual (kubectl reprise status NAME)"
        )
    try:
        return ReconsumeSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        raise PlanRefused("InvalidSpec", spec_error(exc.errors())) from None


def spec_error(errors: Sequence[Mapping[str, Any]]) -> str:
    """The first problem of a spec, named as the API server names it. An unknown field comes first: a misspelled
    `consumerGrup` also makes `consumerGroup` missing, and the misspelling is the one to show (with the field of
    the same object it is closest to). The API server says `strict decoding error: unknown field "spec.x"`."""
    unknown = [e for e in errors if e.get("type") == "extra_forbidden"]
    if not unknown:
        first = errors[0]
        return f"spec.{_path(first.get('loc', ()))}: {first.get('msg')}"
    loc = tuple(unknown[0].get("loc", ()))
    missing = [tuple(e.get("loc", ())) for e in errors if e.get("type") == "missing"]
    siblings = [str(m[-1]) for m in missing if m[:-1] == loc[:-1]]
    close = difflib.get_close_matches(str(loc[-1]), siblings, n=1)
    meant = f' (did you mean "spec.{_path((*loc[:-1], close[0]))}"?)' if close else ""
    return f'unknown field "spec.{_path(loc)}"{meant}'


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _path(loc: Sequence[Any]) -> str:
    return ".".join(str(p) for p in loc)


def compute(
    target: Target,
    body: dict,
    namespace: str,
    rate: float,
    now: datetime | None = None,
    token_endpoints: tuple[str, ...] = (),
    kafka: KafkaAddressing = KafkaAddressing(),
) -> ManifestPlan:
    """The manifest's plan, or PlanRefused with the operator's reason and message. The Secret's settings go
    through the operator's allow-list (`Resource.kafka`): a reviewer who plans a tenant's manifest runs none
    of the tenant's file, URL or plugin settings on their own machine. `token_endpoints`: the OAuth token
    endpoints an OAUTHBEARER Secret may name (`--oauth-token-endpoint`, as the chart's list). Kafka is reached
    through `kafka`'s mapping of in-cluster names, as the operator reaches it (kafka_address)."""
    spec = aliased_spec(parse_spec(body), kafka.aliases)
    name = (body.get("metadata") or {}).get("name") or "(unnamed)"
    rt = Runtime(
        settings=OperatorSettings(oauth_token_endpoints=token_endpoints, kafka_bootstrap_aliases=kafka.aliases),
        kube=target.kube,
    )
    resource = Resource(
        "Reconsume",
        reconsume.PLURAL,
        {"metadata": {"name": name, "namespace": namespace, "uid": "plan"}, "spec": body.get("spec")},
        {},
        rt,
    )
    try:
        cluster, _ = asyncio.run(resource.kafka(spec.kafka))
        # The replay group is refused here as the operator refuses it when planning: someone uses it already.
        group = None if spec.mode.value == "Rewind" else reconsume.replay_group_of(spec, namespace, name)
        plan = reconsume.plan_reconsume(cluster, spec, now or utc_now(), group)
    except Waiting as waiting:
        raise PlanRefused(waiting.reason, waiting.message) from None
    except Failure as failure:
        raise PlanRefused(failure.reason, failure.message) from None
    except ClientRefused as exc:
        raise PlanRefused("InvalidKafkaSetting", f"spec.kafka.configFrom.secretRef: {exc}") from None
    except KafkaUnavailable as exc:
        written = (body.get("spec") or {}).get("kafka", {}).get("bootstrapServers")
        mapped = f" (mapped from {written} by {kafka.source})" if written != spec.kafka.bootstrap_servers else ""
        hint = (
            ""
            if mapped
            else f"; if the operator maps that name ({bootstrap_aliases.ENV}), export the same mapping here"
        )
        raise PluginError(
            f"Kafka at {spec.kafka.bootstrap_servers}{mapped} did not answer ({_first_line(exc)}); check "
            f"spec.kafka.bootstrapServers and that this machine can reach it{hint}"
        ) from None
    status_plan = reconsume.plan_partitions_status(plan)
    if plan.at_risk:
        raise PlanRefused("RetentionExceeded", retention_message(plan), status_plan)
    rewind = None
    if spec.mode.value == "Rewind":
        rewind = _rewind_stop(target, cluster, spec, namespace)
        consumers = rewind.replicas
        rate_env = None
    else:
        assert spec.consumer is not None
        consumers = spec.consumer.replicas
        rate_env = next((e.value for e in spec.consumer.env or [] if e.name == "REPRISE_MAX_RECORDS_PER_SECOND"), None)
    per_consumer = float(rate_env) if rate_env not in (None, "", "0") else rate
    return ManifestPlan(
        "Reconsume", name, namespace, spec.mode.value, spec, plan, status_plan, consumers, per_consumer, rewind
    )


def _rewind_stop(target: Target, cluster: KafkaCluster, spec: ReconsumeSpec, namespace: str) -> RewindStop:
    """The live Deployment and group a Rewind stops; refused as the operator would refuse it."""
    assert spec.live_deployment is not None
    name = spec.live_deployment.name
    deployment = target.kube.get_deployment(namespace, name)
    if deployment is None:
        # The operator waits with this message (DeploymentNotFound) until the Deployment exists.
        raise PlanRefused("DeploymentNotFound", f"spec.liveDeployment: Deployment {namespace}/{name} does not exist")
    replicas = int(deployment["spec"].get("replicas", 1))
    description = cluster.describe_group(spec.consumer_group)
    selector = ",".join(
        f"{k}={v}" for k, v in sorted(((deployment["spec"].get("selector") or {}).get("matchLabels") or {}).items())
    )
    pods = target.kube.list_pods(namespace, selector) if selector else []
    ips = {p.get("status", {}).get("podIP") for p in pods} - {None}
    others = tuple(m for m in description.members if m.rsplit("@", 1)[-1].lstrip("/") not in ips)
    if others:
        raise PlanRefused(
            "GroupHasOtherMembers",
            f"spec.consumerGroup {spec.consumer_group} has members that are not pods of Deployment {name} "
            f"({', '.join(others[:5])}): they are not Reprise's to stop. Stop them, or use mode Handover",
        )
    return RewindStop(name, replicas, spec.consumer_group, description.state, description.members)
