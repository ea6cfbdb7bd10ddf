"""Names the operator puts on the cluster: labels, annotations, finalizer, child names.

One place, so that a label selector written in the chart, a test and the reconcile code agree.
"""

from __future__ import annotations

import hashlib

GROUP = "reprise.io"
VERSION = "v1alpha1"

#: The finalizer that makes deleting a resource mid-flight clean up everything Reprise made.
FINALIZER = "reprise.io/cleanup"
#: Strimzi-style approval of a plan: `kubectl annotate reconsume NAME reprise.io/approve=true`.
APPROVE_ANNOTATION = "reprise.io/approve"
#: On a child that outlives its resource and so has no owner reference (Rewind's rollback ConfigMap): the uid
#: of the resource Reprise created it for.
CREATED_FOR_ANNOTATION = "reprise.io/created-for"

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_REPLAY = "reprise.io/replay"
LABEL_KIND = "reprise.io/kind"
#: The owner's opt-in on a Secret of Kafka client settings: the operator reads no other Secret (`=true`).
LABEL_KAFKA_CLIENT = "reprise.io/kafka-client"
MANAGED_BY = "reprise"


def child_labels(kind: str, name: str, component: str) -> dict[str, str]:
    """Labels on every child: enough to select them, and never the live service's own labels."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_NAME: "reprise",
        LABEL_COMPONENT: component,
        LABEL_KIND: kind.lower(),
        LABEL_REPLAY: name,
    }


def bounded_name(*parts: str, limit: int = 63) -> str:
    """`a-b-c`, shortened with a stable hash suffix when it would pass a Kubernetes or Kafka limit."""
    name = "-".join(p for p in parts if p)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-.')}-{digest}"


def replay_deployment_name(cr_name: str) -> str:
    return bounded_name(cr_name, "replay")


def replay_group_name(namespace: str, cr_name: str) -> str:
    """The temporary consumer group of one replay, `reprise.<namespace>.<name>`: unique per resource, readable in
    Kafka's tools. Dots, because neither a namespace nor a Reprise name may hold one: with dashes `a`/`b-c` and
    `a-b`/`c` shared a group, and the prefix ACL `reprise.<namespace>.` a platform grants matches one namespace only."""
    name = f"reprise.{namespace}.{cr_name}"
    if len(name) <= 200:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:191].rstrip('-.')}-{digest}"


def replay_id(namespace: str, cr_name: str, uid: str) -> str:
    """Identifies one replay in the handover topic; the uid tells a re-created resource apart."""
    return f"{namespace}/{cr_name}/{uid[:8]}"


def rollback_configmap_name(cr_name: str) -> str:
    return bounded_name(cr_name, "rollback", limit=253)
