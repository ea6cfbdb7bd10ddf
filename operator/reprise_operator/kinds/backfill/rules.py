"""Backfill's pure rules: its names and limits, the plan's status, the worker's and the upstream Job's
manifests, the worker's outcome and the produced ranges, and the quiet clock of a Debezium snapshot.

`steps` does the I/O around them; nothing here talks to an API.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Literal, Sequence

from replay_worker.contract import FilterSpec, WorkerSettings

from ...api import (
    BackfillPlan,
    BackfillSpec,
    KeyPartitionPlan,
    OffsetRange,
)
from ...rules.workloads import KAFKA_CONFIG_DIR, Owner, job_manifest, merge_env, worker_job_manifest
from ...shared.constants import bounded_name, child_labels
from . import barrier
from .keys_file import (
    KEYS_FILE,
    KEYS_PATH,
    keys_env,
    partition_for,
    with_keys_file,
)

KIND = "Backfill"
PLURAL = "backfills"

#: At most this many keys not found are listed by name in status (all are counted).
NOT_FOUND_LISTED = 1000
#: A finished Job whose worker result does not show up in the handover topic within this fails.
RESULT_WAIT = timedelta(seconds=60)
#: Debezium without a notification topic: the snapshot is over when the target's end offsets have not
#: moved for QUIET_POLLS polls (at least QUIET_MIN), or QUIET_CAP after the signal whatever they do.
QUIET_POLLS = 10
QUIET_MIN = timedelta(seconds=10)
QUIET_CAP = timedelta(minutes=15)
#: Notifications are read from this long before the Backfill started (clock skew between hosts).
CLOCK_SLACK_MS = 60_000

SourceKind = Literal["topic", "job", "debezium"]


# ------------------------------------------------------------------------------------------ pure parts


def plan_status(keys: Sequence[str], partitions: int | None, groups: Sequence[str], now: datetime) -> dict:
    """`status.plan`, built with the API's `BackfillPlan` model: the keys, the partitions they map to (None:
    the source decides), the groups."""
    counts = Counter(partition_for(k, partitions) for k in keys) if partitions else Counter()
    return BackfillPlan(
        key_count=len(keys),
        partitions=[KeyPartitionPlan(partition=p, keys=n) for p, n in sorted(counts.items())],
        downstream_groups=list(groups),
        computed_at=now,
    ).as_status()


def plan_summary(plan: dict, topic: str, source: SourceKind) -> str:
    groups = plan.get("downstreamGroups") or []
    waits = f"waits for {', '.join(groups)}" if groups else "no downstream groups to wait for"
    if not plan.get("partitions"):
        where = "the connector's key format decides the partitions" if source == "debezium" else "no partitions"
        return f"{plan['keyCount']} keys to {topic} ({where}); {waits}"
    return f"{plan['keyCount']} keys to {len(plan['partitions'])} partitions of {topic}; {waits}"


def keys_configmap_name(cr_name: str) -> str:
    return bounded_name(cr_name, "keys", limit=253)


def job_name(cr_name: str) -> str:
    return bounded_name(cr_name, "backfill")


def keys_configmap(owner: Owner, namespace: str, keys: Sequence[str]) -> dict:
    """The snapshot of the planned keys, one per line, owned by the Backfill."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": keys_configmap_name(owner.name),
            "namespace": namespace,
            "labels": child_labels(KIND, owner.name, "keys"),
            "annotations": {"reprise.io/key-count": str(len(keys))},
            "ownerReferences": [owner.reference()],
        },
        "data": {KEYS_FILE: "".join(f"{k}\n" for k in keys)},
    }


def worker_settings(spec: BackfillSpec, rid: str, handover_topic: str) -> WorkerSettings:
    """The backfill worker's settings: read the source topic, re-emit the keys of the keys file to spec.topic."""
    assert spec.source.topic is not None
    return WorkerSettings(
        bootstrap_servers=spec.kafka.bootstrap_servers,
        replay_id=rid,
        topics=(spec.source.topic.name,),
        role="backfill",
        forward_topic=spec.topic,
        filter=FilterSpec(keys_file=KEYS_PATH),
        handover_topic=handover_topic,
        kafka_config_dir=KAFKA_CONFIG_DIR if spec.kafka.config_from is not None else None,
        metrics_port=0,
    )


def worker_job(owner: Owner, namespace: str, spec: BackfillSpec, rid: str, image: str, handover_topic: str) -> dict:
    """The `topic` source's Job: Reprise's worker image in role backfill, with the keys file mounted."""
    manifest = worker_job_manifest(
        owner=owner,
        name=job_name(owner.name),
        namespace=namespace,
        labels=child_labels(KIND, owner.name, "backfill-worker"),
        image=image,
        args=[],
        worker_env=worker_settings(spec, rid, handover_topic).to_env(),
        kafka_secret=spec.kafka.config_from.secret_ref.name if spec.kafka.config_from else None,
        backoff_limit=2,
    )
    pod = manifest["spec"]["template"]
    pod["spec"] = with_keys_file(pod["spec"], keys_configmap_name(owner.name))
    return manifest


def upstream_job(owner: Owner, namespace: str, spec: BackfillSpec, keys: Sequence[str]) -> dict:
    """The `job` source's Job: the user's pod template, with the keys as a file and in the environment."""
    source = spec.source.job
    assert source is not None
    template = copy.deepcopy(source.template)
    pod_spec = dict(template.get("spec") or {})
    containers = pod_spec.get("containers") or []
    if not containers:
        raise ValueError("spec.source.job.template.spec.containers is empty: name the upstream service's command")
    ours = keys_env(keys, spec.topic)
    pod_spec["containers"] = [{**c, "env": merge_env(c.get("env") or [], ours)} for c in containers]
    pod_spec = with_keys_file(pod_spec, keys_configmap_name(owner.name))
    manifest = job_manifest(
        owner=owner,
        name=job_name(owner.name),
        namespace=namespace,
        labels=child_labels(KIND, owner.name, "backfill-job"),
        pod_spec=pod_spec,
        backoff_limit=source.backoff_limit,
        pod_metadata=template.get("metadata"),
    )
    if source.active_deadline_seconds is not None:
        manifest["spec"]["activeDeadlineSeconds"] = source.active_deadline_seconds
    return manifest


@dataclass(frozen=True)
class WorkerOutcome:
    """The backfill worker's result, in status terms."""

    ranges: list[barrier.ProducedRange]
    produced: int
    not_found: list[str]
    deleted: int


def worker_outcome(result: dict, topic: str) -> WorkerOutcome:
    """Read the worker's `result` record. Deleted keys (latest record a tombstone) have no state to
    re-emit, so they count as not found; the Produced message counts them apart."""
    missing = list(result.get("missing") or [])
    deleted = list(result.get("deleted") or [])
    return WorkerOutcome(
        ranges=barrier.ranges_from_worker(topic, result.get("partitions") or {}),
        produced=int(result.get("produced") or 0),
        not_found=sorted(set(missing) | set(deleted)),
        deleted=len(deleted),
    )


def ranges_status(ranges: Iterable[barrier.ProducedRange]) -> list[dict]:
    """`status.producedRange`, built with the API's `OffsetRange` model."""
    return [
        OffsetRange(topic=r.topic, partition=r.partition, start_offset=r.start, end_offset=r.end).as_status()
        for r in ranges
    ]


def ranges_from_status(recorded: Iterable[OffsetRange]) -> list[barrier.ProducedRange]:
    """status.producedRange read back (after a restart, or to compare with what a new run produced)."""
    return [barrier.ProducedRange(r.topic, r.partition, r.start_offset, r.end_offset) for r in recorded]


@dataclass
class QuietClock:
    """How long a topic's end offsets have held still (restarted on every move)."""

    ends: dict | None = None
    since: datetime | None = None

    def observe(self, ends: dict, now: datetime) -> timedelta:
        if ends != self.ends or self.since is None:
            self.ends, self.since = dict(ends), now
        return now - self.since


def quiet_period(poll_interval: float) -> timedelta:
    return max(QUIET_MIN, timedelta(seconds=QUIET_POLLS * poll_interval))
