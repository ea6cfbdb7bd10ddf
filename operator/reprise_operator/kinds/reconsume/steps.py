"""Reconsume: plan, approve, run the replay, follow it, tear it down at zero lag. One step per call.

The phase in `status` says where a replay is, and every step is idempotent from there, so the operator can
be killed at any point and pick up where the API server's status says it was:

    Pending -> PlanReady -> (approved) -> Running -> Draining -> Complete
                                       \\-> Suspended <-/        \\-> Failed (any step, with a reason)

Parallel and Handover run a standby replay-consumer Deployment (a clone of the live service) under a
temporary replay group; the workers record the start as the group's committed offsets and write the
handover protocol's records, which the operator follows. Rewind moves the live group itself: scale its
Deployment to zero, wait for the group to be Empty, snapshot its offsets (status and a ConfigMap kept for
rollback), move them to the start, scale back, and follow the group until it reaches the rewind's end.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any


from replay_worker.contract import PartitionFacts, PartitionHandover, StartSpec, epoch_ms

from ...core import cutover
from . import guard_report
from ...shared import metrics
from ...core.claims import claim, refuse_group_in_use, reprise_created_group
from ...rules.cluster_caps import clamp_note, replay_replicas
from ...api import ReconsumeChildren, ReconsumeSpec, ReconsumeStatus, format_duration
from ...api.common import ConditionType, Entrypoint, Phase
from ...shared.constants import (
    replay_deployment_name,
    replay_group_name,
)
from ...doors.kafka_admin import KafkaCluster
from ...doors.schema_registry import registry_problem
from ...core.driver import Held, plan_ready, plan_refused
from ...core.lifecycle import Failure, ObjectMemory, Resource, Retry, Waiting
from ...rules.planning import Plan, PlanError, make_plan, retention_message
from ...rules.progress import PartitionView, looks_soon
from ...rules.verify import LiveHistory, verify_env
from ...core.standby import (
    consumer_delivery,
    live_template,
    record_progress,
    report_failing_pods,
    require_replay_role,
    standby_deployment,
)
from ...rules.offset_plan_status import plan_from_status, plan_partitions_status
from .drained import replay_drained, replay_views
from .rules import (
    replay_group_of,
    start_request,
    replay_settings,
)
from .rewind_steps import (
    start_rewind,
    refuse_taken_rollback_name,
    follow_rewind,
)

log = logging.getLogger("reprise.reconsume")

KIND = "Reconsume"
PLURAL = "reconsumes"


# ------------------------------------------------------------------------------------------ Kafka facts


def gather_facts(cluster: KafkaCluster, topics: list[str], start: StartSpec, now: datetime) -> list[PartitionFacts]:
    """Everything the plan needs from Kafka, in a handful of batched admin requests."""
    found = cluster.partitions(topics)
    missing = [t for t in topics if t not in found]
    if missing:
        raise Failure("TopicNotFound", f"spec.topics: topic(s) {', '.join(missing)} do not exist in the Kafka cluster")
    keys = [(t, p) for t in topics for p in found[t]]
    log_starts = cluster.start_offsets(keys)
    ends = cluster.end_offsets(keys)
    lookup_ms = start.lookup_timestamp(epoch_ms(now))
    at_time = cluster.offsets_for_time(keys, lookup_ms) if lookup_ms is not None else {}
    first = cluster.offsets_for_time(keys, 0) if start.kind == "earliest" else {}
    facts = []
    for key in keys:
        hit, oldest = at_time.get(key), first.get(key)
        facts.append(
            PartitionFacts(
                key[0],
                key[1],
                log_starts[key],
                ends[key],
                time_lookup=(hit.offset if hit else -1) if lookup_ms is not None else None,
                time_lookup_timestamp_ms=hit.timestamp_ms if hit else None,
                log_start_timestamp_ms=oldest.timestamp_ms if oldest else None,
            )
        )
    return facts


# ------------------------------------------------------------------------------------------ the steps


class ReconsumeLifecycle:
    """Reconsume's hooks for the lifecycle driver (`driver.transition` decides which one runs)."""

    kind, plural, spec_model = KIND, PLURAL, ReconsumeSpec

    async def plan(self, resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
        await _plan(resource, spec)

    async def start(self, resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
        await (start_rewind(resource, spec, memory) if spec.mode.value == "Rewind" else _start_replay(resource, spec))

    async def suspend(self, resource: Resource, spec: ReconsumeSpec) -> Held | None:
        return await _scale(resource, spec, suspend=True)

    async def resume(self, resource: Resource, spec: ReconsumeSpec) -> Held | None:
        return await _scale(resource, spec, suspend=False)

    async def while_suspended(self, resource: Resource, spec: ReconsumeSpec) -> None:
        return None

    async def follow(self, resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
        await (
            follow_rewind(resource, spec, memory)
            if spec.mode.value == "Rewind"
            else _follow_replay(resource, spec, memory)
        )

    async def teardown(self, resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
        await _teardown(resource, spec, memory)

    async def revive(self, resource: Resource, spec: ReconsumeSpec) -> bool:
        return (
            resource.phase == Phase.FAILED
            and spec.verify is not None
            and await cutover.rerun(resource, spec.verify, _verify_env(resource, spec))
        )

    def ttl_seconds(self, spec: ReconsumeSpec) -> int | None:
        return spec.cleanup.ttl_seconds_after_finished

    async def cleanup(self, resource: Resource, memory: ObjectMemory) -> None:
        await cleanup(resource, memory)


LIFECYCLE = ReconsumeLifecycle()


def plan_reconsume(
    cluster: KafkaCluster, spec: ReconsumeSpec, now: datetime, replay_group: tuple[str, str] | None = None
) -> Plan:
    """The plan of a Reconsume from what Kafka says now, or Failure with the reason and message the resource
    would fail with. Blocking; the operator's planning step and `kubectl reprise plan` both call it, so a
    plan shown before applying is the plan the operator then makes. `replay_group` (the group and its field,
    Parallel and Handover) is refused when someone uses it already (`claims`)."""
    try:
        start = start_request(spec, now)
    except PlanError as exc:
        raise Failure(exc.reason, str(exc)) from None
    facts = gather_facts(cluster, list(spec.topics), start, now)
    try:
        plan = make_plan(start, facts, now, allow_clamp=spec.start.allow_clamp)
    except PlanError as exc:
        raise Failure(exc.reason, str(exc)) from None
    if replay_group is not None:
        refuse_group_in_use(cluster, *replay_group)
    return plan


async def _plan(resource: Resource, spec: ReconsumeSpec) -> None:
    resource.set_phase(Phase.PLANNING, "Planning", "computing the plan", event=False)
    cluster, _ = await resource.kafka(spec.kafka)
    if spec.mode.value == "Rewind":
        await refuse_taken_rollback_name(resource, spec)
        group = None
    else:
        group = replay_group_of(spec, resource.namespace, resource.name)
    if spec.schema_registry is not None:
        # Before the plan: a wrong URL would have every replay pod and guard wait on it, record by record.
        problem = await asyncio.to_thread(registry_problem, spec.schema_registry.url)
        if problem is not None:
            raise Waiting("SchemaRegistryUnreachable", f"spec.schemaRegistry.url: {problem}")
    plan = await cluster.aio.call(plan_reconsume, cluster, spec, resource.now(), group)
    resource.record(plan=plan_partitions_status(plan))
    if plan.at_risk:
        message = retention_message(plan)
        raise plan_refused(resource, "RetentionExceeded", message)
    summary = f"{plan.total_records} records in {len(plan.partitions)} partitions"
    plan_ready(resource, summary)


async def _live_template(resource: Resource, spec: ReconsumeSpec) -> dict:
    assert spec.consumer is not None  # the CRD requires it outside Rewind
    return await live_template(resource, spec.consumer)


async def _start_replay(resource: Resource, spec: ReconsumeSpec) -> None:
    rt = resource.rt
    cluster, config = await resource.kafka(spec.kafka)
    template = await _live_template(resource, spec)
    consumer = spec.consumer
    assert consumer is not None
    rid = resource.replay_id
    group, field = replay_group_of(spec, resource.namespace, resource.name)
    starts = {k: start for k, (start, _) in plan_from_status(resource.status_as(ReconsumeStatus).plan).items()}
    settings = replay_settings(
        spec=spec,
        rid=rid,
        group=group,
        plan_starts=starts,
        handover_topic=rt.settings.handover_topic_for(resource.namespace),
        delivery=consumer_delivery(consumer, template),
        has_secret=spec.kafka.config_from is not None,
        follow=spec.completion.hold is not None,
    )
    # Checked again now (an approval may have taken days) and claimed before any pod or bootstrap uses it.
    await claim(resource, cluster, {group: field}, {})
    await rt.handovers.aio.ensure(
        spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace)
    )
    name = replay_deployment_name(resource.name)
    replicas, clamped = replay_replicas(consumer.replicas, len(starts)), clamp_note(consumer.replicas, len(starts))
    manifest = standby_deployment(
        resource,
        name=name,
        component="replay-consumer",
        template=template,
        consumer=consumer,
        settings=settings,
        kafka=spec.kafka,
        replicas=replicas,
        registry_secret=(
            spec.schema_registry.credentials_secret.name
            if spec.schema_registry is not None and spec.schema_registry.credentials_secret is not None
            else None
        ),
    )
    await rt.kube.aio.create_owned(manifest, resource.uid)
    if consumer.entrypoint is Entrypoint.REPLAY_WORKER:
        # Recorded once here, the start is only read by the replicas: racing for it, each new one fenced the one
        # before (a fatal error of its transactional producer, a retry after a back-off) and the replicas joined
        # their group further apart (benchmarks/end_to_end). Done while the pods are made and start, which takes
        # longer; a replica that comes first bootstraps as before (every caller is safe, HANDOVER.md 5.1). Not
        # before the Deployment exists: a replay that never gets one must leave no records and no group behind.
        # With entrypoint Service, a replica's bootstrap is how the operator learns that the image runs the
        # replay role (`require_replay_role`): left to them.
        failed = await rt.handovers.aio.bootstrap(settings, config)
        if failed is not None:
            log.info("%s/%s: bootstrap left to the replicas: %s", resource.namespace, resource.name, failed)
    resource.record(
        children=ReconsumeChildren(
            deployment=name, replay_group=group, handover_topic=rt.settings.handover_topic_for(resource.namespace)
        )
    )
    resource.record(started_at=resource.now(), keep=True)
    resource.condition(
        ConditionType.RUNNING,
        "True",
        "ConsumersStarted",
        f"{replicas} replay consumer(s) in Deployment {name}, group {group}" + (f" ({clamped})" if clamped else ""),
    )
    if clamped:
        resource.event("ReplicasClamped", clamped)
    resource.set_phase(Phase.RUNNING, "ConsumersStarted", f"created Deployment {name} for replay group {group}")


async def _scale(resource: Resource, spec: ReconsumeSpec, suspend: bool) -> Held | None:
    """Scale what Reprise runs to zero while suspended, back when resumed; state stays in Kafka."""
    rt = resource.rt
    if spec.mode.value == "Rewind":
        target_name = spec.live_deployment.name if spec.live_deployment else None  # type: ignore[union-attr]
        rollback = resource.status_as(ReconsumeStatus).rollback
        replicas = rollback.deployment_replicas if rollback and rollback.deployment_replicas is not None else 1
    else:
        target_name = resource.status_as(ReconsumeStatus).children.deployment
        partitions = len(plan_from_status(resource.status_as(ReconsumeStatus).plan))
        replicas = replay_replicas(spec.consumer.replicas, partitions) if spec.consumer else 1
    if target_name is None:
        return None
    if suspend:
        await rt.kube.aio.scale_deployment(resource.namespace, target_name, 0)
        # A suspended replay waits on purpose: RepriseHandoverNotProgressing must not fire for it. The next
        # follow after the resume reports the partitions still pending again.
        metrics.HANDOVER_PENDING.labels(resource.namespace, resource.name).set(0)
        return Held(f"Deployment {target_name} scaled to 0", f"scaled {target_name} to 0; state kept")
    await rt.kube.aio.scale_deployment(resource.namespace, target_name, replicas)
    return Held(
        f"Deployment {target_name} scaled back to {replicas}",
        f"scaled {target_name} back to {replicas}; resuming from committed offsets",
    )


_record_progress = record_progress


async def _follow_replay(resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
    rt = resource.rt
    cluster, config = await resource.kafka(spec.kafka)
    plan = plan_from_status(resource.status_as(ReconsumeStatus).plan)
    rid = resource.replay_id
    # One batched end-offsets request per cluster and cycle; positions come from the workers' `progress`
    # records in the handover topic, which one tailing reader follows for every replay on the cluster.
    ends = await cluster.aio.shared_end_offsets(list(plan), rt.settings.poll_interval / 2)
    state = await rt.handovers.aio.replay(
        spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace), rid
    )
    assert spec.consumer is not None  # the CRD requires it outside Rewind
    await require_replay_role(
        resource,
        memory,
        spec.consumer,
        state.bootstrapped,
        rid,
        rt.settings.handover_topic_for(resource.namespace),
        rt.settings.replay_role_timeout,
    )
    handover_mode = spec.mode.value == "Handover"
    views = replay_views(plan, ends, state, spec.mode.value)
    progress = _record_progress(resource, memory, views)
    await report_failing_pods(resource, cutover.replay_pods_selector(resource.name, "reconsume"))
    if handover_mode:
        pending = sum(1 for v in views if not v.handed_over)
        metrics.HANDOVER_PENDING.labels(resource.namespace, resource.name).set(pending)
        report_guard_problems(resource, [state.partitions[k] for k in sorted(plan) if k in state.partitions])
    live = None
    if spec.completion.hold is not None:  # the shadow never finishes a partition: caught up = at the live group
        history = memory.extra.setdefault("live_history", LiveHistory())
        history.add(resource.now(), await cluster.aio.committed_offsets(spec.consumer_group, list(plan)))
        live = history.as_of(resource.now())
    drained = replay_drained(state, progress.partitions, live, held=spec.completion.hold is not None)
    hold = spec.completion.drained_for
    caught_up = memory.drain.observe(drained, resource.now(), hold)
    if spec.verify is not None or spec.completion.hold is not None:
        caught_up = await cutover.gate(
            resource,
            spec.verify,
            hold=spec.completion.hold is not None,
            approval=spec.approval.value,
            env=_verify_env(resource, spec),
            caught_up=caught_up,
        )
    gated = spec.verify is not None or spec.completion.hold is not None  # a check or a person decides when
    memory.soon = not caught_up and not gated and _looks_soon(resource, memory, views, progress.eta_seconds, hold)
    if caught_up:
        message = (
            "every partition handed over to the live group"
            if handover_mode
            else "the replay group reached the live group on every partition"
        )
        resource.condition(ConditionType.DRAINED, "True", "Drained", f"{message}; held for {format_duration(hold)}")
        resource.set_phase(Phase.DRAINING, "Drained", message)
    elif not drained and resource.condition_true(ConditionType.DRAINED):
        resource.condition(ConditionType.DRAINED, "False", "NotDrained", "lag is back")


#: memory.extra key: when every partition of the replay was first seen finished (a handover offset recorded).
FINISHED_SINCE = "finished_since"
#: memory.extra key: when this operator first followed the replay (Running).
FOLLOWING_SINCE = "following_since"


def _looks_soon(
    resource: Resource, memory: ObjectMemory, views: list[PartitionView], eta_seconds: int | None, hold: timedelta
) -> bool:
    """`progress.looks_soon` for this follow (after `memory.drain` observed it): remembers when the replay was
    first followed and when every partition was first seen finished."""
    now = resource.now()
    following_for = (now - memory.extra.setdefault(FOLLOWING_SINCE, now)).total_seconds()
    if not (views and all(view.finished for view in views)):
        memory.extra.pop(FINISHED_SINCE, None)
        finished_for = None
    else:
        finished_for = (now - memory.extra.setdefault(FINISHED_SINCE, now)).total_seconds()
    since = memory.drain.since
    hold_left = (hold - (now - since)).total_seconds() if since is not None else None
    memory.settling = finished_for is not None and hold_left is None
    return looks_soon(eta_seconds, resource.rt.settings.poll_interval, finished_for, hold_left, following_for)


def report_guard_problems(resource: Resource, partitions: list[PartitionHandover]) -> None:
    """The GuardProblem condition: True, naming partitions and reasons, while a guard cannot follow the replay
    (with a Warning Event and log line when it appears); False once every such partition is followed again."""
    problems = guard_report.guard_problems(partitions)
    if problems:
        message = guard_report.condition_message(problems)
        flipped = not resource.condition_true(guard_report.CONDITION)
        resource.condition(guard_report.CONDITION, "True", "GuardCannotFollow", message)
        if flipped:
            log.warning("%s/%s: %s", resource.namespace, resource.name, message)
            resource.event("GuardCannotFollow", message, warning=True)
    elif resource.condition_true(guard_report.CONDITION):
        resource.condition(
            guard_report.CONDITION,
            "False",
            "GuardFollowing",
            "the live side's guards follow the replay on every partition",
        )
        resource.event("GuardFollowing", "the live side's guards follow the replay again")


def _verify_env(resource: Resource, spec: ReconsumeSpec) -> dict[str, str]:
    """What spec.verify's check is told about this replay."""
    group = (
        resource.status_as(ReconsumeStatus).children.replay_group
        or spec.replay_group
        or replay_group_name(resource.namespace, resource.name)
    )
    return verify_env(
        rid=resource.replay_id,
        name=resource.name,
        mode=spec.mode.value,
        topics=spec.topics,
        replay_group=group,
        live_group=spec.consumer_group,
        bootstrap_servers=spec.kafka.bootstrap_servers,
        plan=plan_from_status(resource.status_as(ReconsumeStatus).plan),
    )


async def _teardown(resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory) -> None:
    """Delete the standby Deployment, then the replay group, then the handover records, then the checks'
    Jobs; then Complete."""
    await remove_children(resource, spec, memory, cancel=False)
    await cutover.remove_jobs(resource)
    resource.complete("Completed", "replay finished and everything Reprise made is removed")


async def remove_children(resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory, cancel: bool) -> None:
    """Remove what a Parallel/Handover replay made. With `cancel`, first hand every partition back to the
    live group at exactly what the replay processed, so the guard stops skipping and nothing is lost."""
    rt = resource.rt
    if spec.mode.value == "Rewind":
        return
    children = resource.status_as(ReconsumeStatus).children
    name = children.deployment
    group = children.replay_group or spec.replay_group or replay_group_name(resource.namespace, resource.name)
    cluster, config = await resource.kafka(spec.kafka)
    if name:
        await rt.kube.aio.delete_deployment(resource.namespace, name)
    selector = cutover.replay_pods_selector(resource.name, "reconsume")  # a check's pods stay for inspection
    pods = await _settled(lambda: rt.kube.aio.list_pods(resource.namespace, selector), lambda p: not p)
    if pods:
        raise Retry(f"{len(pods)} replay pod(s) still terminating")
    where = (spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace))
    rid = resource.replay_id
    if cancel:
        plan = plan_from_status(resource.status_as(ReconsumeStatus).plan)
        committed = await cluster.aio.committed_offsets(group, list(plan))
        await rt.handovers.aio.force_handover(*where, rid, committed, by="operator", reason="cancelled")
        if spec.mode.value == "Handover" and not await _acknowledged(resource, spec, memory, config, rid):
            raise Retry("waiting for the live side to acknowledge the cancelled handover")
    if spec.cleanup.delete_replay_group and reprise_created_group(resource.status, group):
        description = await _settled(
            lambda: cluster.aio.describe_group(group), lambda d: d.state in ("Empty", "Dead", "Unknown")
        )
        if description.state not in ("Empty", "Dead", "Unknown"):
            raise Retry(f"replay group {group} is {description.state}; waiting for its members to leave")
        await cluster.aio.delete_group(group)
    elif spec.cleanup.delete_replay_group and children.replay_group:
        resource.event(
            "ReplayGroupKept",
            f"replay group {group} is not in status.created (an older operator started this replay), so it is "
            "left in Kafka: delete it by hand if nobody else uses it",
        )
    await rt.handovers.aio.tombstone(*where, rid)
    metrics.HANDOVER_PENDING.labels(resource.namespace, resource.name).set(0)


#: How long one teardown step waits for the replay pods to stop and the replay group to empty before leaving it
#: to the next poll. Pods stop within a second or two of the Deployment's deletion (finish the batch, commit,
#: leave the group), while a Retry costs a whole poll interval: that interval was most of an end-to-end
#: replay's teardown (benchmarks/end_to_end).
TEARDOWN_WAIT_S = 4.0
#: Seconds between two looks while it waits: a list of a few pods by label, or one group description, for about
#: a second at the end of a replay; at 0.25 s the last look cost an eighth of a second on average.
TEARDOWN_LOOK_S = 0.1


async def _settled(look: Any, done: Any, wait: float = TEARDOWN_WAIT_S) -> Any:
    """`await look()` until `done(result)` or `wait` seconds passed; the last result."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    result = await look()
    while not done(result) and loop.time() < deadline:
        await asyncio.sleep(TEARDOWN_LOOK_S)
        result = await look()
    return result


async def _acknowledged(resource: Resource, spec: ReconsumeSpec, memory: ObjectMemory, config: dict, rid: str) -> bool:
    rt = resource.rt
    where = (spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace))
    await rt.handovers.aio.sync(*where)
    state = await rt.handovers.aio.replay(*where, rid)
    if not state.planned or all(p.acknowledged for p in state.planned):
        return True
    asked = memory.extra.setdefault("cancel_asked", resource.now())
    # No live guard answered for two minutes: none is running, so none is skipping; nothing can be lost.
    return (resource.now() - asked).total_seconds() > 120


# ------------------------------------------------------------------------------------------ deletion


async def cleanup(resource: Resource, memory: ObjectMemory) -> None:
    """The finalizer: remove everything Reprise made and leave the live group as it was.

    Parallel/Handover: hand every partition back to the live group at exactly what the replay processed,
    then delete the Deployment, the replay group and the handover records. Rewind: if the live Deployment
    is still scaled down, scale it back; offsets already moved stay moved (the replay is then under way in
    the live group itself, and the rollback ConfigMap is kept to undo it by hand)."""
    try:
        spec = resource.spec_as(ReconsumeSpec)
    except Failure:
        return  # an invalid spec never started anything
    if spec.mode.value == "Rewind":
        rollback = resource.status_as(ReconsumeStatus).rollback
        replicas = rollback.deployment_replicas if rollback else None
        if (
            replicas is not None
            and spec.live_deployment is not None
            and not resource.condition_true(ConditionType.CONSUMERS_STARTED)
        ):
            await resource.rt.kube.aio.scale_deployment(resource.namespace, spec.live_deployment.name, replicas)
        return
    made = resource.status_as(ReconsumeStatus).children != ReconsumeChildren()
    if made or resource.phase in (Phase.RUNNING, Phase.SUSPENDED, Phase.DRAINING):
        await remove_children(resource, spec, memory, cancel=True)
