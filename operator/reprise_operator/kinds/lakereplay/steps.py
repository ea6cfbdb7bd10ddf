"""LakeReplay: history from the lake through a temporary backfill topic to the service, and on to live. One
step per call.

Seed 001's "ETL bridge", orchestrated end to end. The phase in `status` says where a LakeReplay is, and
every step is idempotent from there, so the operator can be killed at any point:

    Pending -> Planning -> PlanReady -> (approved) -> Running -> Draining -> Complete
                                                   \\-> Suspended <-/      \\-> Failed (any step, with a reason)

- Planning describes the lake range (source, from/to, filter) and the backfill topic (its partitions as
  given, or as the first live topic of `then.reconsume` has, so keys land on the same partition numbers,
  else 12), and with `then.reconsume` looks up the live topics' offsets at `spec.source.to` (status.plan),
  refusing when Kafka's retention already deleted records newer than the lake's range. Nothing is created
  while planning, so a backfill topic that exists then is not Reprise's and is refused (it would be deleted
  at the end). Before all that it checks what spec.spark asks of the Spark operator
  (`spark_application.refuse_overrides`): a sparkConf key off the allow-list, or an image or driver
  ServiceAccount other than the ones the platform pinned, waits with nothing planned (security review H1).
- Starting checks everything that can refuse (the pod template to clone, its delivery, the schema
  ConfigMap) before it creates, in this order: the backfill topic, the SparkApplication
  (`spark_application.py`), the drain consumer Deployment. Each create is idempotent, so a restart mid-way
  finishes the job.
- Running follows two things per poll. The SparkApplication's `applicationState` becomes conditions
  (Running while it runs, Produced when COMPLETED, Failed with the controller's message when it gave up);
  a SparkApplication someone deleted before it completed is created again (the job resumes from its
  progress markers and writes no record twice). The drain consumer is a clone of the service (as for a
  Reconsume) running the replay worker in mode Drain under `spec.drainGroup`; it reads the backfill
  topic while Spark still writes to it, so it is given an end bound no record reaches and never finishes a
  partition by itself: the operator decides it is done when Spark has COMPLETED (so the end offsets are
  final) and the group's lag has stayed zero for `completion.drainedFor` (condition Drained).
- Then the lake's children go, in an order that leaves nothing behind: the SparkApplication (waited for, so
  no late write can re-create the topic through auto-creation), the Deployment (until its pods are gone), the
  drain group, the backfill topic, the drain's handover records.
- With `then.reconsume`, the replay continues on the live topics as a child Reconsume (owned by the
  LakeReplay, named in status.continuation) that starts at exactly the offsets of the first records at or
  after `spec.source.to` (looked up again at that moment): records before `to` came from the lake, records
  at and after it come from Kafka, so at the seam nothing is lost or doubled. It starts only after the drain
  consumers are gone, so every key's lake records are processed before its Kafka records. In mode Handover
  it hands every partition back to the live group exactly as a Handover Reconsume does (its machinery,
  unchanged). When it is Complete, it is deleted and the LakeReplay completes.

`spec.suspend` suspends the SparkApplication (its own `spec.suspend`: the driver stops, and resumes from
its progress markers), scales the drain to zero, or suspends the continuation Reconsume. Deleting a
LakeReplay mid-flight removes all of it (the finalizer); a finished one is deleted after
`cleanup.ttlSecondsAfterFinished`.

Limits. The seam relies on the live records' Kafka timestamps being their event times (the lake's
`timestampColumn`), as `offsets_for_times` does. The job's progress markers stay in the lake's storage
(Reprise does not write to the object store).
"""

from __future__ import annotations

import asyncio

from pydantic import ValidationError

from replay_worker.contract import PartitionFacts, StartSpec

from ...api import (
    ConditionType,
    ContinuationOffset,
    ContinuationStatus,
    Entrypoint,
    LakeReplayChildren,
    LakeReplaySpec,
    LakeReplayStatus,
    Phase,
    ReconsumeStatus,
    SparkStatus,
    format_duration,
)
from ...rules.cluster_caps import backfill_partitions_refusal, clamp_note, replay_replicas
from ...shared.constants import GROUP, VERSION, child_labels, replay_group_name
from ...core.claims import (
    claim,
    created_of,
    refuse_group_in_use,
    reprise_created_group,
    reprise_created_topic,
    topic_exists_message,
)
from ...doors.kafka_admin import KafkaCluster, TopicPartitionKey
from ...core.driver import Held, plan_ready, plan_refused
from ...core.lifecycle import Failure, ObjectMemory, Resource, Retry, Waiting
from ...rules.planning import Plan, PlanError, make_plan
from ...core import cutover
from ...rules.progress import PartitionView
from ...rules.offset_plan_status import plan_from_status, plan_partitions_status
from ...rules.verify import verify_env
from .spark_application import (
    GROUP as SPARK_GROUP,
    PLURAL as SPARK_PLURAL,
    VERSION as SPARK_VERSION,
    SparkOutcome,
    SparkSpecRefused,
    DRIVER_FAILED_STATES,
    application_name,
    driver_report,
    driver_selector,
    backfill_topic_name,
    progress_uri,
    refuse_overrides,
    rfc3339_exact,
    seam_ms,
    spark_application_manifest,
    spark_outcome,
    spark_state,
)
from ...core.standby import (
    consumer_delivery,
    live_template,
    record_progress,
    report_failing_pods,
    require_replay_role,
    standby_deployment,
)
from .continuation import continuation_manifest, continuation_name, continuation_retention_message
from .rules import (
    KIND,
    PLURAL,
    RECONSUME_PLURAL,
    spark_defaults,
    spark_application,
    drain_deployment_name,
    backfill_partitions,
    topic_config,
    drain_settings,
    plan_summary,
    refuse_future_range,
)


def continuation_facts(cluster: KafkaCluster, topics: list[str], to_ms: int) -> list[PartitionFacts]:
    """What the continuation's plan needs from Kafka, at the exact millisecond of the seam."""
    found = cluster.partitions(topics)
    missing = [t for t in topics if t not in found]
    if missing:
        raise Failure(
            "TopicNotFound",
            f"spec.then.reconsume.topics: topic(s) {', '.join(missing)} do not exist in the Kafka cluster",
        )
    keys = [(t, p) for t in topics for p in found[t]]
    log_starts = cluster.start_offsets(keys)
    ends = cluster.end_offsets(keys)
    at_seam = cluster.offsets_for_time(keys, to_ms)
    facts = []
    for key in keys:
        hit = at_seam.get(key)
        facts.append(
            PartitionFacts(
                key[0],
                key[1],
                log_starts[key],
                ends[key],
                time_lookup=hit.offset if hit else -1,
                time_lookup_timestamp_ms=hit.timestamp_ms if hit else None,
            )
        )
    return facts


# ------------------------------------------------------------------------------------------ the steps


def _status(resource: Resource) -> LakeReplayStatus:
    return resource.status_as(LakeReplayStatus)


def _children(resource: Resource) -> LakeReplayChildren:
    return _status(resource).children


def _lake_drained(resource: Resource) -> bool:
    return resource.condition_true(ConditionType.DRAINED)


class LakeReplayLifecycle:
    """LakeReplay's hooks for the lifecycle driver (`driver.transition` decides which one runs). The plan is
    in the API server before anything is created, so a backfill topic found while planning is never one
    Reprise made."""

    kind, plural, spec_model = KIND, PLURAL, LakeReplaySpec

    async def plan(self, resource: Resource, spec: LakeReplaySpec, memory: ObjectMemory) -> None:
        await _plan(resource, spec)

    async def start(self, resource: Resource, spec: LakeReplaySpec, memory: ObjectMemory) -> None:
        await _start(resource, spec)

    async def suspend(self, resource: Resource, spec: LakeReplaySpec) -> Held | None:
        done = await _hold(resource, spec, _children(resource), suspend=True)
        return Held(done, f"{done}; state kept")

    async def resume(self, resource: Resource, spec: LakeReplaySpec) -> Held | None:
        return Held(await _hold(resource, spec, _children(resource), suspend=False))

    async def while_suspended(self, resource: Resource, spec: LakeReplaySpec) -> None:
        await _follow_suspended_spark(resource)

    async def follow(self, resource: Resource, spec: LakeReplaySpec, memory: ObjectMemory) -> None:
        await _follow(resource, spec, memory)

    async def teardown(self, resource: Resource, spec: LakeReplaySpec, memory: ObjectMemory) -> None:
        await _teardown(resource, spec, memory)

    async def revive(self, resource: Resource, spec: LakeReplaySpec) -> bool:
        return (
            resource.phase == Phase.FAILED
            and spec.verify is not None
            and await cutover.rerun(resource, spec.verify, _verify_env(resource, spec))
        )

    def ttl_seconds(self, spec: LakeReplaySpec) -> int | None:
        return spec.cleanup.ttl_seconds_after_finished

    async def cleanup(self, resource: Resource, memory: ObjectMemory) -> None:
        await cleanup(resource, memory)


LIFECYCLE = LakeReplayLifecycle()


async def _plan(resource: Resource, spec: LakeReplaySpec) -> None:
    resource.set_phase(Phase.PLANNING, "Planning", "computing the plan", event=False)
    try:
        refuse_future_range(spec, resource.now())
    except PlanError as exc:
        raise Failure(exc.reason, str(exc)) from None
    _allowed_spark(resource, spec)
    cluster, _ = await resource.kafka(spec.kafka)
    topic = backfill_topic_name(resource.namespace, resource.name, spec)
    live_topics = list(spec.then.reconsume.topics) if spec.then is not None else []
    found = await cluster.aio.partitions([topic, *live_topics])
    missing = [t for t in live_topics if t not in found]
    if missing:
        raise Failure(
            "TopicNotFound",
            f"spec.then.reconsume.topics: topic(s) {', '.join(missing)} do not exist in the Kafka cluster",
        )
    if topic in found and not reprise_created_topic(resource.status, topic):
        raise Failure("BackfillTopicExists", topic_exists_message("spec.backfillTopic", topic))
    if not reprise_created_group(resource.status, spec.drain_group):
        await cluster.aio.call(refuse_group_in_use, cluster, spec.drain_group, "spec.drainGroup")
    if spec.then is not None and spec.then.reconsume.mode.value != "Rewind":
        # The continuation's own plan refuses it too, but only after the whole lake range was drained.
        then = spec.then.reconsume
        then_group = then.replay_group or replay_group_name(resource.namespace, continuation_name(resource.name))
        field = "spec.then.reconsume.replayGroup" + ("" if then.replay_group else " (unset: the default name)")
        await cluster.aio.call(refuse_group_in_use, cluster, then_group, field)
    partitions = backfill_partitions(spec, found)
    refused = backfill_partitions_refusal(
        partitions, resource.rt.settings.max_backfill_partitions, spec.backfill_topic.partitions is not None
    )
    if refused is not None:
        raise Failure("BackfillPartitionsLimit", refused)
    continuation = None
    if spec.then is not None:
        continuation = await _continuation_plan(resource, spec, cluster)
        _continuation_of(resource, spec, continuation.start_offsets())  # refused now, not after the lake
    summary = plan_summary(spec, topic, partitions, continuation)
    plan_ready(resource, summary)


async def _continuation_plan(resource: Resource, spec: LakeReplaySpec, cluster: KafkaCluster) -> Plan:
    """status.plan: the live topics' offsets at spec.source.to; refused when retention ate into the seam."""
    assert spec.then is not None
    facts = await cluster.aio.call(
        continuation_facts, cluster, list(spec.then.reconsume.topics), seam_ms(spec.source.to)
    )
    plan = make_plan(StartSpec("timestamp", timestamp_ms=seam_ms(spec.source.to)), facts, resource.now())
    resource.record(plan=plan_partitions_status(plan))
    if plan.at_risk:
        message = continuation_retention_message(spec, plan)
        raise plan_refused(resource, "RetentionExceeded", message)
    return plan


async def _start(resource: Resource, spec: LakeReplaySpec) -> None:
    """Check everything that can refuse, then create the topic, the SparkApplication and the drain."""
    rt = resource.rt
    cluster, config = await resource.kafka(spec.kafka)
    consumer = spec.consumer
    template = await live_template(resource, consumer)
    delivery = consumer_delivery(consumer, template)
    await _require_schema(resource, spec)
    topic = backfill_topic_name(resource.namespace, resource.name, spec)
    live_topics = list(spec.then.reconsume.topics) if spec.then is not None else []
    found = await cluster.aio.partitions(live_topics) if live_topics else {}
    partitions = backfill_partitions(spec, found)
    rid = resource.replay_id
    settings = drain_settings(
        spec, rid=rid, topic=topic, delivery=delivery, handover_topic=rt.settings.handover_topic_for(resource.namespace)
    )
    app = _spark_manifest(resource, spec, application_name(resource.name), topic)
    deployment_name = drain_deployment_name(resource.name)
    deployment = standby_deployment(
        resource,
        name=deployment_name,
        component="drain-consumer",
        template=template,
        consumer=consumer,
        settings=settings,
        kafka=spec.kafka,
        replicas=replay_replicas(consumer.replicas, partitions),
    )

    # Checked again now (an approval may have taken days) and claimed before Spark or a drain pod uses them.
    await claim(resource, cluster, {spec.drain_group: "spec.drainGroup"}, {topic: "spec.backfillTopic"})
    await rt.handovers.aio.ensure(
        spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace)
    )
    created = await cluster.aio.ensure_topic(
        topic, partitions, topic_config(spec), spec.backfill_topic.replication_factor
    )
    if created:
        resource.event("BackfillTopicCreated", f"created backfill topic {topic} with {partitions} partitions")
    await rt.kube.aio.create_owned(app, resource.uid)
    await rt.kube.aio.create_owned(deployment, resource.uid)
    _record_started(resource, spec, topic, app["metadata"]["name"], deployment_name, partitions)


def _allowed_spark(resource: Resource, spec: LakeReplaySpec) -> None:
    """Waiting while spec.spark asks for what the platform does not allow (`refuse_overrides`): refused at
    planning already, so nothing is approved or created for it; an edit of spec.spark lets it go on."""
    try:
        refuse_overrides(spec, spark_defaults(resource.rt.settings))
    except SparkSpecRefused as exc:
        raise Waiting(exc.reason, exc.message) from None


def _spark_manifest(resource: Resource, spec: LakeReplaySpec, name: str, topic: str) -> dict:
    """The SparkApplication to create; Waiting (as `_allowed_spark`) when the builder refuses spec.spark."""
    defaults = spark_defaults(resource.rt.settings)
    try:
        return spark_application_manifest(
            owner=resource.owner(),
            name=name,
            namespace=resource.namespace,
            spec=spec,
            topic=topic,
            progress=progress_uri(
                spec.source.uri, resource.namespace, resource.name, resource.uid, defaults.progress_base
            ),
            labels=child_labels(KIND, resource.name, "spark-application"),
            defaults=defaults,
        )
    except SparkSpecRefused as exc:
        raise Waiting(exc.reason, exc.message) from None


async def _require_schema(resource: Resource, spec: LakeReplaySpec) -> None:
    """Waiting until the ConfigMap of spec.source.schema (when set) exists and has its key."""
    if spec.source.schema_ is None:
        return
    ref = spec.source.schema_.config_map_ref
    config_map = await resource.rt.kube.aio.get_configmap(resource.namespace, ref.name)
    if config_map is None:
        raise Waiting(
            "ConfigMapNotFound",
            f"spec.source.schema.configMapRef: ConfigMap {resource.namespace}/{ref.name} does not exist",
        )
    if ref.key not in (config_map.get("data") or {}):
        raise Waiting(
            "ConfigMapKeyNotFound", f"spec.source.schema.configMapRef: ConfigMap {ref.name} has no key {ref.key}"
        )


def _record_started(
    resource: Resource, spec: LakeReplaySpec, topic: str, app_name: str, deployment_name: str, partitions: int
) -> None:
    """Status once the backfill topic, the SparkApplication and the drain exist: the children, then Running."""
    children = resource.updated(
        "children",
        LakeReplayChildren,
        backfill_topic=topic,
        spark_application=app_name,
        deployment=deployment_name,
        replay_group=spec.drain_group,
    )
    resource.record(
        children=children, spark=SparkStatus(application_name=app_name, state="", updated_at=resource.now())
    )
    resource.record(started_at=resource.now(), keep=True)
    clamped = clamp_note(spec.consumer.replicas, partitions)
    resource.condition(ConditionType.PRODUCED, "False", "SparkNew", f"SparkApplication {app_name} is created")
    resource.condition(
        ConditionType.RUNNING,
        "True",
        "SparkApplicationCreated",
        f"SparkApplication {app_name} writes the lake range to {topic}; "
        f"{replay_replicas(spec.consumer.replicas, partitions)} drain consumer(s) in Deployment {deployment_name}, "
        f"group {spec.drain_group}" + (f" ({clamped})" if clamped else ""),
    )
    if clamped:
        resource.event("ReplicasClamped", clamped)
    resource.set_phase(
        Phase.RUNNING,
        "Started",
        f"created backfill topic {topic}, SparkApplication {app_name} and drain Deployment {deployment_name}",
    )


# ------------------------------------------------------------------------------------------ suspend


async def _follow_suspended_spark(resource: Resource) -> None:
    """Keep status.spark current while suspended (SUSPENDING -> SUSPENDED)."""
    rt = resource.rt
    name = _children(resource).spark_application
    if not _lake_drained(resource) and name:
        app = await rt.kube.aio.get_custom(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, resource.namespace, name)
        _record_spark(resource, spark_outcome(app) if app is not None else None, name)


async def _hold(resource: Resource, spec: LakeReplaySpec, children: LakeReplayChildren, suspend: bool) -> str:
    """Suspend what runs now (the SparkApplication and the drain, or the continuation), or resume it; say what."""
    rt = resource.rt
    ns = resource.namespace
    verb = "suspended" if suspend else "resumed"
    if _lake_drained(resource):
        # The lake's children are done (and being removed): only the continuation runs from here on.
        if children.reconsume:
            await rt.kube.aio.patch_custom(
                GROUP, VERSION, RECONSUME_PLURAL, ns, children.reconsume, {"spec": {"suspend": suspend}}
            )
            return f"Reconsume {children.reconsume} {verb}"
        return "the continuation has not started"
    said = []
    if children.spark_application and not resource.condition_true(ConditionType.PRODUCED):
        await rt.kube.aio.patch_custom(
            SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, ns, children.spark_application, {"spec": {"suspend": suspend}}
        )
        said.append(f"SparkApplication {children.spark_application} {verb}")
    if children.deployment:
        replicas = 0 if suspend else await _drain_replicas(resource, spec, children.backfill_topic)
        await rt.kube.aio.scale_deployment(ns, children.deployment, replicas)
        said.append(f"Deployment {children.deployment} scaled to {replicas}")
    return "; ".join(said) or "nothing runs"


async def _drain_replicas(resource: Resource, spec: LakeReplaySpec, topic: str | None) -> int:
    """spec.consumer.replicas clamped to the backfill topic's partitions, as the drain was started."""
    partitions = spec.backfill_topic.partitions
    if partitions is None and topic:
        cluster, _ = await resource.kafka(spec.kafka)
        partitions = len((await cluster.aio.partitions([topic])).get(topic) or [])
    return replay_replicas(spec.consumer.replicas, partitions or spec.consumer.replicas)


# ------------------------------------------------------------------------------------------ following


async def _follow(resource: Resource, spec: LakeReplaySpec, memory: ObjectMemory) -> None:
    if not _lake_drained(resource):
        await _follow_lake(resource, spec, memory)
    if not _lake_drained(resource):
        return
    if spec.then is None:
        if await _verified(resource, spec):
            resource.set_phase(Phase.DRAINING, "Drained", "the backfill topic is drained; removing what Reprise made")
        return
    await _continue(resource, spec)


async def _verified(resource: Resource, spec: LakeReplaySpec) -> bool:
    """spec.verify's hook: True once the check passed (at once without one)."""
    if spec.verify is None:
        return True
    return await cutover.gate(
        resource, spec.verify, hold=False, approval=spec.approval.value, env=_verify_env(resource, spec), caught_up=True
    )


def _verify_env(resource: Resource, spec: LakeReplaySpec) -> dict[str, str]:
    """What the check is told: the lake range went through the backfill topic under the drain group; with
    then.reconsume, the live topics under its replay group too."""
    status = _status(resource)
    children = status.children
    topics = [children.backfill_topic] if children.backfill_topic else []
    mode = "Lake"
    if spec.then is not None:
        topics += list(spec.then.reconsume.topics)
        mode = f"Lake+{spec.then.reconsume.mode.value}"
    plan = plan_from_status(status.plan)
    return verify_env(
        rid=resource.replay_id,
        name=resource.name,
        mode=mode,
        topics=topics,
        replay_group=children.replay_group or spec.drain_group,
        live_group=spec.then.reconsume.consumer_group if spec.then is not None else None,
        bootstrap_servers=spec.kafka.bootstrap_servers,
        plan=plan,
    )


def _record_spark(resource: Resource, outcome: SparkOutcome | None, name: str, records: int | None = None) -> None:
    """status.spark (its time only moves when something else did), and an Event when the state changed."""
    old = _status(resource).spark or SparkStatus()
    spark = SparkStatus(
        application_name=name,
        state=outcome.state if outcome else (old.state or ""),
        attempts=outcome.attempts if outcome else old.attempts,
        records_written=records if records is not None else old.records_written,
    )
    if old.model_copy(update={"updated_at": None}) != spark:
        resource.record(spark=spark.model_copy(update={"updated_at": resource.now()}))
        if outcome is not None and old.state != outcome.state and outcome.state:
            warning = outcome.failed or outcome.state in ("FAILING", "SUBMISSION_FAILED", "UNKNOWN")
            resource.event(outcome.reason, outcome.message, warning=warning)


async def _follow_lake(resource: Resource, spec: LakeReplaySpec, memory: ObjectMemory) -> None:
    """Spark's state into conditions, the drain group's lag into progress; Drained once both say done."""
    rt = resource.rt
    children = _children(resource)
    name, topic, group = children.spark_application, children.backfill_topic, children.replay_group
    assert name and topic and group, "a started LakeReplay records its children before it is Running"
    cluster, config = await resource.kafka(spec.kafka)
    if spec.consumer.entrypoint is Entrypoint.SERVICE:
        state = await rt.handovers.aio.replay(
            spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace), resource.replay_id
        )
        await require_replay_role(
            resource,
            memory,
            spec.consumer,
            state.bootstrapped,
            resource.replay_id,
            rt.settings.handover_topic_for(resource.namespace),
            rt.settings.replay_role_timeout,
        )
    produced = resource.condition_true(ConditionType.PRODUCED)
    app = await rt.kube.aio.get_custom(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, resource.namespace, name)
    if app is None and not produced:
        await _recreate_spark(resource, spec, name, topic)
        return
    driver = ""
    if app is not None and spark_state(app) in DRIVER_FAILED_STATES:
        # The controller says only "driver container failed with ExitCode: 1"; the driver pod says why.
        driver = driver_report(
            resource.namespace, await rt.kube.aio.list_pods(resource.namespace, driver_selector(name))
        )
    outcome = spark_outcome(app, driver) if app is not None else None
    if outcome is not None and outcome.failed:
        _record_spark(resource, outcome, name)
        # Produced said what Spark was doing when last seen (RUNNING): it now says how it ended.
        resource.condition(ConditionType.PRODUCED, "False", outcome.reason, outcome.message)
        await _remove_lake_children(resource, spec, keep_spark=True)
        raise Failure(outcome.reason, outcome.message)
    if outcome is not None and outcome.produced and not produced:
        resource.condition(ConditionType.PRODUCED, "True", outcome.reason, outcome.message)
        resource.condition(
            ConditionType.RUNNING,
            "True",
            "Draining",
            "every record is in the backfill topic; the drain consumers read it to its end",
        )
        produced = True
    elif not produced and outcome is not None:
        resource.condition(ConditionType.PRODUCED, "False", outcome.reason, outcome.message)
        resource.condition(ConditionType.RUNNING, "True", outcome.reason, outcome.message)

    # Spark's state is read before the end offsets: once it said COMPLETED, these ends are final.
    found = await cluster.aio.partitions([topic])
    if topic not in found:
        raise Retry(f"the backfill topic {topic} is not in the cluster's metadata yet")
    keys = [(topic, p) for p in found[topic]]
    ends, committed = await asyncio.gather(
        cluster.aio.shared_end_offsets(keys, rt.settings.poll_interval / 2),
        cluster.aio.committed_offsets(group, keys),
    )
    # Until Spark completed, the ends are what it wrote so far, not the range's: no partition is drained yet.
    views = [
        PartitionView(t, p, start=0, end=ends[(t, p)], position=committed.get((t, p)), end_final=produced)
        for t, p in keys
    ]
    progress = record_progress(resource, memory, views)
    if children.deployment:
        await report_failing_pods(resource, f"{cutover.replay_pods_selector(resource.name, 'lakereplay')},!spark-role")
    _record_spark(resource, outcome, name, records=sum(ends.values()))
    hold = spec.completion.drained_for
    if memory.drain.observe(produced and progress.all_done, resource.now(), hold):
        message = (
            f"Spark completed and group {group} consumed all {progress.total} records of {topic}; "
            f"held for {format_duration(hold)}"
        )
        resource.condition(ConditionType.DRAINED, "True", "Drained", message)
        resource.event("Drained", message)


async def _recreate_spark(resource: Resource, spec: LakeReplaySpec, name: str, topic: str) -> None:
    """Someone deleted the SparkApplication before it completed: run it again. The job resumes from its
    progress markers, so the records already in the topic are not written again."""
    rt = resource.rt
    app = _spark_manifest(resource, spec, name, topic)
    await rt.kube.aio.create_owned(app, resource.uid)
    resource.event(
        "SparkApplicationRecreated",
        f"SparkApplication {name} was deleted before it completed: created it again (it resumes "
        "from its progress markers)",
        warning=True,
    )


def _continuation_of(resource: Resource, spec: LakeReplaySpec, starts: dict[TopicPartitionKey, int]) -> dict:
    try:
        return continuation_manifest(
            owner=resource.owner(),
            name=continuation_name(resource.name),
            namespace=resource.namespace,
            spec=spec,
            starts=starts,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise Failure("InvalidSpec", f"spec.then.reconsume: {first.get('msg')}") from None


async def _continue(resource: Resource, spec: LakeReplaySpec) -> None:
    """then.reconsume: once the lake's children are gone, a Reconsume from the offsets at spec.source.to."""
    rt = resource.rt
    assert spec.then is not None
    continuation = _status(resource).continuation or ContinuationStatus()
    name = continuation.reconsume
    if not name:
        # The drain must be gone before the live topics are replayed: each key's lake records first.
        await _remove_lake_children(resource, spec)
        cluster, _ = await resource.kafka(spec.kafka)
        # Looked up again now: the seam is decided when the continuation starts, not when the plan was shown.
        plan = await _continuation_plan(resource, spec, cluster)
        starts = plan.start_offsets()
        manifest = _continuation_of(resource, spec, starts)
        name = manifest["metadata"]["name"]
        await rt.kube.aio.create_owned(manifest, resource.uid)
        offsets = [ContinuationOffset(topic=t, partition=p, offset=o) for (t, p), o in sorted(starts.items())]
        resource.record(continuation=ContinuationStatus(reconsume=name, phase=Phase.PENDING, start_offsets=offsets))
        resource.record(children=resource.updated("children", LakeReplayChildren, reconsume=name))
        message = (
            f"Reconsume {name} continues on {', '.join(spec.then.reconsume.topics)} "
            f"({spec.then.reconsume.mode.value}) from the offsets at {rfc3339_exact(spec.source.to)}"
        )
        resource.condition(ConditionType.RUNNING, "True", "Continuing", message)
        resource.event("ContinuationStarted", message)
        return
    child = await rt.kube.aio.get_custom(GROUP, VERSION, RECONSUME_PLURAL, resource.namespace, name)
    if child is None:
        raise Failure(
            "ContinuationDeleted",
            f"the Reconsume {name} of then.reconsume was deleted before it completed; the records from "
            f"{rfc3339_exact(spec.source.to)} on were not all replayed",
        )
    status = ReconsumeStatus.model_validate(child.get("status") or {})
    phase = status.phase
    if continuation.phase != phase:
        resource.record(continuation=resource.updated("continuation", ContinuationStatus, phase=phase))
    if phase == Phase.FAILED:
        failed = status.condition(ConditionType.FAILED)
        reason, message = (failed.reason, failed.message) if failed else ("", "")
        raise Failure("ContinuationFailed", f"Reconsume {name} failed: {reason}: {message}")
    if phase == Phase.COMPLETE and await _verified(resource, spec):
        resource.set_phase(
            Phase.DRAINING,
            "ContinuationComplete",
            f"Reconsume {name} completed on the live topics; removing what Reprise made",
        )


# ------------------------------------------------------------------------------------------ teardown


async def _teardown(resource: Resource, spec: LakeReplaySpec, memory: ObjectMemory) -> None:
    """Remove everything Reprise made; then Complete."""
    if spec.then is None:
        await _remove_lake_children(resource, spec)
    await _remove_continuation(resource)
    if spec.then is None:
        message = "every record of the lake range was drained; everything Reprise made is removed"
    else:
        message = "the lake range was drained and the live topics replayed; everything Reprise made is removed"
    await cutover.remove_jobs(resource)
    resource.complete("Completed", message)


async def _remove_continuation(resource: Resource) -> None:
    """Delete the continuation Reconsume and wait until it is gone (its own finalizer hands back first)."""
    rt = resource.rt
    name = _children(resource).reconsume
    if not name:
        return
    await rt.kube.aio.delete_custom(GROUP, VERSION, RECONSUME_PLURAL, resource.namespace, name)
    if await rt.kube.aio.get_custom(GROUP, VERSION, RECONSUME_PLURAL, resource.namespace, name) is not None:
        raise Retry(f"Reconsume {name} is still being deleted")


async def _remove_lake_children(resource: Resource, spec: LakeReplaySpec, keep_spark: bool = False) -> None:
    """SparkApplication (gone before the topic: a late write would create it again), the drain Deployment
    (its pods gone before the group), the drain group, the backfill topic, the drain's handover records.
    `keep_spark` keeps a failed SparkApplication for `kubectl describe` (it is owned, so it goes with the
    LakeReplay)."""
    rt = resource.rt
    ns = resource.namespace
    children = _children(resource)
    created = created_of(resource.status)
    if children == LakeReplayChildren() and not created.groups and not created.topics:
        return
    cluster, config = await resource.kafka(spec.kafka)
    app = children.spark_application
    if app and not keep_spark:
        await rt.kube.aio.delete_custom(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, ns, app)
        if await rt.kube.aio.get_custom(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, ns, app) is not None:
            raise Retry(f"SparkApplication {app} is still being deleted")
        # Its driver pod goes after it (garbage collection of the owner reference the Spark operator's webhook
        # sets), and writes until then.
        if await rt.kube.aio.list_pods(ns, f"sparkoperator.k8s.io/app-name={app}"):
            raise Retry(f"the driver of SparkApplication {app} is still stopping")
    if children.deployment:
        await rt.kube.aio.delete_deployment(ns, children.deployment)
    # The Spark operator copies the SparkApplication's labels to its driver pod, which a failed application keeps.
    drain = f"{cutover.replay_pods_selector(resource.name, 'lakereplay')},!spark-role"
    pods = await rt.kube.aio.list_pods(ns, drain)
    if pods:
        raise Retry(f"{len(pods)} drain pod(s) still terminating")
    # What status.created lists, and nothing else (`claims`): also when a start stopped before it recorded children.
    for group in created.groups if spec.cleanup.delete_replay_group else []:
        description = await cluster.aio.describe_group(group)
        if description.state not in ("Empty", "Dead", "Unknown"):
            raise Retry(f"drain group {group} is {description.state}; waiting for its members to leave")
        await cluster.aio.delete_group(group)
    for topic in created.topics if spec.cleanup.delete_backfill_topic else []:
        await cluster.aio.delete_topic(topic)
    await rt.handovers.aio.tombstone(
        spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace), resource.replay_id
    )


# ------------------------------------------------------------------------------------------ deletion


async def cleanup(resource: Resource, memory: ObjectMemory) -> None:
    """The finalizer: remove everything Reprise made, the continuation first (its own finalizer hands every
    partition back to the live group), then the lake's children."""
    try:
        spec = resource.spec_as(LakeReplaySpec)
    except Failure:
        return  # an invalid spec never started anything
    await _remove_continuation(resource)
    await _remove_lake_children(resource, spec)


__all__ = [
    "KIND",
    "PLURAL",
    "cleanup",
    "continuation_manifest",
    "drain_settings",
    "spark_application",
]
