"""Rewind's rollback snapshot: the live group's offsets before the rewind moved them, as a ConfigMap a person
restores from with kafka-consumer-groups. Pure: the caller reads the offsets and creates the ConfigMap.

`restore.sh` is the only shell text Reprise writes, and a person runs it: every value it interpolates is
quoted (a group id may hold `;`, `|` or `$(...)`, which Kafka accepts). The ConfigMap is not owned by the
resource (it outlives it), so the annotation `reprise.io/created-for` (the resource's uid) is what tells
Reprise's own snapshot from one someone else put under that name; `is_own_snapshot` decides.
"""

from __future__ import annotations

import json
import shlex

from ...api import RECONSUME, ReconsumeSpec
from ...shared.constants import CREATED_FOR_ANNOTATION, child_labels
from ...doors.kafka_admin import TopicPartitionKey
from ...core.lifecycle import Resource


def rollback_configmap(
    resource: Resource, spec: ReconsumeSpec, name: str, before: dict[TopicPartitionKey, int]
) -> dict:
    """The snapshot as kafka-consumer-groups --reset-offsets --from-file CSV. Not owned by the resource:
    it must survive the resource's deletion, since rolling back is what it is for."""
    csv = "".join(f"{t},{p},{o}\n" for (t, p), o in sorted(before.items()))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": resource.namespace,
            "labels": child_labels(RECONSUME.kind, resource.name, "rollback"),
            "annotations": {"reprise.io/consumer-group": spec.consumer_group, CREATED_FOR_ANNOTATION: resource.uid},
        },
        "data": {
            "offsets.csv": csv,
            "offsets.json": json.dumps(
                [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(before.items())]
            ),
            "restore.sh": restore_script(spec.kafka.bootstrap_servers, spec.consumer_group),
        },
    }


def restore_script(bootstrap_servers: str, group: str) -> str:
    """The command that writes the snapshot back, every interpolated value quoted for the shell."""
    return (
        f"kafka-consumer-groups.sh --bootstrap-server {shlex.quote(bootstrap_servers)} --group {shlex.quote(group)} "
        "--reset-offsets --from-file offsets.csv --execute --all-topics\n"
    )


def is_own_snapshot(existing: dict, ours: dict) -> bool:
    """Whether the ConfigMap under the rollback name is the one Reprise writes now, or this resource's from an
    earlier attempt of the same step (the operator restarted after creating it): it names this resource's uid
    and holds the same snapshot (the live group is stopped, so its offsets have not moved). Anything else under
    that name is refused, never adopted: a person restores from it."""
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    uid = ((ours.get("metadata") or {}).get("annotations") or {}).get(CREATED_FOR_ANNOTATION)
    return uid is not None and annotations.get(CREATED_FOR_ANNOTATION) == uid and existing.get("data") == ours["data"]
