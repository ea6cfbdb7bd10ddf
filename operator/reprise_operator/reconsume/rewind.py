"""Rewind's rollback snapshot: the live group's offsets before the rewind moved them, as a ConfigMap a person
restores from with kafka-consumer-groups. Pure: the caller reads the offsets and creates the ConfigMap.
"""

from __future__ import annotations

import json

from ..api import RECONSUME, ReconsumeSpec
from ..constants import child_labels
from ..kafka_admin import TopicPartitionKey
from ..lifecycle import Resource


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
            "annotations": {"reprise.io/consumer-group": spec.consumer_group},
        },
        "data": {
            "offsets.csv": csv,
            "offsets.json": json.dumps(
                [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(before.items())]
            ),
            "restore.sh": (
                f"kafka-consumer-groups.sh --bootstrap-server {spec.kafka.bootstrap_servers} --group {spec.consumer_group} "
                "--reset-offsets --from-file offsets.csv --execute --all-topics\n"
            ),
        },
    }
