"""What every kind's reconcile shares: the working status, phases and conditions, Events, the Kafka
connection from a Secret reference, the finished-resource TTL, and writing status only when it changed.

A reconcile runs under a per-object lock (`ObjectMemory.lock`) and works on a copy of the last status it
wrote (Kopf's cached body can lag behind our own patches), so two triggers for one object never act on a
stale status, and an operator restart starts again from what the API server holds.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Literal, TypeVar

import kopf
from pydantic import BaseModel, ValidationError

from replay_worker.contract import RefusedSetting, client_refusal, operator_settings

from ..shared import metrics
from ..api import API_VERSION, KINDS
from ..api.common import Condition, ConditionType, Phase, ResourceStatus, StatusModel
from ..shared.bootstrap_aliases import aliased_spec
from ..rules.conditions import ConditionStatus, find, is_true, set_condition, utc_now
from ..shared.constants import LABEL_KAFKA_CLIENT, replay_id
from ..doors.handover_state import HandoverBehind
from ..doors.kafka_admin import ClientRefused, KafkaCluster, KafkaUnavailable, retriable_error
from ..shared.kafka_pool import on_behalf_of
from ..doors.kube import ApiError, KubeUnavailable, NotOwned, SecretNotLabelled
from ..rules.progress import DrainClock, EtaWindow
from ..rules.replay_groups import groups_under_replay
from .runtime import Runtime
from ..rules.workloads import Owner

log = logging.getLogger("reprise.lifecycle")

FINISHED = (Phase.COMPLETE, Phase.FAILED)

SpecT = TypeVar("SpecT", bound=BaseModel)
StatusT = TypeVar("StatusT", bound=StatusModel)

#: Each kind's status model (`api.KINDS`): what `Resource.record` builds the status with.
STATUS_MODELS: dict[str, type[StatusModel]] = {kind.kind: kind.status for kind in KINDS}


class Retry(Exception):
    """Not done yet and not an error: try again at the next poll (the message goes to the log only)."""


class Waiting(Exception):
    """Blocked on something a person must provide (a missing Secret or Deployment): shown as a condition."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Failure(Exception):
    """The resource cannot succeed as specified: it ends in phase Failed with this reason and message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


#: Routine waiting: logged at INFO, not a failure, nothing in status.
WAITS = (Retry, HandoverBehind)
TEMPORARY = (KafkaUnavailable, KubeUnavailable, *WAITS)

#: The longest wait between two attempts after failures in a row, in poll intervals.
MAX_BACKOFF_POLLS = 30


def retry_delay(failures: int, poll_interval: float) -> float:
    """Seconds to wait before the next attempt after `failures` failures in a row: the poll interval,
    doubled per failure, at most MAX_BACKOFF_POLLS intervals (so an unreachable Kafka or a failing API call
    is not hammered every poll, and a recovery is still noticed within minutes)."""
    if failures <= 0:
        return 0.0
    return poll_interval * min(2 ** (failures - 1), MAX_BACKOFF_POLLS)


@dataclass
class ObjectMemory:
    """The operator's in-memory state of one resource (lost on restart by design: all of it is derivable)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    status: dict | None = None
    eta: EtaWindow = field(default_factory=EtaWindow)
    drain: DrainClock = field(default_factory=DrainClock)
    processed: int | None = None
    processed_since: datetime | None = None
    #: Failed reconciles in a row (transient or unexpected errors), and when the timer may try again.
    failures: int = 0
    retry_at: datetime | None = None
    #: Set by a step that expects the resource to move on before the next poll (`progress.looks_soon`): the
    #: timer then looks again every `SOON_LOOK_S` instead of waiting a whole poll interval.
    soon: bool = False
    #: With `soon`: only the live side's acknowledgements are awaited, so the timer looks every `SETTLE_LOOK_S`
    #: (such a look reads what the handover topic's follower already holds, and writes nothing new).
    settling: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def memory_of(memo: Any) -> ObjectMemory:
    """The ObjectMemory kept in Kopf's per-object memo."""
    found = getattr(memo, "reprise", None)
    if found is None:
        found = ObjectMemory()
        memo.reprise = found
    return found


@dataclass
class Resource:
    """One resource being reconciled: identity, the working status, and how to report."""

    kind: str
    plural: str
    body: Any
    status: dict
    rt: Runtime
    now: Callable[[], datetime] = utc_now

    @property
    def namespace(self) -> str:
        return self.body["metadata"]["namespace"]

    @property
    def name(self) -> str:
        return self.body["metadata"]["name"]

    @property
    def uid(self) -> str:
        return self.body["metadata"]["uid"]

    @property
    def generation(self) -> int:
        return int(self.body["metadata"].get("generation") or 1)

    @property
    def annotations(self) -> dict:
        return dict(self.body["metadata"].get("annotations") or {})

    @property
    def phase(self) -> Phase:
        return Phase(self.status.get("phase") or Phase.PENDING.value)

    @property
    def replay_id(self) -> str:
        return replay_id(self.namespace, self.name, self.uid)

    def owner(self) -> Owner:
        """The owner reference every child carries, so deleting the resource garbage-collects them."""
        return Owner(API_VERSION, self.kind, self.name, self.uid)

    def spec_as(self, model: type[SpecT]) -> SpecT:
        """The spec as its typed model. One the API server let through but the model refuses (a CRD older
        than the operator) fails the resource with the field named. The Kafka address is the one this
        operator reaches (`bootstrap_aliases`)."""
        try:
            spec = model.model_validate(self.body.get("spec") or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise Failure("InvalidSpec", f"spec.{where}: {first.get('msg')}") from None
        return aliased_spec(spec, self.rt.settings.kafka_bootstrap_aliases)

    def record(self, *, keep: bool = False, **fields: Any) -> None:
        """Write top-level status fields through the kind's status model: `fields` by their Python names,
        each a value or a model of the API (`children=ReconsumeChildren(...)`, `started_at=now`), written as
        the CRD stores them. With `keep`, a field status already has stays as it is (startedAt: the first
        start counts)."""
        written = STATUS_MODELS[self.kind](**fields).as_status()
        for key, value in written.items():
            if not (keep and key in self.status):
                self.status[key] = value

    async def persist(self, **fields: Any) -> None:
        """`record` the fields and write them to the API server now, not after the step: for a claim that
        must be there before the step acts on it (status.created, before a group or topic is used), so that a
        crash between the two leaves a status that says whose the name is."""
        written = STATUS_MODELS[self.kind](**fields).as_status()
        self.record(**fields)
        await self.rt.kube.aio.patch_status(self.plural, self.namespace, self.name, written)

    def status_as(self, model: type[StatusT]) -> StatusT:
        """The status as its typed model (`ReconsumeStatus`), read by Python names instead of the CRD's
        camelCase keys. Status models ignore fields they do not know, so a newer operator's status reads."""
        return model.model_validate(self.status)

    def part(self, key: str, model: type[StatusT]) -> StatusT:
        """The part `key` of status as its model (`verification` as `VerificationStatus`): for code that every
        kind shares, which knows the part's model but not the kind's whole status model."""
        return model.model_validate(self.status.get(key) or {})

    def updated(self, key: str, model: type[StatusT], **changes: Any) -> StatusT:
        """The part `key` of status as its model, with `changes` (by their Python names) applied: what to
        `record` when one field of a part moves (a Job added to `children`, `sentAt` to the signal)."""
        return self.part(key, model).model_copy(update=changes)

    def condition_of(self, type_: ConditionType) -> Condition | None:
        """The condition of that type, typed (its status, reason and message), if set. Only the conditions are
        read, so a part of status this read does not need cannot fail it."""
        return ResourceStatus.model_validate({"conditions": self.status.get("conditions") or []}).condition(type_)

    def condition_true(self, type_: ConditionType) -> bool:
        return is_true(self.status.get("conditions"), type_.value)

    def condition(self, type_: ConditionType, status: ConditionStatus, reason: str, message: str = "") -> None:
        self.status["conditions"] = set_condition(
            self.status.get("conditions"), type_.value, status, reason, message, self.generation, clock=self.now
        )

    def set_phase(self, phase: Phase, reason: str, message: str, event: bool = True, warning: bool = False) -> None:
        changed = self.status.get("phase") != phase.value
        self.record(phase=phase)
        metrics.PHASES.set(self.kind, self.namespace, self.name, phase.value)
        if changed and event:
            self.event(reason, message, warning=warning)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        """A Kubernetes Event on the resource. Messages never carry Secret values (none are ever read into them)."""
        try:
            (kopf.warn if warning else kopf.info)(self.body, reason=reason, message=message[:1000])
        except Exception as exc:  # posting Events is best-effort; the status carries the truth
            log.debug("could not post event: %s", exc)

    def fail(self, reason: str, message: str) -> None:
        self.condition(ConditionType.FAILED, "True", reason, message)
        self.condition(ConditionType.RUNNING, "False", reason, message)
        self.record(completed_at=self.now(), keep=True)
        self.set_phase(Phase.FAILED, reason, message, warning=True)

    def complete(self, reason: str, message: str) -> None:
        self.condition(ConditionType.COMPLETE, "True", reason, message)
        self.condition(ConditionType.RUNNING, "False", reason, message)
        self.record(completed_at=self.now(), keep=True)
        self.set_phase(Phase.COMPLETE, reason, message)

    def approval_message(self) -> str:
        """The Approved condition's message: how this resource was approved."""
        if (self.body.get("spec") or {}).get("approval", "Automatic") == "Automatic":
            return "approval is Automatic"
        return "approved with the annotation reprise.io/approve=true"

    def approved(self) -> bool:
        spec_approval = (self.body.get("spec") or {}).get("approval", "Automatic")
        return spec_approval == "Automatic" or self.annotations.get("reprise.io/approve") == "true"

    async def kafka(self, kafka_spec: Any) -> tuple[KafkaCluster, dict[str, str]]:
        """The shared admin client of the resource's cluster and the client settings from its Secret.

        The Secret is read only if its owner labelled it `reprise.io/kafka-client=true`, and only the settings
        the operator may run in its own process are used (`replay_worker.connection.setting_allow_list`): any other key
        is refused here, before a client is built, with the key named and never its value. The pods the
        resource makes mount the whole Secret: they are the tenant's own processes."""
        config: dict[str, str] = {}
        if kafka_spec.config_from is not None:
            secret = kafka_spec.config_from.secret_ref.name
            where = f"spec.kafka.configFrom.secretRef: Secret {self.namespace}/{secret}"
            try:
                data = await self.rt.kube.aio.secret_data(self.namespace, secret, LABEL_KAFKA_CLIENT)
            except SecretNotLabelled:
                raise Waiting(
                    "SecretNotLabelled",
                    f"{where} is not labelled {LABEL_KAFKA_CLIENT}=true, and the operator reads only Secrets "
                    f"labelled for it: kubectl label secret {secret} -n {self.namespace} {LABEL_KAFKA_CLIENT}=true",
                ) from None
            except ApiError as exc:
                if exc.status != 403:
                    raise
                raise Waiting(
                    "SecretForbidden",
                    f"spec.kafka.configFrom.secretRef: the operator may not read Secret {self.namespace}/{secret}; "
                    "allow it in the chart (rbac.secrets.names or watchNamespaces)",
                ) from None
            if data is None:
                raise Waiting(
                    "SecretNotFound",
                    f"spec.kafka.configFrom.secretRef: Secret {self.namespace}/{secret} does not exist; create it "
                    "with the librdkafka client settings (security.protocol, sasl.*, ssl.*) and the label "
                    f"{LABEL_KAFKA_CLIENT}=true",
                )
            try:
                config = operator_settings(data, self.rt.settings.oauth_token_endpoints)
            except RefusedSetting as refused:
                raise Waiting(refused.reason, f"{where}: {refused}") from None
            try:
                cluster = self.rt.clusters.get(kafka_spec.bootstrap_servers, config)
            except ClientRefused as exc:
                raise Waiting("InvalidKafkaSetting", f"{where}: {exc}") from None
            return cluster, config
        return self.rt.clusters.get(kafka_spec.bootstrap_servers, config), config


def admit(resource: Resource) -> None:
    """The chart's limits on active resources (`namespace_limit`): a resource over them waits in Pending, with
    the Waiting condition's reason NamespaceLimit, and is admitted at a later poll once a slot frees."""
    refused = resource.rt.active.admit(resource.uid, resource.namespace)
    if refused is not None:
        raise Waiting("NamespaceLimit", refused)


def may_start(resource: Resource, suspend: bool) -> bool:
    """The gates between PlanReady and starting: the approval, then spec.suspend (a replay suspended
    before it started has nothing running, so it only waits)."""
    if not resource.approved():
        return False
    resource.condition(ConditionType.APPROVED, "True", "Approved", resource.approval_message())
    if suspend:
        resource.condition(
            ConditionType.SUSPENDED, "True", "SuspendedBeforeStart", "spec.suspend is true: nothing started"
        )
        return False
    if resource.condition_true(ConditionType.SUSPENDED):
        resource.condition(ConditionType.SUSPENDED, "False", "Resumed", "spec.suspend is false")
    return True


async def expire_finished(resource: Resource, ttl_seconds: int | None) -> None:
    """Delete a finished resource once `ttlSecondsAfterFinished` has passed since it finished."""
    if ttl_seconds is None:
        return
    finished_at = resource.status_as(ResourceStatus).completed_at
    if finished_at is None:
        return
    if resource.now() - finished_at >= timedelta(seconds=ttl_seconds):
        resource.event("Expired", f"deleting: finished more than ttlSecondsAfterFinished={ttl_seconds}s ago")
        await resource.rt.kube.aio.delete_replay(resource.plural, resource.namespace, resource.name)


#: The most transitions one trigger runs in a row (Pending to Draining is four); the rest wait for the poll.
MAX_TRANSITIONS = 6


async def run_reconcile(
    kind: str,
    plural: str,
    rt: Runtime,
    body: Any,
    memo: Any,
    step: Callable[[Resource, ObjectMemory], Any],
    backoff: bool = False,
) -> None:
    """Run a resource's transitions under its lock: one `step` (one transition, `driver.transition`), its
    status written if it changed, and, while the phase moved on to one not finished, the next step. So the
    status a step leaves (the plan, the children it made) is in the API server before the next step acts.

    Every failure reaches the status: what a person must fix (Waiting, NotOwned) as the Waiting condition,
    retried every poll so the fix is picked up at once; a transient failure (Kafka or the API unreachable)
    or an unexpected one as the Waiting condition too, with reason KafkaUnavailable, KubeUnavailable or
    ReconcileError, and with `backoff` (the timer) the next attempt waits `retry_delay`. `Retry` is routine
    waiting, not a failure: logged at INFO, nothing in status."""
    memory = memory_of(memo)
    # Every Kafka call of this reconcile takes its namespace's share of the Kafka pool (kafka_pool).
    with on_behalf_of(body["metadata"]["namespace"]):
        async with memory.lock:
            if backoff and memory.retry_at is not None and utc_now() < memory.retry_at:
                return
            rt.heartbeat.beat()
            for _ in range(MAX_TRANSITIONS):
                before, after = await _reconcile_once(kind, plural, rt, body, memory, step)
                if after == before or after in FINISHED or memory.failures:
                    break


def failure_of(exc: Exception) -> tuple[str, str]:
    """The Waiting reason and message of an exception no step turned into a Waiting or a Failure: a Kafka error
    Kafka marks retriable (NOT_LEADER_OR_FOLLOWER while a new topic gets its leader) is KafkaUnavailable, a
    transient wait like any other; anything else is ReconcileError, a bug or an unexpected answer."""
    transient = retriable_error(exc)
    if transient is not None:
        return "KafkaUnavailable", f"{transient} (retriable): {exc}"
    return "ReconcileError", f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class StepOutcome:
    """What the reconcile makes of an exception a step raised (`outcome_of`). Pure data.

    - `wait`: a person must fix something: the Waiting condition, retried every poll, no backoff;
    - `fail`: the resource is Failed with this reason;
    - `routine`: waiting in place (Retry, a handover topic not read far enough): logged at INFO, nothing in status;
    - `retry`: transient or unexpected: counted in the metrics, the Waiting condition, retried with backoff;
      `trace` asks for the traceback in the log (an unexpected error, not a known transient one).
    """

    action: Literal["wait", "fail", "routine", "retry"]
    reason: str
    message: str
    trace: bool = False


def outcome_of(exc: Exception) -> StepOutcome:
    """The reconcile's failure mapping: every exception a step may raise, to what the status shows. Pure."""
    if isinstance(exc, Waiting):
        return StepOutcome("wait", exc.reason, exc.message)
    if isinstance(exc, NotOwned):
        return StepOutcome("wait", "NameTaken", str(exc))
    if isinstance(exc, Failure):
        return StepOutcome("fail", exc.reason, exc.message)
    if isinstance(exc, WAITS):
        return StepOutcome("routine", type(exc).__name__, str(exc))
    if isinstance(exc, (KafkaUnavailable, KubeUnavailable)):
        return StepOutcome("retry", type(exc).__name__, str(exc))
    refused = client_refusal(str(exc))
    if refused is not None:
        # A Kafka client built later than the admin client (a consumer, a producer) refused a setting of
        # the Secret: librdkafka's message may quote the value, so neither status nor log gets it.
        return StepOutcome("retry", "InvalidKafkaSetting", f"spec.kafka.configFrom.secretRef: {refused}")
    reason, message = failure_of(exc)
    # A retriable Kafka error that reached us raw is one line in the log, like KafkaUnavailable; a bug is traced.
    return StepOutcome("retry", reason, message, trace=reason != "KafkaUnavailable")


async def _reconcile_once(
    kind: str, plural: str, rt: Runtime, body: Any, memory: ObjectMemory, step: Callable[[Resource, ObjectMemory], Any]
) -> tuple[Phase, Phase]:
    """One step and its status write; the phase before and after."""
    old = copy.deepcopy(memory.status if memory.status is not None else dict(body.get("status") or {}))
    old.pop("kopf", None)
    resource = Resource(kind, plural, body, copy.deepcopy(old), rt)
    before = resource.phase
    memory.soon = memory.settling = False
    failed: tuple[str, str] | None = None
    try:
        await step(resource, memory)
        if resource.condition_true(ConditionType.WAITING):
            resource.condition(ConditionType.WAITING, "False", "Resolved", "nothing is missing any more")
    except kopf.PermanentError:
        raise
    except Exception as exc:  # every failure reaches the status, by `outcome_of`
        outcome = outcome_of(exc)
        if outcome.action == "wait":
            resource.condition(ConditionType.WAITING, "True", outcome.reason, outcome.message)
            if _changed_condition(old, resource.status, ConditionType.WAITING):
                resource.event(outcome.reason, outcome.message, warning=True)
        elif outcome.action == "fail":
            resource.fail(outcome.reason, outcome.message)
        elif outcome.action == "routine":
            log.info("%s %s/%s: waiting: %s", kind, resource.namespace, resource.name, exc)
        else:
            metrics.RECONCILE_ERRORS.labels(kind, type(exc).__name__).inc()
            failed = (outcome.reason, outcome.message)
            if outcome.trace:
                log.exception("%s %s/%s: reconcile failed", kind, resource.namespace, resource.name)
            elif outcome.reason == "InvalidKafkaSetting":
                log.warning("%s %s/%s: %s", kind, resource.namespace, resource.name, outcome.message)
            else:
                log.warning("%s %s/%s: will retry: %s", kind, resource.namespace, resource.name, outcome.message)
    if failed is None:
        memory.failures, memory.retry_at = 0, None
    else:
        memory.failures += 1
        delay = retry_delay(memory.failures, rt.settings.poll_interval)
        memory.retry_at = utc_now() + timedelta(seconds=delay)
        reason, message = failed
        resource.condition(
            ConditionType.WAITING,
            "True",
            reason,
            f"{message[:2000]} (attempt {memory.failures}; the next in {delay:.0f}s)",
        )
        if _changed_condition(old, resource.status, ConditionType.WAITING):
            resource.event(reason, message[:1000], warning=True)
    resource.record(observed_generation=resource.generation)
    metrics.PHASES.set(kind, resource.namespace, resource.name, resource.phase.value)
    if resource.phase in FINISHED:
        rt.active.release(resource.uid)
    metrics.REPLAY_GROUPS.set(
        kind,
        resource.namespace,
        resource.name,
        groups_under_replay(kind, resource.namespace, resource.name, resource.body.get("spec") or {}, resource.status),
    )
    if resource.status != old:
        await rt.kube.aio.patch_status(plural, resource.namespace, resource.name, _patch_of(old, resource.status))
        memory.status = resource.status
    return before, resource.phase


def _changed_condition(old: dict, new: dict, type_: ConditionType) -> bool:
    """The condition's status or reason moved between the two statuses (an Event is posted only then)."""

    def pick(status: dict) -> tuple:
        found = find(status.get("conditions"), type_.value)
        return (found.get("status"), found.get("reason")) if found else (None, None)

    return pick(old) != pick(new)


def _patch_of(old: dict, new: dict) -> dict:
    """A merge patch from `old` to `new` at the top level: removed keys become null."""
    patch = {k: v for k, v in new.items() if old.get(k) != v}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch
