"""Backfill: re-emit the current state of named entities, then wait for the downstream groups. One step per call.

Seed 000's "targeted surgery": the upstream side re-produces a limited set of entities so downstream
services correct themselves without a replay. The phase in `status` says where a Backfill is, and every
step is idempotent from there, so the operator can be killed at any point:

    Pending -> Planning -> PlanReady -> (approved) -> Running -> Draining -> Complete
                                                   \\-> Suspended <-/     \\-> Failed (any step, with a reason)

- Planning reads the keys (`spec.keys`, or the ConfigMap of `keysFrom`), maps them to the target topic's
  partitions with the producer's default partitioner (murmur2 of the key's UTF-8 bytes, positive, modulo
  the partition count: Java's default and librdkafka's `murmur2_random`, which the backfill worker uses),
  and snapshots the keys into a ConfigMap owned by the Backfill (all sources but debezium with inline
  keys), so the run re-emits exactly the planned keys even if the user's ConfigMap changes afterwards.
- Running first records the target topic's end offsets (persisted before anything is produced), then:
  `topic` runs Reprise's worker (role backfill) as a Job, which reports what it produced and which keys
  it did not find as a `result` record in the handover topic; `job` runs the user's pod template as a Job
  with the keys as a file and in the environment, and the produced range is the end offsets after the Job
  minus those before (records other producers wrote meanwhile are included: the barrier then waits a
  little longer, never too little); `debezium` sends an incremental `execute-snapshot` signal and follows
  the connector's notifications to COMPLETED (then waits until the end offsets hold still for one poll,
  as the connector's producer may still be flushing); without a notification topic, the snapshot counts
  as done once the end offsets have not moved for `QUIET_POLLS` polls (at least `QUIET_MIN`), or at the
  latest `QUIET_CAP` after the signal.
- Draining is the completion barrier (`barrier.py`): every downstream group must commit past the last
  produced offset of every partition written to; a group whose committed offset stays put with records to
  pass for `barrier.stalledAfter` sets the Stalled condition, naming the partition and offset.

`spec.suspend` holds the producing step (the Job is suspended, a running Debezium snapshot is paused).
Once produced, Reprise runs nothing, so the barrier keeps being followed while suspended.

Restarts. Everything a later step needs is in status before the step that depends on it: the end offsets
before producing, then the Job (a deterministic name, created idempotently and adopted after a restart)
or the signal (its id is searched for in the signal topic before sending, so a snapshot is asked for once).
The worker's result stays in the handover topic until the Backfill completes. The stall clock and the
notification read position live in memory and fall back to status (a restart can only delay Stalled).
Re-running a Job (deleted by someone, or retried) only re-emits current state again, which is harmless.

Known limit: when the upstream producer (job, debezium) is transactional, the last offset of a partition
may be a commit marker that a downstream group never commits past (REFERENCE.md section 1); such a group
then shows 1 remaining and, after `stalledAfter`, Stalled.
"""

from __future__ import annotations

import asyncio


from replay_worker.contract import epoch_ms, from_epoch_ms

from . import barrier
from ...doors import debezium
from ...shared import metrics
from ...api import (
    BackfillChildren,
    BackfillPlan,
    BackfillSpec,
    BackfillStatus,
    ConditionType,
    DebeziumSignalStatus,
    Phase,
    format_duration,
)
from ...shared.kafka_pool import KafkaPool
from ...core.driver import Held, plan_ready
from ...core.lifecycle import Failure, ObjectMemory, Resource, Retry, Waiting
from ...rules.job_state import job_state
from ...rules.progress import PartitionView, progress_status, summarize
from .keys_file import (
    KEYS_FILE,
    check_file_keys,
    keys_from_text,
    unique,
)
from .rules import (
    KIND,
    PLURAL,
    NOT_FOUND_LISTED,
    RESULT_WAIT,
    QUIET_CAP,
    CLOCK_SLACK_MS,
    SourceKind,
    plan_status,
    plan_summary,
    keys_configmap_name,
    job_name,
    keys_configmap,
    worker_job,
    upstream_job,
    worker_outcome,
    ranges_status,
    ranges_from_status,
    QuietClock,
    quiet_period,
)
# ------------------------------------------------------------------------------------------ the steps


def _source(spec: BackfillSpec) -> SourceKind:
    return spec.source.kind  # type: ignore[return-value]


class BackfillLifecycle:
    """Backfill's hooks for the lifecycle driver (`driver.transition` decides which one runs). Starting only
    records the target's end offsets: they are stored before the producing (the follow hook) begins."""

    kind, plural, spec_model = KIND, PLURAL, BackfillSpec

    async def plan(self, resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
        await _plan(resource, spec)

    async def start(self, resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
        await _begin(resource, spec)

    async def suspend(self, resource: Resource, spec: BackfillSpec) -> Held | None:
        return Held(await _hold(resource, spec, True))

    async def resume(self, resource: Resource, spec: BackfillSpec) -> Held | None:
        return Held(await _hold(resource, spec, False))

    async def while_suspended(self, resource: Resource, spec: BackfillSpec) -> None:
        return None

    async def follow(self, resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
        await _produce(resource, spec, memory)

    async def teardown(self, resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
        await _follow_barrier(resource, spec, memory)

    async def revive(self, resource: Resource, spec: BackfillSpec) -> bool:
        return False

    def ttl_seconds(self, spec: BackfillSpec) -> int | None:
        return spec.cleanup.ttl_seconds_after_finished

    async def cleanup(self, resource: Resource, memory: ObjectMemory) -> None:
        await cleanup(resource, memory)


LIFECYCLE = BackfillLifecycle()


async def _read_keys(resource: Resource, spec: BackfillSpec) -> list[str]:
    if spec.keys is not None:
        return unique(spec.keys)
    assert spec.keys_from is not None
    ref = spec.keys_from.config_map_ref
    found = await resource.rt.kube.aio.get_configmap(resource.namespace, ref.name)
    if found is None:
        raise Waiting(
            "ConfigMapNotFound", f"spec.keysFrom.configMapRef: ConfigMap {resource.namespace}/{ref.name} does not exist"
        )
    data = found.get("data") or {}
    if ref.key not in data:
        raise Waiting(
            "ConfigMapKeyNotFound",
            f"spec.keysFrom.configMapRef: ConfigMap {resource.namespace}/{ref.name} has no key {ref.key!r}",
        )
    return keys_from_text(data[ref.key])


async def _plan(resource: Resource, spec: BackfillSpec) -> None:
    resource.set_phase(Phase.PLANNING, "Planning", "computing the plan", event=False)
    keys = await _read_keys(resource, spec)
    if not keys:
        raise Failure("NoKeys", "spec.keysFrom: the ConfigMap lists no keys (one per line)")
    source = _source(spec)
    cluster, _ = await resource.kafka(spec.kafka)
    wanted = [(spec.topic, "spec.topic")]
    if spec.source.topic is not None:
        wanted.append((spec.source.topic.name, "spec.source.topic.name"))
    if spec.source.debezium is not None:
        wanted.append((spec.source.debezium.signal_topic, "spec.source.debezium.signalTopic"))
    found = await cluster.aio.partitions([name for name, _ in wanted])
    for name, field in wanted:
        if name not in found:
            raise Waiting("TopicNotFound", f"{field}: topic {name} does not exist in the Kafka cluster")
    if source == "debezium":
        dbz = spec.source.debezium
        assert dbz is not None
        try:
            debezium.execute_snapshot(
                debezium.signal_id(resource.uid), dbz.topic_prefix, dbz.data_collection, dbz.key_column, keys
            )
        except debezium.SignalError as exc:
            raise Failure("InvalidKeys", f"spec.keys: {exc}") from None
        # The connector keys its records by the row's primary key in its own format: no partitions to plan.
        plan = plan_status(keys, None, spec.downstream_groups or [], resource.now())
    else:
        try:
            check_file_keys(keys)
        except ValueError as exc:
            raise Failure("InvalidKeys", f"spec.keys: {exc}") from None
        plan = plan_status(keys, len(found[spec.topic]), spec.downstream_groups or [], resource.now())
    if source != "debezium" or spec.keys_from is not None:
        await _snapshot_keys(resource, keys)
    resource.record(plan=plan)
    summary = plan_summary(plan, spec.topic, source)
    plan_ready(resource, summary)


async def _snapshot_keys(resource: Resource, keys: list[str]) -> None:
    """Create the keys ConfigMap; one left over from an earlier plan with other keys is replaced."""
    kube = resource.rt.kube
    manifest = keys_configmap(resource.owner(), resource.namespace, keys)
    existing = await kube.aio.create_owned(manifest, resource.uid)
    if (existing.get("data") or {}) != manifest["data"]:
        await kube.aio.delete_configmap(resource.namespace, manifest["metadata"]["name"])
        raise Retry("the keys ConfigMap held other keys (an earlier plan); replacing it")
    resource.record(children=resource.updated("children", BackfillChildren, config_maps=[manifest["metadata"]["name"]]))


async def _planned_keys(resource: Resource, spec: BackfillSpec) -> list[str]:
    """The keys as planned: `spec.keys` (immutable), else the snapshot ConfigMap made at planning."""
    if spec.keys is not None:
        return unique(spec.keys)
    kube = resource.rt.kube
    found = await kube.aio.get_configmap(resource.namespace, keys_configmap_name(resource.name))
    if found is None:
        raise Failure(
            "KeysConfigMapDeleted", f"ConfigMap {keys_configmap_name(resource.name)} with the planned keys was deleted"
        )
    return keys_from_text((found.get("data") or {}).get(KEYS_FILE, ""))


async def _end_offsets(resource: Resource, spec: BackfillSpec) -> dict[int, int]:
    cluster, _ = await resource.kafka(spec.kafka)
    found = await cluster.aio.partitions([spec.topic])
    if spec.topic not in found:
        raise Failure("TopicNotFound", f"spec.topic: topic {spec.topic} was deleted")
    ends = await cluster.aio.end_offsets([(spec.topic, p) for p in found[spec.topic]])
    return {p: o for (_, p), o in ends.items()}


async def _begin(resource: Resource, spec: BackfillSpec) -> None:
    """Record the target's end offsets before anything is produced; the producing starts next step."""
    before = await _end_offsets(resource, spec)
    plan = resource.status_as(BackfillStatus).plan or BackfillPlan()
    for part in plan.partitions:
        part.start_offset = before.get(part.partition, 0)
    resource.record(
        produced_range=ranges_status(barrier.ProducedRange(spec.topic, p, o, o) for p, o in sorted(before.items())),
        plan=plan,
        started_at=resource.now(),
    )
    if _source(spec) == "debezium":
        resource.record(signal=DebeziumSignalStatus(id=debezium.signal_id(resource.uid)))
    resource.condition(
        ConditionType.RUNNING, "True", "Starting", f"recorded the end offsets of {spec.topic} before producing"
    )
    resource.set_phase(
        Phase.RUNNING, "Started", f"re-emitting {resource.status['plan']['keyCount']} keys to {spec.topic}"
    )


async def _produce(resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
    source = _source(spec)
    if source == "debezium":
        await _follow_debezium(resource, spec, memory)
    else:
        await _follow_job(resource, spec, memory)


async def _ensure_job(resource: Resource, spec: BackfillSpec) -> dict | None:
    """Create the Job unless it exists (a re-emission is idempotent, so a deleted Job is simply re-run)."""
    kube = resource.rt.kube
    name = job_name(resource.name)
    job = await kube.aio.get_job(resource.namespace, name)
    if job is not None:
        # Also after a restart between creating the Job and recording it: the name is deterministic.
        resource.record(children=resource.updated("children", BackfillChildren, jobs=[name]))
        return job
    if _source(spec) == "topic":
        manifest = worker_job(
            resource.owner(),
            resource.namespace,
            spec,
            resource.replay_id,
            resource.rt.settings.worker_image,
            resource.rt.settings.handover_topic_for(resource.namespace),
        )
    else:
        try:
            manifest = upstream_job(resource.owner(), resource.namespace, spec, await _planned_keys(resource, spec))
        except ValueError as exc:
            raise Failure("InvalidTemplate", str(exc)) from None
    job = await kube.aio.create_owned(manifest, resource.uid)
    resource.record(children=resource.updated("children", BackfillChildren, jobs=[name]))
    resource.condition(ConditionType.RUNNING, "True", "JobCreated", f"Job {name} re-emits the keys")
    resource.event("JobCreated", f"created Job {name}")
    return job


async def _follow_job(resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
    state, reason = job_state(await _ensure_job(resource, spec))
    name = job_name(resource.name)
    if state == "failed":
        raise Failure("JobFailed", f"Job {name} failed ({reason}); nothing more is re-emitted")
    if state != "succeeded":
        return
    if _source(spec) == "job":
        before = {r.partition: r.start for r in ranges_from_status(resource.status_as(BackfillStatus).produced_range)}
        after = await _end_offsets(resource, spec)
        ranges = barrier.ranges_between(spec.topic, before, after)
        _produced(resource, spec, ranges, f"by Job {name}")
        return
    _, config = await resource.kafka(spec.kafka)
    result = await _worker_result(resource, spec, config)
    if result is None:
        waited_since = memory.extra.setdefault("result_wait", resource.now())
        if resource.now() - waited_since > RESULT_WAIT:
            raise Failure(
                "NoResult",
                f"Job {name} succeeded but its result is not in handover topic {resource.rt.settings.handover_topic_for(resource.namespace)}",
            )
        raise Retry(f"Job {name} succeeded; waiting for its result record")
    memory.extra.pop("result_wait", None)
    outcome = worker_outcome(result, spec.topic)
    resource.record(
        keys_produced=outcome.produced,
        keys_not_found=outcome.not_found[:NOT_FOUND_LISTED],
        keys_not_found_count=len(outcome.not_found),
    )
    detail = f"by Job {name}"
    if outcome.not_found:
        deleted = f" ({outcome.deleted} deleted)" if outcome.deleted else ""
        detail += f"; {len(outcome.not_found)} keys not found{deleted}"
        shown = ", ".join(outcome.not_found[:10]) + (", ..." if len(outcome.not_found) > 10 else "")
        resource.event(
            "KeysNotFound",
            f"{len(outcome.not_found)} of the keys are not in "
            f"{spec.source.topic.name if spec.source.topic else 'the source'}: {shown}",
            warning=True,
        )
    _produced(resource, spec, outcome.ranges, detail)


async def _worker_result(resource: Resource, spec: BackfillSpec, config: dict) -> dict | None:
    rt = resource.rt
    where = (spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace))
    state = await rt.handovers.aio.replay(*where, resource.replay_id)
    if state.result is None:
        await rt.handovers.aio.sync(*where)
        state = await rt.handovers.aio.replay(*where, resource.replay_id)
    return dict(state.result.body) if state.result is not None else None


def _produced(resource: Resource, spec: BackfillSpec, ranges: list[barrier.ProducedRange], detail: str) -> None:
    resource.record(produced_range=ranges_status(ranges))
    records = sum(r.records for r in ranges)
    message = f"{records} records in {len(ranges)} partitions of {spec.topic} {detail}"
    resource.condition(ConditionType.PRODUCED, "True", "Produced", message)
    groups = spec.downstream_groups or []
    waiting = f"waiting for {', '.join(groups)} to pass them" if groups and ranges else "nothing to wait for"
    resource.condition(ConditionType.RUNNING, "False", "Produced", waiting)
    resource.set_phase(Phase.DRAINING, "Produced", f"{message}; {waiting}")


# -- debezium


async def _follow_debezium(resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
    dbz = spec.source.debezium
    assert dbz is not None
    _, config = await resource.kafka(spec.kafka)
    bootstrap = spec.kafka.bootstrap_servers
    signal = resource.status_as(BackfillStatus).signal or DebeziumSignalStatus(id=debezium.signal_id(resource.uid))
    resource.record(signal=signal)
    signal_id = signal.id or debezium.signal_id(resource.uid)
    started = resource.status_as(BackfillStatus).started_at or resource.now()
    since_ms = epoch_ms(started) - CLOCK_SLACK_MS
    if signal.sent_at is None:
        already = await resource.rt.kafka_pool.run(
            debezium.signal_sent, bootstrap, config, dbz.signal_topic, signal_id, since_ms
        )
        if not already:
            keys = await _planned_keys(resource, spec)
            record = debezium.execute_snapshot(
                signal_id,
                dbz.topic_prefix,
                dbz.data_collection,
                dbz.key_column,
                keys,
                f"{resource.namespace}/{resource.name}",
            )
            await _send(resource.rt.kafka_pool, bootstrap, config, dbz.signal_topic, record)
        resource.record(signal=signal.model_copy(update={"sent_at": resource.now()}))
        resource.condition(
            ConditionType.RUNNING,
            "True",
            "SignalSent",
            f"execute-snapshot signal {signal_id} sent to {dbz.signal_topic}",
        )
        resource.event(
            "SignalSent", f"sent execute-snapshot {signal_id} for {dbz.data_collection} to {dbz.signal_topic}"
        )
        return  # persist "sent" before following
    if dbz.notification_topic is not None:
        # Notifications first, end offsets after: what COMPLETED follows is then in the offsets read.
        progress = await _notifications(
            resource.rt.kafka_pool, bootstrap, config, dbz.notification_topic, signal_id, since_ms, memory
        )
        if progress.last is not None and signal.last_notification != progress.last:
            at = from_epoch_ms(progress.at_ms) if progress.at_ms else resource.now()
            resource.record(signal=signal.model_copy(update={"last_notification": progress.last, "notified_at": at}))
        if progress.rows_scanned is not None:
            # The rows the filter matched: keys without a row are not found (by count; the connector
            # does not say which).
            plan = resource.status_as(BackfillStatus).plan
            key_count = plan.key_count if plan else 0
            resource.record(
                keys_produced=progress.rows_scanned, keys_not_found_count=max(0, key_count - progress.rows_scanned)
            )
        if progress.failure is not None:
            raise Failure("SnapshotFailed", f"Debezium: {progress.failure} (signal {signal_id})")
        if not progress.completed:
            return
        # After COMPLETED the connector's producer may still be flushing: the end offsets must hold still
        # from one poll to the next before they close the range.
        ends = await _end_offsets(resource, spec)
        if memory.extra.get("completed_ends") != ends:
            memory.extra["completed_ends"] = ends
            return
        detail = f"by Debezium (signal {signal_id} COMPLETED)"
    else:
        ends = await _end_offsets(resource, spec)
        clock: QuietClock = memory.extra.setdefault("quiet", QuietClock())
        quiet = clock.observe(ends, resource.now())
        sent = signal.sent_at or resource.now()
        if quiet < quiet_period(resource.rt.settings.poll_interval) and resource.now() - sent < QUIET_CAP:
            return
        detail = f"by Debezium (signal {signal_id}; end offsets still for {format_duration(quiet)})"
    before = {r.partition: r.start for r in ranges_from_status(resource.status_as(BackfillStatus).produced_range)}
    _produced(resource, spec, barrier.ranges_between(spec.topic, before, ends), detail)


async def _send(pool: KafkaPool, bootstrap: str, config: dict, topic: str, record: debezium.SignalRecord) -> None:
    try:
        await pool.run(debezium.send, bootstrap, config, topic, record)
    except Exception as exc:  # the broker is away or slow: send again at the next poll
        raise Retry(f"sending a signal to {topic}: {exc}") from None


async def _notifications(
    pool: KafkaPool, bootstrap: str, config: dict, topic: str, id_: str, since_ms: int, memory: ObjectMemory
) -> debezium.SnapshotProgress:
    """The snapshot's progress, reading only what arrived since the last poll (all of it after a restart)."""
    progress: debezium.SnapshotProgress = memory.extra.get("snapshot", debezium.SnapshotProgress())
    offsets = memory.extra.get("notification_offsets")
    try:
        found, offsets = await pool.run(debezium.read_notifications, bootstrap, config, topic, since_ms, offsets)
    except Exception as exc:
        raise Retry(f"reading notifications from {topic}: {exc}") from None
    progress = debezium.follow_all(progress, found, id_)
    memory.extra["snapshot"], memory.extra["notification_offsets"] = progress, offsets
    return progress


# -- suspend


async def _hold(resource: Resource, spec: BackfillSpec, suspend: bool) -> str:
    """Hold the producing step while suspended: suspend the Job, or pause the Debezium snapshot; say what."""
    kube = resource.rt.kube
    if _source(spec) == "debezium":
        signal = resource.status_as(BackfillStatus).signal
        if signal is None or signal.sent_at is None:
            return "the signal is not sent yet" if suspend else "the signal will be sent"
        dbz = spec.source.debezium
        assert dbz is not None
        _, config = await resource.kafka(spec.kafka)
        suffix = "pause" if suspend else "resume"
        build = debezium.pause_snapshot if suspend else debezium.resume_snapshot
        record = build(
            f"{signal.id}-{suffix}-{int(resource.now().timestamp())}",
            dbz.topic_prefix,
            f"{resource.namespace}/{resource.name}",
        )
        await _send(resource.rt.kafka_pool, spec.kafka.bootstrap_servers, config, dbz.signal_topic, record)
        return f"sent {suffix}-snapshot to {dbz.signal_topic}"
    name = job_name(resource.name)
    state, _ = job_state(await kube.aio.get_job(resource.namespace, name))
    if state in ("missing", "succeeded", "failed"):
        return f"Job {name} is {state}; nothing to {'suspend' if suspend else 'resume'}"
    await kube.aio.suspend_job(resource.namespace, name, suspend)
    return f"Job {name} {'suspended (its pod is stopped)' if suspend else 'resumed'}"


# -- the barrier


async def _follow_barrier(resource: Resource, spec: BackfillSpec, memory: ObjectMemory) -> None:
    groups = list(spec.downstream_groups or [])
    ranges = ranges_from_status(resource.status_as(BackfillStatus).produced_range)
    if not ranges:
        await _finish(resource, spec, "NothingProduced", "nothing was produced, so there is nothing to consume")
        return
    if not groups:
        await _finish(resource, spec, "Produced", "produced; spec.downstreamGroups is empty, so nothing to wait for")
        return
    cluster, _ = await resource.kafka(spec.kafka)
    partitions = [(r.topic, r.partition) for r in ranges]
    found = await asyncio.gather(*[cluster.aio.committed_offsets(g, partitions) for g in groups])
    committed = dict(zip(groups, found))
    now = resource.now()
    previous = memory.extra.get("barrier") or barrier.previous_from_status(resource.status_as(BackfillStatus).barrier)
    positions = barrier.observe(ranges, groups, committed, previous, now)
    memory.extra["barrier"] = {p.key: p for p in positions}
    view = barrier.view_of(positions, groups)
    resource.record(barrier=barrier.barrier_status(view, now))
    _record_progress(resource, memory, ranges, view)
    stalled = view.stalled(now, spec.barrier.stalled_after)
    stalled_groups = {p.group for p in stalled}
    for group in groups:
        metrics.BARRIER_REMAINING.labels(resource.namespace, resource.name, group).set(view.remaining(group))
        metrics.BARRIER_STALLED.labels(resource.namespace, resource.name, group).set(
            1 if group in stalled_groups else 0
        )
    if stalled:
        message = barrier.stalled_message(stalled, now)
        flipped = not resource.condition_true(ConditionType.STALLED)
        resource.condition(ConditionType.STALLED, "True", "GroupStalled", message)
        if flipped:
            resource.event("Stalled", message, warning=True)
    elif resource.condition_true(ConditionType.STALLED):
        resource.condition(ConditionType.STALLED, "False", "Moving", "every downstream group is moving or has passed")
        resource.event("Moving", "the stalled downstream groups are moving again")
    if view.passed:
        resource.condition(
            ConditionType.DRAINED, "True", "BarrierPassed", f"{', '.join(groups)} committed past every produced offset"
        )
        await _finish(
            resource,
            spec,
            "BarrierPassed",
            f"every downstream group ({', '.join(groups)}) consumed past what was produced",
        )


def _record_progress(
    resource: Resource, memory: ObjectMemory, ranges: list[barrier.ProducedRange], view: barrier.BarrierView
) -> None:
    """`status.progress` in the shape every kind shares: the slowest group per partition written to."""
    slowest = view.slowest()
    views = [
        PartitionView(
            r.topic,
            r.partition,
            start=r.start,
            end=r.target,
            position=slowest.get((r.topic, r.partition)),
            target=r.target,
        )
        for r in ranges
    ]
    now = resource.now()
    progress = summarize(views, memory.eta, now)
    new = progress_status(progress, now)
    old = dict(resource.status.get("progress") or {})
    if {k: v for k, v in old.items() if k != "updatedAt"} != {k: v for k, v in new.items() if k != "updatedAt"}:
        resource.record(progress=new)
    labels = (KIND, resource.namespace, resource.name)
    metrics.REPLAY_LAG.labels(*labels).set(progress.lag)
    metrics.REPLAY_PROCESSED.labels(*labels).set(progress.processed)
    if progress.eta_seconds is not None:
        metrics.REPLAY_ETA.labels(*labels).set(progress.eta_seconds)


async def _finish(resource: Resource, spec: BackfillSpec, reason: str, message: str) -> None:
    if resource.condition_true(ConditionType.STALLED):
        resource.condition(ConditionType.STALLED, "False", "Passed", "every downstream group has passed")
    await _forget_result(resource, spec)
    _forget_metrics(resource, spec)
    resource.complete(reason, message)


async def _forget_result(resource: Resource, spec: BackfillSpec) -> None:
    """Tombstone the worker's result record (its content is in status now)."""
    if _source(spec) != "topic":
        return
    rt = resource.rt
    _, config = await resource.kafka(spec.kafka)
    await rt.handovers.aio.tombstone(
        spec.kafka.bootstrap_servers, config, rt.settings.handover_topic_for(resource.namespace), resource.replay_id
    )


def _forget_metrics(resource: Resource, spec: BackfillSpec) -> None:
    for group in spec.downstream_groups or []:
        for gauge in (metrics.BARRIER_REMAINING, metrics.BARRIER_STALLED):
            try:
                gauge.remove(resource.namespace, resource.name, group)
            except KeyError:
                pass


# ------------------------------------------------------------------------------------------ deletion


async def cleanup(resource: Resource, memory: ObjectMemory) -> None:
    """The finalizer, for a Backfill deleted before it finished: stop what re-emits, then remove what
    Reprise made. The Job is deleted and its pods waited for (so nothing produces after the Backfill is
    gone); a Debezium snapshot still running gets a `stop-snapshot` signal; the keys ConfigMap and the
    worker's result record go. Records already produced stay: re-emitted state is correct state."""
    try:
        spec = resource.spec_as(BackfillSpec)
    except Failure:
        return  # an invalid spec never started anything
    kube = resource.rt.kube
    name = job_name(resource.name)
    if _source(spec) in ("topic", "job"):
        await kube.aio.delete_job(resource.namespace, name)
        pods = await kube.aio.list_pods(
            resource.namespace, f"reprise.io/replay={resource.name},reprise.io/kind=backfill"
        )
        if pods:
            raise Retry(f"{len(pods)} backfill pod(s) still terminating")
    signal = resource.status_as(BackfillStatus).signal
    dbz = spec.source.debezium
    if dbz is not None and signal and signal.sent_at and resource.phase in (Phase.RUNNING, Phase.SUSPENDED):
        _, config = await resource.kafka(spec.kafka)
        record = debezium.stop_snapshot(
            f"{signal.id}-stop", dbz.topic_prefix, dbz.data_collection, f"{resource.namespace}/{resource.name}"
        )
        await _send(resource.rt.kafka_pool, spec.kafka.bootstrap_servers, config, dbz.signal_topic, record)
    await kube.aio.delete_configmap(resource.namespace, keys_configmap_name(resource.name))
    if resource.status_as(BackfillStatus).started_at:
        await _forget_result(resource, spec)
    _forget_metrics(resource, spec)
