"""Pure builders of the workloads Reprise runs: standby replay-consumer Deployments and run-once Jobs.

Each `*_manifest` function returns a plain dict, ready for `kube.Kube.create_owned`; nothing here talks
to the API, so every rule below is unit-tested as data:

- A replay Deployment clones the live service's pod template (so its handler code, image, service
  account, own settings and annotations, injection annotations included, come along) but never its labels:
  a Service selecting the live pods must not send traffic to the replay pods. The labels a platform's
  policies select pods by are given as `consumer.podLabels` instead; Reprise's own labels win over them.
- The replay settings are injected as environment; Kafka credentials only as a Secret volume, so they
  never appear in the pod spec, the resource's status or Events.
- Every container gets the `restricted` Pod Security settings unless it already says otherwise, and a pod
  never runs with group 0 by omission: a pod that names its user but no group runs with that user's number as
  its group too (containerd falls back to gid 0 for a numeric user without an /etc/passwd entry), and the
  pods of Reprise's own image run as that image's `USER` (`IMAGE_USER`), named in full.
- With `keep_command` (the resource's `consumer.entrypoint: Service`) the cloned container keeps its own
  command, args and ports: the service's Reprise library runs the replay role from the `REPRISE_*` env, with
  the service's own handler, so the Python worker's delivery variables are left out.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..api.common import DELIVERY_VARIABLES
from ..shared.constants import LABEL_COMPONENT, LABEL_KIND, LABEL_REPLAY

#: Where the user's librdkafka settings Secret is mounted; the worker reads one setting per file.
KAFKA_CONFIG_DIR = "/etc/reprise/kafka"
KAFKA_CONFIG_VOLUME = "reprise-kafka-config"
WORKER_COMMAND = ["python", "-m", "replay_worker"]
#: The `USER` of the project's Dockerfile (uid and gid). The kubelet fills in only the uid from a numeric image
#: user, and the runtime then finds no group for it and uses 0, so pods of that image state both, and fsGroup.
IMAGE_USER = 65532


@dataclass(frozen=True)
class Owner:
    """The resource that owns a child: deleting it garbage-collects the child."""

    api_version: str
    kind: str
    name: str
    uid: str

    def reference(self) -> dict:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def restricted_security(container: dict) -> dict:
    """Fill in what the `restricted` Pod Security Standard requires, keeping what the user set."""
    security = dict(container.get("securityContext") or {})
    security.setdefault("allowPrivilegeEscalation", False)
    security.setdefault("runAsNonRoot", True)
    capabilities = dict(security.get("capabilities") or {})
    capabilities.setdefault("drop", ["ALL"])
    security["capabilities"] = capabilities
    security.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    return {**container, "securityContext": security}


def restricted_pod(pod_spec: dict) -> dict:
    spec = dict(pod_spec)
    pod_security = dict(spec.get("securityContext") or {})
    pod_security.setdefault("runAsNonRoot", True)
    pod_security.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    if "runAsUser" in pod_security:
        # A user named without a group would run with gid 0 (no /etc/passwd entry in a slim image).
        pod_security.setdefault("runAsGroup", pod_security["runAsUser"])
    spec["securityContext"] = pod_security
    group = pod_security.get("runAsGroup")
    spec["containers"] = [_own_group(restricted_security(c), group) for c in spec.get("containers") or []]
    if spec.get("initContainers"):
        spec["initContainers"] = [_own_group(restricted_security(c), group) for c in spec["initContainers"]]
    return spec


def _own_group(container: dict, pod_group: int | None) -> dict:
    """A container that names its own user, in a pod that names no group, runs with that number as group."""
    security = container["securityContext"]
    if pod_group is not None or "runAsUser" not in security or "runAsGroup" in security:
        return container
    return {**container, "securityContext": {**security, "runAsGroup": security["runAsUser"]}}


def merge_env(*layers: Iterable[dict]) -> list[dict]:
    """Env lists merged by name, later layers winning, order of first appearance kept."""
    merged: dict[str, dict] = {}
    for layer in layers:
        for item in layer:
            merged[item["name"]] = item
    return list(merged.values())


def env_list(values: Mapping[str, str]) -> list[dict]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _with_kafka_secret(spec: dict, container: dict, secret_name: str | None) -> tuple[dict, dict]:
    if not secret_name:
        return spec, container
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != KAFKA_CONFIG_VOLUME]
    volumes.append({"name": KAFKA_CONFIG_VOLUME, "secret": {"secretName": secret_name, "defaultMode": 0o440}})
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != KAFKA_CONFIG_VOLUME]
    mounts.append({"name": KAFKA_CONFIG_VOLUME, "mountPath": KAFKA_CONFIG_DIR, "readOnly": True})
    return {**spec, "volumes": volumes}, {**container, "volumeMounts": mounts}


def _kafka_secret_readable(spec: dict, worker: int) -> dict:
    """The Kafka Secret's files are mode 0440, owned by root and the pod's fsGroup: a worker that runs as a group
    of its own (not 0) reads them only if that group is the fsGroup. A real kubelet showed it (a PermissionError
    on the settings file); the worker's group becomes the fsGroup unless the pod names one."""
    security = spec["securityContext"]
    group = security.get("runAsGroup", spec["containers"][worker]["securityContext"].get("runAsGroup"))
    if group is None or "fsGroup" in security:
        return spec
    return {**spec, "securityContext": {**security, "fsGroup": group}}


def pick_container(containers: list[dict], name: str | None) -> int:
    """The index of the container that becomes the replay worker: the named one, else the first."""
    if not containers:
        raise ValueError("the pod template has no containers")
    if name is None:
        return 0
    for index, container in enumerate(containers):
        if container.get("name") == name:
            return index
    names = ", ".join(c.get("name", "?") for c in containers)
    raise ValueError(f"spec.consumer.container {name!r} is not in the pod template (it has: {names})")


def replay_deployment_manifest(
    *,
    owner: Owner,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    pod_template: dict,
    replicas: int,
    worker_env: Mapping[str, str],
    user_env: Iterable[dict] = (),
    kafka_secret: str | None = None,
    metrics_port: int = 9400,
    container_name: str | None = None,
    command: list[str] | None = None,
    keep_command: bool = False,
    pod_labels: Mapping[str, str] | None = None,
) -> dict:
    """The standby replay-consumer Deployment, a clone of `pod_template` running the replay worker (or, with
    `keep_command`, the service's own command, which starts its replay role from the `REPRISE_*` env).
    `pod_labels` (consumer.podLabels) go on the pods under Reprise's own `labels`, which the selector uses."""
    template = copy.deepcopy(pod_template)
    spec = dict(template.get("spec") or {})
    containers = [dict(c) for c in spec.get("containers") or []]
    index = pick_container(containers, container_name)
    worker = containers[index]
    metrics = {"name": "metrics", "containerPort": metrics_port, "protocol": "TCP"}
    # The port is stated in the env as well as in `ports`, so the two cannot disagree.
    worker_env = {**worker_env, "REPRISE_METRICS_PORT": str(metrics_port)}
    env = merge_env(worker.get("env") or [], env_list(worker_env), user_env)
    if keep_command:
        # The service's own ports stay (its code may serve them in the replay role too); a port of its own
        # named `metrics` or on the metrics port number would clash with the role's, so it gives way.
        own = [
            p
            for p in worker.get("ports") or []
            if p.get("name") != "metrics" and p.get("containerPort") != metrics_port
        ]
        worker["ports"] = own + [metrics]
        worker["env"] = [e for e in env if e["name"] not in DELIVERY_VARIABLES]
    else:
        worker["command"] = list(command or WORKER_COMMAND)
        worker["args"] = []
        worker["ports"] = [metrics]
        worker["env"] = env
    # The live service's probes check the live service's endpoints; the worker serves its own.
    for probe in ("readinessProbe", "startupProbe"):
        worker.pop(probe, None)
    # A clone that fails at start (a handler that cannot be imported) says why in its termination message,
    # which status reports (`pod_failures`): its log's tail unless it wrote a message of its own.
    worker["terminationMessagePolicy"] = "FallbackToLogsOnError"
    worker["livenessProbe"] = {
        "httpGet": {"path": "/healthz", "port": "metrics"},
        "periodSeconds": 10,
        "failureThreshold": 6,
    }
    spec, worker = _with_kafka_secret(spec, worker, kafka_secret)
    containers[index] = worker
    spec["containers"] = containers
    spec = restricted_pod(spec)
    if kafka_secret:
        spec = _kafka_secret_readable(spec, index)
    selector = {k: labels[k] for k in (LABEL_COMPONENT, LABEL_KIND, LABEL_REPLAY) if k in labels}
    metadata = dict(template.get("metadata") or {})
    # The API refuses podLabels that name Reprise's keys; applied first anyway, so the selector always holds.
    metadata["labels"] = {**(pod_labels or {}), **labels}
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if not k.startswith("kubectl.kubernetes.io/")
    }
    metadata["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner.reference()],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {"metadata": metadata, "spec": spec},
        },
    }


def worker_job_manifest(
    *,
    owner: Owner,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    image: str,
    args: list[str],
    worker_env: Mapping[str, str],
    kafka_secret: str | None = None,
    backoff_limit: int = 3,
) -> dict:
    """A run-to-completion Job of Reprise's own worker image (Backfill's `topic` source)."""
    container = {
        "name": "worker",
        "image": image,
        "command": list(WORKER_COMMAND),
        "args": list(args),
        "env": env_list(worker_env),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
    }
    spec: dict = {
        "restartPolicy": "Never",
        "containers": [container],
        "securityContext": {"runAsUser": IMAGE_USER, "runAsGroup": IMAGE_USER, "fsGroup": IMAGE_USER},
    }
    spec, container = _with_kafka_secret(spec, container, kafka_secret)
    spec["containers"] = [container]
    return job_manifest(
        owner=owner, name=name, namespace=namespace, labels=labels, pod_spec=spec, backoff_limit=backoff_limit
    )


def job_manifest(
    *,
    owner: Owner,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    pod_spec: dict,
    backoff_limit: int = 3,
    pod_metadata: dict | None = None,
) -> dict:
    metadata = dict(pod_metadata or {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    spec = restricted_pod({**pod_spec, "restartPolicy": pod_spec.get("restartPolicy", "Never")})
    if spec["restartPolicy"] == "Always":
        spec["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner.reference()],
        },
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {"metadata": metadata, "spec": spec},
        },
    }
