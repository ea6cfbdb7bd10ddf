"""Reconsume's Rewind mode, its steps: take the rollback snapshot of the live group's offsets, stop the live
Deployment, move the group's offsets to the start, start the live Deployment again, and follow the live group
itself as the replay. The snapshot's content and ConfigMap are `rewind` (pure); `steps` calls these.
"""

from __future__ import annotations

from ...api import ReconsumeSpec, ReconsumeStatus, RollbackSnapshot, SnapshotOffset
from ...api.common import ConditionType, Phase
from ...core.lifecycle import Failure, ObjectMemory, Resource, Retry, Waiting
from ...core.standby import (
    record_progress,
)
from ...doors.kafka_admin import KafkaCluster, TopicPartitionKey
from ...doors.kube import NotOwned
from ...rules.offset_plan_status import plan_from_status
from ...rules.progress import PartitionView
from ...shared.constants import (
    CREATED_FOR_ANNOTATION,
    rollback_configmap_name,
)
from .rewind import is_own_snapshot, rollback_configmap


async def start_rewind(resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
    """Scale the live Deployment to zero, wait for Empty, snapshot, move the offsets, scale back.

    Each sub-step is recorded in status before the next one starts, so a restart resumes mid-rewind."""
    rt = resource.rt
    assert spec.live_deployment is not None
    deployment = spec.live_deployment.name
    cluster, _ = await resource.kafka(spec.kafka)
    rollback = resource.status_as(ReconsumeStatus).rollback or RollbackSnapshot()
    resource.record(rollback=rollback)
    if rollback.deployment_replicas is None:
        await _note_live_replicas(resource, deployment, rollback)
        return  # persist the replica count before touching the Deployment
    replicas = rollback.deployment_replicas
    if not resource.condition_true(ConditionType.OFFSETS_RESET):
        await _stop_live_group(resource, spec, memory, cluster, deployment, replicas)
        plan = plan_from_status(resource.status_as(ReconsumeStatus).plan)
        if "offsets" not in rollback.model_fields_set:
            await _take_snapshot(resource, spec, cluster, rollback, plan)
            return  # persist the snapshot before moving any offset
        starts = {k: s for k, (s, _) in plan.items()}
        await cluster.aio.alter_offsets(spec.consumer_group, starts)
        resource.condition(
            ConditionType.OFFSETS_RESET,
            "True",
            "OffsetsReset",
            f"group {spec.consumer_group} moved to the plan's start on {len(starts)} partitions",
        )
        resource.event(
            "OffsetsReset",
            f"moved {spec.consumer_group} to the start; rollback in ConfigMap {rollback.config_map}",
        )
    await rt.kube.aio.scale_deployment(resource.namespace, deployment, replicas)
    resource.condition(
        ConditionType.CONSUMERS_STARTED, "True", "ScaledBack", f"Deployment {deployment} back to {replicas}"
    )
    resource.condition(ConditionType.RUNNING, "True", "Rewound", f"group {spec.consumer_group} replays from the start")
    resource.set_phase(Phase.RUNNING, "Rewound", f"live group {spec.consumer_group} rewound and restarted")


async def _note_live_replicas(resource: Resource, deployment: str, rollback: RollbackSnapshot) -> None:
    """The rewind's first sub-step: remember the live Deployment's replicas (to scale it back to)."""
    live = await resource.rt.kube.aio.get_deployment(resource.namespace, deployment)
    if live is None:
        raise Waiting(
            "DeploymentNotFound",
            f"spec.liveDeployment: Deployment {resource.namespace}/{deployment} does not exist",
        )
    resource.record(rollback=rollback.model_copy(update={"deployment_replicas": int(live["spec"].get("replicas", 1))}))
    resource.record(started_at=resource.now(), keep=True)
    resource.condition(ConditionType.CONSUMERS_STOPPED, "False", "ScalingDown", f"scaling Deployment {deployment} to 0")


async def _stop_live_group(
    resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory, cluster: KafkaCluster, deployment: str, replicas: int
) -> None:
    """Scale the live Deployment to 0 and wait (Retry) for its group to be Empty; Failed, with the Deployment
    scaled back, when members that are not the Deployment's stay past `group_empty_timeout`."""
    rt = resource.rt
    await rt.kube.aio.scale_deployment(resource.namespace, deployment, 0)
    description = await cluster.aio.describe_group(spec.consumer_group)
    if description.state not in ("Empty", "Dead"):
        started = memory.extra.setdefault("empty_wait_since", resource.now())
        if (resource.now() - started).total_seconds() > rt.settings.group_empty_timeout:
            await rt.kube.aio.scale_deployment(resource.namespace, deployment, replicas)
            members = ", ".join(description.members[:5]) or "unknown members"
            raise Failure(
                "GroupHasOtherMembers",
                f"spec.consumerGroup {spec.consumer_group} still has members after scaling Deployment "
                f"{deployment} to 0 ({members}): they are not Reprise's to stop. Stop them, or use mode Handover",
            )
        raise Retry(f"group {spec.consumer_group} is {description.state}")
    memory.extra.pop("empty_wait_since", None)
    resource.condition(ConditionType.CONSUMERS_STOPPED, "True", "GroupEmpty", f"group {spec.consumer_group} is Empty")


async def _take_snapshot(
    resource: Resource,
    spec: ReconsumeSpec,
    cluster: KafkaCluster,
    rollback: RollbackSnapshot,
    plan: dict[TopicPartitionKey, tuple[int, int]],
) -> None:
    """Snapshot the live group's offsets into status and the rollback ConfigMap, and end the plan where the
    log ends now (later records are live traffic)."""
    before = await cluster.aio.committed_offsets(spec.consumer_group, list(plan))
    ends = await cluster.aio.end_offsets(list(plan))
    offsets = [SnapshotOffset(topic=t, partition=p, offset=o) for (t, p), o in sorted(before.items())]
    rollback = rollback.model_copy(update={"offsets": offsets, "taken_at": resource.now()})
    resource.record(rollback=rollback)
    cm_name = rollback_configmap_name(resource.name)
    manifest = rollback_configmap(resource, spec, cm_name, before)
    try:
        existing = await resource.rt.kube.aio.create_owned(manifest, resource.uid)
    except NotOwned:
        existing = None
    if existing is None or not is_own_snapshot(existing, manifest):
        # Refused, not adopted: a person would restore the live group from what someone else wrote there.
        assert spec.live_deployment is not None and rollback.deployment_replicas is not None
        await resource.rt.kube.aio.scale_deployment(
            resource.namespace, spec.live_deployment.name, rollback.deployment_replicas
        )
        raise Failure("RollbackNameTaken", _rollback_taken_message(resource, cm_name))
    resource.record(rollback=rollback.model_copy(update={"config_map": cm_name}))
    rewound = resource.status_as(ReconsumeStatus).plan
    assert rewound is not None, "a Rewind starts from its stored plan"
    for part in rewound.partitions:
        part.end_offset = max(part.start_offset, ends[(part.topic, part.partition)])
        part.records = part.end_offset - part.start_offset
    rewound.total_records = sum(part.records for part in rewound.partitions)
    resource.record(plan=rewound)


def _rollback_taken_message(resource: Resource, cm_name: str) -> str:
    return (
        f"ConfigMap {resource.namespace}/{cm_name} exists and is not this Rewind's snapshot: Reprise keeps the live "
        "group's offsets from before the rewind under that name for a person to restore from, so it never adopts "
        "one it did not write. Delete or rename that ConfigMap (nothing was moved), then create the Reconsume again"
    )


async def refuse_taken_rollback_name(resource: Resource, spec: ReconsumeSpec) -> None:
    """Planning a Rewind: its rollback ConfigMap's name must be free (or this resource's own), before anything
    is scaled down."""
    cm_name = rollback_configmap_name(resource.name)
    existing = await resource.rt.kube.aio.get_configmap(resource.namespace, cm_name)
    if existing is None:
        return
    marked = ((existing.get("metadata") or {}).get("annotations") or {}).get(CREATED_FOR_ANNOTATION)
    if marked != resource.uid:
        raise Failure("RollbackNameTaken", _rollback_taken_message(resource, cm_name))


async def follow_rewind(resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
    cluster, _ = await resource.kafka(spec.kafka)
    plan = plan_from_status(resource.status_as(ReconsumeStatus).plan)
    committed = await cluster.aio.committed_offsets(spec.consumer_group, list(plan))
    views = [
        PartitionView(t, p, start=start, end=end, position=committed.get((t, p)), target=end)
        for (t, p), (start, end) in sorted(plan.items())
    ]
    progress = record_progress(resource, memory, views)
    hold = spec.completion.drained_for
    if memory.drain.observe(progress.lag == 0, resource.now(), hold):
        resource.condition(
            ConditionType.DRAINED, "True", "CaughtUp", "the live group reached the end offsets recorded at the rewind"
        )
        resource.set_phase(Phase.DRAINING, "CaughtUp", "live group caught up")
