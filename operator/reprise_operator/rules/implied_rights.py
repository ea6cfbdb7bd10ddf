"""What creating or changing a Reprise resource amounts to in RBAC terms, so that nobody gets through Reprise
what they could not do directly (findings H2 and L2 of the security review).

Reprise creates its children with the operator's own rights. Without this rule a user allowed only to create
Reconsumes would get, through the operator, a Deployment of any pod template, any Secret of the namespace
mounted into it, and the live Deployment scaled to zero. The admission webhook (`admission.py`) asks the API
server (SubjectAccessReview) whether the *requesting* user holds each right this module lists, and refuses the
resource with `refusal()` when one is missing.

Approval (L2) is a right of its own: the verb `approve` on the kind's resource (as cert-manager approves a
CertificateRequest), so that whoever may edit a resource does not thereby approve its plan or its cutover.

Pure: the typed spec in, a list of `Right`s out; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from ..api import BackfillSpec, LakeReplaySpec, ReconsumeSpec
from ..api.common import ApiModel, Consumer, KafkaConnection
from ..api.verify import CUTOVER_ANNOTATION, Verify
from ..shared.constants import APPROVE_ANNOTATION, GROUP

#: The custom RBAC verb that approves a plan or a cutover; the chart's `reprise-approver` ClusterRole grants it.
APPROVE_VERB = "approve"
#: The chart's role that grants `APPROVE_VERB` (`<fullname>-approver`, for the release `reprise`), named in
#: refusals so the reader knows what to ask for; the chart sets the real name (`REPRISE_APPROVER_ROLE`).
APPROVER_ROLE = "reprise-approver"

SPARK_GROUP = "sparkoperator.k8s.io"


@dataclass(frozen=True)
class Right:
    """One action in the resource's namespace, and the spec field that implies it."""

    verb: str
    group: str
    resource: str
    field: str
    name: Optional[str] = None
    subresource: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, Optional[str]]:
        """What the API server is asked: the same right implied by two fields is asked once."""
        return (self.verb, self.group, self.resource, self.subresource, self.name)

    def action(self) -> str:
        """`create deployments.apps`, `get secrets/kafka`, `patch deployments.apps/orders --subresource=scale`:
        what to ask `kubectl auth can-i` to see it for oneself."""
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.name:
            what += f"/{self.name}"
        return f"{self.verb} {what}" + (f" --subresource={self.subresource}" if self.subresource else "")


def refusal(right: Right, namespace: str, username: str, approver_role: str = APPROVER_ROLE) -> str:
    """The message of a refused request: the field, the missing right, where, and who."""
    message = f'{right.field} needs "{right.action()}" in namespace {namespace}, which user {username} may not do'
    if right.verb == APPROVE_VERB:
        message += f" (the verb {APPROVE_VERB} is granted by the ClusterRole {approver_role})"
    return message


# ---------------------------------------------------------------------------------------------------
# What a spec asks the operator to do


def _deployments(consumer: Optional[Consumer], field: str) -> list[Right]:
    if consumer is None:
        return []
    if consumer.deployment_ref is not None:
        ref = consumer.deployment_ref.name
        return [
            Right("create", "apps", "deployments", f"{field}.deploymentRef"),
            # The clone copies the live pod template (its ServiceAccount, Secrets, env) into an object the
            # requester can read: reading that template is part of the request.
            Right("get", "apps", "deployments", f"{field}.deploymentRef", name=ref),
        ]
    return [Right("create", "apps", "deployments", f"{field}.template")]


def _scale(live: Any, field: str) -> list[Right]:
    if live is None:
        return []
    return [Right("patch", "apps", "deployments", field, name=live.name, subresource="scale")]


def _verify_job(verify: Optional[Verify]) -> list[Right]:
    return [] if verify is None else [Right("create", "batch", "jobs", "spec.verify.template")]


def _kafka_secret(kafka: KafkaConnection) -> list[Right]:
    if kafka.config_from is None:
        return []
    name = kafka.config_from.secret_ref.name
    return [Right("get", "", "secrets", "spec.kafka.configFrom.secretRef", name=name)]


def _registry_secret(spec: ReconsumeSpec) -> list[Right]:
    """The registry's credentials reach the replay pods (an image the creator chooses): reading them is implied."""
    registry = spec.schema_registry
    if registry is None or registry.credentials_secret is None:
        return []
    name = registry.credentials_secret.name
    return [Right("get", "", "secrets", "spec.schemaRegistry.credentialsSecret", name=name)]


def reconsume_rights(spec: ReconsumeSpec) -> list[Right]:
    return [
        *_deployments(spec.consumer, "spec.consumer"),
        *_scale(spec.live_deployment, "spec.liveDeployment"),
        *_verify_job(spec.verify),
        *_kafka_secret(spec.kafka),
        *_registry_secret(spec),
    ]


def backfill_rights(spec: BackfillSpec) -> list[Right]:
    rights = []
    if spec.source.job is not None:
        rights.append(Right("create", "batch", "jobs", "spec.source.job.template"))
    if spec.keys_from is not None:
        # The keys are read by the operator and produced to Kafka: a way to read a ConfigMap.
        name = spec.keys_from.config_map_ref.name
        rights.append(Right("get", "", "configmaps", "spec.keysFrom.configMapRef", name=name))
    return [*rights, *_kafka_secret(spec.kafka)]


def lakereplay_rights(spec: LakeReplaySpec) -> list[Right]:
    rights = [Right("create", SPARK_GROUP, "sparkapplications", "spec.spark")]
    rights += _deployments(spec.consumer, "spec.consumer")
    if spec.then is not None:
        then = spec.then.reconsume
        rights += _deployments(then.consumer, "spec.then.reconsume.consumer")
        rights += _scale(then.live_deployment, "spec.then.reconsume.liveDeployment")
    rights += _verify_job(spec.verify)
    rights += _kafka_secret(spec.kafka)
    for index, env_from in enumerate(spec.spark.env_from or []):
        rights.append(
            Right("get", "", "secrets", f"spec.spark.envFrom[{index}].secretRef", name=env_from.secret_ref.name)
        )
    if spec.source.schema_ is not None:
        name = spec.source.schema_.config_map_ref.name
        rights.append(Right("get", "", "configmaps", "spec.source.schema.configMapRef", name=name))
    return rights


_RULES: dict[type, Any] = {
    ReconsumeSpec: reconsume_rights,
    BackfillSpec: backfill_rights,
    LakeReplaySpec: lakereplay_rights,
}


def spec_rights(spec: ApiModel) -> list[Right]:
    """Every right the spec (a ReconsumeSpec, BackfillSpec or LakeReplaySpec) implies, each asked once (the
    first field that implies it names it)."""
    return distinct(_RULES[type(spec)](spec))


def distinct(rights: Iterable[Right]) -> list[Right]:
    seen: set[tuple[str, str, str, str, Optional[str]]] = set()
    unique = []
    for right in rights:
        if right.key not in seen:
            seen.add(right.key)
            unique.append(right)
    return unique


def spec_changed(old: Optional[Mapping[str, Any]], new: Mapping[str, Any]) -> bool:
    """A create, or an update that touched `spec`. Updates of metadata only (the operator's finalizer and
    bookkeeping annotations, a person's labels) ask for nothing new and are not checked for the spec."""
    return old is None or (old.get("spec") or {}) != (new.get("spec") or {})


# ---------------------------------------------------------------------------------------------------
# What approves


def _annotation(body: Optional[Mapping[str, Any]], key: str) -> Optional[str]:
    if body is None:
        return None
    return ((body.get("metadata") or {}).get("annotations") or {}).get(key)


def _approval(body: Optional[Mapping[str, Any]]) -> Optional[str]:
    if body is None:
        return None
    return (body.get("spec") or {}).get("approval", "Automatic")


def approval_rights(plural: str, old: Optional[Mapping[str, Any]], new: Mapping[str, Any]) -> list[Right]:
    """The approvals this request gives, each needing `approve` on the resource: setting the annotation
    reprise.io/approve or reprise.io/approve-cutover to true (also at create: a Manual resource created
    approved), and turning a Manual resource Automatic (which approves its plan and cutover at once).

    Creating a resource with approval Automatic asks for no approval: the approval is the platform's
    choice of who may create. Removing an approval never needs the right."""
    name = (new.get("metadata") or {}).get("name")
    rights = []
    for annotation in (APPROVE_ANNOTATION, CUTOVER_ANNOTATION):
        if _annotation(new, annotation) == "true" and _annotation(old, annotation) != "true":
            rights.append(Right(APPROVE_VERB, GROUP, plural, f'metadata.annotations["{annotation}"]', name=name))
    if old is not None and _approval(old) == "Manual" and _approval(new) == "Automatic":
        rights.append(Right(APPROVE_VERB, GROUP, plural, "spec.approval", name=name))
    return distinct(rights)


__all__ = [
    "APPROVER_ROLE",
    "APPROVE_VERB",
    "Right",
    "approval_rights",
    "backfill_rights",
    "distinct",
    "lakereplay_rights",
    "reconsume_rights",
    "refusal",
    "spec_changed",
    "spec_rights",
]
