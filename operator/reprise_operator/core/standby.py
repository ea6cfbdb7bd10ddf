"""What every kind that runs a clone of the service shares: the pod template to clone, the delivery the
clone needs (the service's handler or a forward topic), and how far its consumer group is.

Reconsume's replay consumers and LakeReplay's drain consumers are both standby Deployments cloned from the
live service (`workloads.replay_deployment_manifest`); both report their group's progress the same way,
into `status.progress` and the replay metrics, and both say in status when their pods fail
(`report_failing_pods`).
"""

from __future__ import annotations

import re

from datetime import timedelta

from replay_worker.contract import WorkerSettings, service_unsupported_asked

from ..shared import metrics
from ..api import Consumer, Entrypoint, KafkaConnection, format_duration
from ..api.common import ConditionStatus, ConditionType
from ..shared.constants import child_labels
from .lifecycle import Failure, ObjectMemory, Resource, Waiting
from ..rules.pod_failures import failing_containers, pod_failure_message
from ..rules.progress import PartitionView, Progress, progress_status, summarize
from ..rules.workloads import DELIVERY_VARIABLES, pick_container, replay_deployment_manifest

#: With `consumer.entrypoint: Service` the service's own code handles the records, so there is no delivery to
#: pass. `WorkerSettings` (the Python worker's contract) insists on one; this stands in while the settings are
#: validated, and `replay_deployment_manifest` leaves every delivery variable out of the service's env.
SERVICE_DELIVERY = {"REPRISE_HANDLER": "service:own-handler"}


def delivery_from_env(*envs: list[dict]) -> dict[str, str]:
    """REPRISE_HANDLER / REPRISE_FORWARD_TOPIC as the user set them in the template or `consumer.env`."""
    found: dict[str, str] = {}
    for env in envs:
        for item in env or []:
            if item.get("name") in DELIVERY_VARIABLES and item.get("value"):
                found[item["name"]] = item["value"]
    return found


def consumer_delivery(consumer: Consumer, template: dict, field: str = "spec.consumer") -> dict[str, str]:
    """What the replay consumers do with a record: the Python worker's handler or forward topic (required
    with entrypoint ReplayWorker), or, with entrypoint Service, the service's own handler."""
    if consumer.entrypoint is Entrypoint.SERVICE:
        return dict(SERVICE_DELIVERY)
    return require_delivery(delivery_from_env(template_env(template, consumer.container), user_env(consumer)), field)


def require_delivery(delivery: dict[str, str], field: str = "spec.consumer") -> dict[str, str]:
    """The clone must know what to do with a record: the service's handler or a topic to copy it to."""
    if not delivery:
        raise Failure(
            "NoDelivery",
            f"{field}.env (or the pod template) must set REPRISE_HANDLER (package.module:function of the "
            "service's code) or REPRISE_FORWARD_TOPIC (a topic to copy matching records to)",
        )
    return delivery


async def live_template(resource: Resource, consumer: Consumer, field: str = "spec.consumer") -> dict:
    """The pod template to clone: `consumer.template`, or that of the live Deployment it names."""
    if consumer.template is not None:
        return consumer.template
    name = consumer.deployment_ref.name  # type: ignore[union-attr]
    live = await resource.rt.kube.aio.get_deployment(resource.namespace, name)
    if live is None:
        raise Waiting(
            "DeploymentNotFound", f"{field}.deploymentRef: Deployment {resource.namespace}/{name} does not exist"
        )
    return live["spec"]["template"]


#: The schema registry's credentials in a replay pod (replay_worker.connection.schema_registry reads them).
REGISTRY_CREDENTIALS_ENV = {
    "REPRISE_SCHEMA_REGISTRY_USERNAME": "username",
    "REPRISE_SCHEMA_REGISTRY_PASSWORD": "password",
}


def registry_credentials_env(secret: str | None) -> list[dict]:
    """The registry's credentials as environment from `secret` (only its keys username and password: the
    allow-list), never as values: the Secret's content stays out of the Deployment."""
    if not secret:
        return []
    return [
        {"name": env, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": key == "password"}}}
        for env, key in REGISTRY_CREDENTIALS_ENV.items()
    ]


def standby_deployment(
    resource: Resource,
    *,
    name: str,
    component: str,
    template: dict,
    consumer: Consumer,
    settings: WorkerSettings,
    kafka: KafkaConnection,
    replicas: int | None = None,
    registry_secret: str | None = None,
) -> dict:
    """The standby Deployment: the service's pod template running the replay worker with `settings`, the
    user's `spec.consumer` env and resources on top, owned by the resource. `replicas`: spec.consumer.replicas
    clamped to the partitions replayed (`cluster_caps.replay_replicas`), else spec.consumer.replicas."""
    index = service_container(template, consumer.container)
    worker_env = settings.to_env()
    if settings.mode == "Handover":
        refuse_other_handover_topic(template["spec"]["containers"][index], settings.handover_topic, resource.namespace)
    if consumer.entrypoint is Entrypoint.SERVICE:
        refuse_unsupported(worker_env, user_env(consumer))
    manifest = replay_deployment_manifest(
        owner=resource.owner(),
        name=name,
        namespace=resource.namespace,
        labels=child_labels(resource.kind, resource.name, component),
        pod_template=template,
        replicas=consumer.replicas if replicas is None else replicas,
        worker_env=worker_env,
        user_env=[*registry_credentials_env(registry_secret), *user_env(consumer)],
        kafka_secret=kafka.config_from.secret_ref.name if kafka.config_from else None,
        container_name=consumer.container,
        keep_command=consumer.entrypoint is Entrypoint.SERVICE,
        pod_labels=consumer.pod_labels,
    )
    if consumer.resources is not None:
        manifest["spec"]["template"]["spec"]["containers"][index]["resources"] = consumer.resources.dump()
    return manifest


def refuse_other_handover_topic(container: dict, topic: str, namespace: str) -> None:
    """The live service's guard reads the handover topic its Deployment names in `REPRISE_HANDOVER_TOPIC`; a
    replay that wrote to another one would never be handed over (the guard would not skip, and every replayed
    record would be processed twice). Refused before any replay pod starts, naming both topics. A value made of
    `$(VAR)` references is expanded as the kubelet would, with the downward API's namespace; one that references
    anything else is left to the pod."""
    known: dict[str, str] = {}
    for entry in container.get("env") or []:
        field = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if "value" in entry:
            known[entry["name"]] = _expanded(str(entry["value"]), known)
        elif field == "metadata.namespace":
            known[entry["name"]] = namespace
        else:
            known.pop(entry.get("name", ""), None)
    named = known.get("REPRISE_HANDOVER_TOPIC")
    if named is not None and "$(" not in named and named != topic:
        raise Failure(
            "HandoverTopicMismatch",
            f"the live container sets REPRISE_HANDOVER_TOPIC={named}, but this namespace's handover topic is "
            f"{topic}: set the live Deployment's REPRISE_HANDOVER_TOPIC to {topic}",
        )


def _expanded(value: str, known: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion of the variables defined before (others stay as written)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: known.get(m.group(1), m.group(0)), value)


def refuse_unsupported(worker_env: dict[str, str], user: list[dict]) -> None:
    """A service's own image runs the Java or Go replay role, which refuses at start what it does not support
    (`docs/settings.md`); refused here first, naming the setting, so the replay fails in status instead of in a
    crash-looping pod. The user's env wins over Reprise's, as in the pod."""
    env = {**worker_env, **{e["name"]: e.get("value") or "" for e in user}}
    for name in DELIVERY_VARIABLES:
        env.pop(name, None)  # the service's own handler: never passed (`replay_deployment_manifest`)
    asked = service_unsupported_asked(env)
    if asked is not None:
        raise Failure(
            "UnsupportedSetting",
            f"{asked}: the replay role of entrypoint Service (Java, Go) does not support it (docs/settings.md); "
            "use spec.consumer.entrypoint ReplayWorker (a new resource) or drop what asks for it",
        )


def user_env(consumer: Consumer) -> list[dict]:
    return [e.model_dump(by_alias=True) for e in consumer.env or []]


def service_container(template: dict, name: str | None, field: str = "spec.consumer") -> int:
    """The index of the container that becomes the replay worker (`consumer.container`, else the first).
    A name the template lacks waits in status for a person to fix the spec or the Deployment."""
    try:
        return pick_container((template.get("spec") or {}).get("containers") or [], name)
    except ValueError as exc:
        raise Waiting("ContainerNotFound", str(exc).replace("spec.consumer", field, 1)) from None


def template_env(template: dict, container: str | None = None) -> list[dict]:
    """The env of the service's container: the handler is the service's own setting, on its container."""
    containers = (template.get("spec") or {}).get("containers") or []
    return containers[service_container(template, container)].get("env", []) if containers else []


def format_duration_seconds(seconds: int) -> str:
    return format_duration(timedelta(seconds=seconds))


def record_progress(resource: Resource, memory: ObjectMemory, views: list[PartitionView]) -> Progress:
    """Summarize the group's partitions into `status.progress` (written only when more than the time
    changed) and the replay metrics; remember when the processed count last moved."""
    now = resource.now()
    progress = summarize(views, memory.eta, now)
    eta = format_duration_seconds(progress.eta_seconds) if progress.eta_seconds is not None else None
    new = progress_status(progress, now, eta)
    old = dict(resource.status.get("progress") or {})
    if {k: v for k, v in old.items() if k != "updatedAt"} != {k: v for k, v in new.items() if k != "updatedAt"}:
        resource.record(progress=new)
    labels = (resource.kind, resource.namespace, resource.name)
    metrics.REPLAY_LAG.labels(*labels).set(progress.lag)
    metrics.REPLAY_PROCESSED.labels(*labels).set(progress.processed)
    if progress.eta_seconds is not None:
        metrics.REPLAY_ETA.labels(*labels).set(progress.eta_seconds)
    if memory.processed != progress.processed or memory.processed_since is None:
        memory.processed, memory.processed_since = progress.processed, now
    metrics.REPLAY_PROGRESS_AGE.labels(*labels).set((now - memory.processed_since).total_seconds())
    return progress


#: The Stalled condition's reason while replay pods fail, and once they no longer do.
PODS_FAILING, PODS_RECOVERED = "ReplayPodsFailing", "ReplayPodsRecovered"


async def report_failing_pods(resource: Resource, selector: str) -> bool:
    """Condition Stalled (reason ReplayPodsFailing) while a replay pod crash-loops, cannot start or failed,
    naming each, its root cause and its log; False (ReplayPodsRecovered) once none does. A crash-looping
    clone reads nothing, so without this the replay only looks slow. True while pods fail."""
    pods = await resource.rt.kube.aio.list_pods(resource.namespace, selector)
    failures = failing_containers(pods)
    stalled = resource.condition_of(ConditionType.STALLED)
    pods_failed = stalled is not None and stalled.status is ConditionStatus.TRUE and stalled.reason == PODS_FAILING
    if failures:
        message = pod_failure_message(resource.namespace, failures)
        flipped = not pods_failed
        resource.condition(ConditionType.STALLED, "True", PODS_FAILING, message)
        if flipped:
            resource.event(PODS_FAILING, message, warning=True)
        return True
    if pods_failed:
        resource.condition(ConditionType.STALLED, "False", PODS_RECOVERED, "no replay pod is failing any more")
    return False


# ------------------------------------------------------------------------------------------ the service's role

#: memory.extra key: (since, last look) of the wait for a replica to start the service's replay role.
ROLE_CLOCK = "replay_role_clock"


def replay_role_message(
    deployment: str, ready: int, replicas: int, rid: str, handover_topic: str, waited_seconds: float
) -> str:
    """What a person reads when a service kept its command (entrypoint Service) and never started the role."""
    return (
        f"Deployment {deployment} ({ready}/{replicas} pods ready) keeps the service's own command "
        f"(spec.consumer.entrypoint: Service), and none of its pods has started Reprise's replay role: replay "
        f"{rid} is not bootstrapped in handover topic {handover_topic} after {format_duration_seconds(int(waited_seconds))}. "
        "The service must start the replay role, with its own record handler, when REPRISE_REPLAY_ID is set "
        "(Java: io.reprise.kafka.replay.ReplayRole.runIfRequested at the start of main, see "
        "docs/jvm-services.md), or the replay must use spec.consumer.entrypoint: ReplayWorker (a new resource: "
        "the field is immutable)"
    )


async def require_replay_role(
    resource: Resource,
    memory: ObjectMemory,
    consumer: Consumer,
    bootstrapped: bool,
    rid: str,
    handover_topic: str,
    timeout: float,
) -> None:
    """With entrypoint Service, Reprise cannot know whether the image runs the replay role until a replica
    bootstraps the replay in the handover topic (the protocol's first step: every replica does it on start).
    Until then the clock runs; past `timeout` the resource says so (condition Waiting, reason
    ReplayRoleNotStarted), and it resolves by itself once a replica starts the role. The clock lives in the
    operator's memory: a restart gives the pods the full time again, never less; so does a pause in following
    (a suspended replay has no pods to wait for)."""
    if consumer.entrypoint is not Entrypoint.SERVICE or bootstrapped:
        memory.extra.pop(ROLE_CLOCK, None)
        return
    now = resource.now()
    since, last = memory.extra.get(ROLE_CLOCK, (now, now))
    if (now - last).total_seconds() > max(30.0, timeout / 4):
        since = now
    memory.extra[ROLE_CLOCK] = (since, now)
    waited = (now - since).total_seconds()
    if waited < timeout:
        return
    name = (resource.status.get("children") or {}).get("deployment") or "?"
    deployment = await resource.rt.kube.aio.get_deployment(resource.namespace, name)
    status = (deployment or {}).get("status") or {}
    raise Waiting(
        "ReplayRoleNotStarted",
        replay_role_message(
            name, int(status.get("readyReplicas") or 0), consumer.replicas, rid, handover_topic, waited
        ),
    )
