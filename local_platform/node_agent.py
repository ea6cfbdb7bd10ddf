"""The node agent: a stand-in for a kubelet and a container runtime, on machines that have neither.

It is NOT a kubelet. There is no container runtime, no image, no isolation, no cgroup, no probe, no
`kubectl logs`/`exec`/`port-forward`, no Service networking. It exists so that the real control plane
(kube-apiserver + kube-controller-manager + kube-scheduler) has a Ready node whose pods make progress:

- It registers one Node (Ready, no taints, allocatable large enough for hundreds of pods) and keeps it
  alive with a Lease in `kube-node-lease` plus periodic status heartbeats, so the node lifecycle
  controller never marks it unreachable and evicts its pods.
- It watches the Pods bound to that node (list + watch, relisting on 410 Gone and on any broken stream).
- Containers whose image matches the project's own image (`AgentSettings.run_image_pattern`, by default
  any image whose reference contains `reprise`), and images published to the local image store
  (`local_images`: a service built on this machine, whatever its name), are RUN as local processes: `command` + `args`, where a
  `python`/`python3` argv[0] becomes the agent's own `sys.executable` and the console scripts of
  pyproject become `python -m <module>`. Each process gets `PYTHONPATH=<repo>:<repo>/operator`, the
  container's `env`/`envFrom` (values, Secret and ConfigMap keys, the downward API fields) and its
  `volumes` (secret, configMap, emptyDir, downwardAPI, projected, hostPath, persistentVolumeClaim)
  materialised as files under the agent's work directory.
- The pods of Spark (label `spark-role`: the driver pod spark-submit creates for the real Spark operator's
  controller), whatever their image, are RUN too: a container with no `command` runs the Spark image's
  entrypoint as this machine has it, `python -m local_platform.spark_image` (`SPARK_ENTRYPOINT`), which runs
  the driver as a local spark-submit from the properties file of its ConfigMap (see that module).
- Every other container is only reported Running (like kwok): nothing runs.

Paths. A process cannot see container paths, so each volumeMount's `mountPath` is replaced by the local
folder that holds the volume, wherever it appears as a path in env values, `command`, `args` and
`workingDir` (`/etc/reprise/config.yaml` -> `<workdir>/pods/<pod>/volumes/config/config.yaml`). Code that
builds paths itself can read the same mapping from the `REPRISE_PATH_PREFIX_MAP` environment variable:
a JSON object {mountPath: local folder}. An image built on this machine (a JVM example service, see
`local_platform/local_images.py`) brings its own entries: the container paths its files would have in the
image (`/app`), mapped to the cache folder the build wrote them to, so `java -cp /app/lib/* ...` runs as is.

API access from inside a pod. When the pod mounts a service account token (the `kube-api-access-*`
volume the API server adds to every pod), the agent asks the TokenRequest API for a token bound to the
pod and writes a kubeconfig that uses it: the process gets `KUBECONFIG=<that file>` and no
`KUBERNETES_SERVICE_HOST` (the service IP is not routable here), so clients that try in-cluster config
first (kopf, `kubernetes.config.load_config`) fall back to the kubeconfig and act as the pod's
ServiceAccount, with its RBAC.

Ports. Pods share the host's network here (there are no pod IPs), so two pods that declare the same
`containerPort` would collide, within one platform or between two platforms on one machine. A declared
containerPort is used as it is while it is free on the host; when another process holds it, the container
gets a free port instead, and an env value that is exactly the declared port number
(`REPRISE_METRICS_PORT=9400`) is given that port. `REPRISE_PORT_MAP` holds {containerPort: host port}. A
port is claimed machine-wide when it is chosen (`processes.PortClaims`) and kept until the pod is gone, so
pods that start together never get the same port before either listens on it.

Logs go to `<workdir>/pods/<namespace>_<pod>_<uid8>/logs/<container>.log` (the previous run of a
restarted container is kept as `<container>.previous.log`); `NodeAgent.container_log()` finds them.
The container status carries `containerID: reprise-agent://<pid>`.

Lifecycle as a kubelet does it: restartPolicy Always restarts an exited process after an exponential
backoff (CrashLoopBackOff, never a tight loop); OnFailure/Never end in phase Succeeded/Failed, so Jobs
complete. When a pod gets a deletionTimestamp the process group gets SIGTERM, then SIGKILL after the
grace period, and the agent deletes the pod with grace 0 (the final delete is the kubelet's job).
`stop()` kills every process it started, by PID.

The decisions (phase, restart, backoff, env, volumes, path mapping, status) are pure functions at the
top of this module, unit-tested without an API server; the `NodeAgent` class below does the I/O.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from .local_images import image_paths
from .spark_image import is_spark_pod
from .processes import PortClaims, port_is_bindable

log = logging.getLogger("reprise.node_agent")

REPO_ROOT = Path(__file__).resolve().parent.parent

# What the image's entrypoint would run when a container names no `command` (the image is built from
# this repository; keep in step with its Dockerfile ENTRYPOINT).
DEFAULT_ENTRYPOINT: tuple[str, ...] = ("python", "-m", "reprise_operator")
# What the Spark image's entrypoint (/opt/entrypoint.sh) does, for the pods of Spark (`spark_image`).
SPARK_ENTRYPOINT: tuple[str, ...] = ("python", "-m", "local_platform.spark_image")

# The console scripts of pyproject.toml: inside the image they are on PATH, here they are modules.
CONSOLE_SCRIPTS: Mapping[str, str] = {
    "reprise-operator": "reprise_operator",
    "reprise-replay-worker": "replay_worker",
}

# Environment a process inherits from the agent; everything else comes from the pod, as in a container.
PASSTHROUGH_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "JAVA_HOME",
    "REPRISE_CACHE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
)

# What a field path like metadata.labels['app'] looks like.
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


@dataclass(frozen=True)
class AgentSettings:
    """How the agent behaves; the defaults suit the test suite and `make run`."""

    node_name: str = "reprise-node"
    # Containers whose image reference matches this regular expression (re.search) run as processes.
    run_image_pattern: str = "reprise"
    repo_root: Path = REPO_ROOT
    python: str = sys.executable
    default_entrypoint: tuple[str, ...] = DEFAULT_ENTRYPOINT
    # Restart backoff: base * 2**n seconds, capped; reset after a run this long (the kubelet uses
    # 10s/300s/600s; shorter here so a test that makes a container crash does not wait minutes).
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    backoff_reset_after: float = 600.0
    lease_duration_seconds: int = 40
    lease_renew_interval: float = 10.0
    status_interval: float = 60.0
    # Resources the node reports: large, so the scheduler never refuses a pod for capacity.
    allocatable: Mapping[str, str] = field(
        default_factory=lambda: {"cpu": "1000", "memory": "4Ti", "pods": "500", "ephemeral-storage": "10Ti"}
    )
    host_ip: str = "127.0.0.1"
    kubelet_version: str = "v1.35.4"
    # Extra {container path: local path} entries, e.g. for files the image itself holds.
    extra_path_map: Mapping[str, str] = field(default_factory=dict)
    # Where images built on this machine are published (local_images.py); None: the cache's store.
    image_store: Path | None = None


# ---------------------------------------------------------------------------------------------------
# Pure decisions
# ---------------------------------------------------------------------------------------------------


class ConfigError(Exception):
    """A container cannot be configured yet (a missing Secret/ConfigMap key): CreateContainerConfigError."""


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def image_runs_locally(image: str, pattern: str, published: bool = False) -> bool:
    """Whether a container of `image` is run as a local process (else it is only reported Running): the project's
    own image, or one `published` to the local image store (a service built on this machine, whatever its name)."""
    return bool(image) and (published or re.search(pattern, image) is not None)


def local_argv(
    command: Sequence[str] | None,
    args: Sequence[str] | None,
    python: str,
    default_entrypoint: Sequence[str] = DEFAULT_ENTRYPOINT,
    console_scripts: Mapping[str, str] = CONSOLE_SCRIPTS,
) -> list[str]:
    """The argv a container's command and args become on this machine.

    Like a container runtime, `args` alone are appended to the image entrypoint. A Python interpreter
    in argv[0] (`python`, `python3`, `/usr/local/bin/python3.11`) becomes `python`, the agent's own
    interpreter, and a console script of this project becomes `python -m <module>`.
    """
    argv = list(command) if command else list(default_entrypoint)
    argv += list(args or [])
    if not argv:
        return argv
    head = os.path.basename(argv[0])
    if re.fullmatch(r"python(\d+(\.\d+)?)?", head):
        argv[0] = python
    elif head in console_scripts:
        argv[0:1] = [python, "-m", console_scripts[head]]
    return argv


def should_restart(restart_policy: str, exit_code: int) -> bool:
    """Whether a container that exited with `exit_code` is started again under `restart_policy`."""
    if restart_policy == "Never":
        return False
    if restart_policy == "OnFailure":
        return exit_code != 0
    return True  # Always, and the API default


def restart_delay(backoff_count: int, base: float, cap: float) -> float:
    """Seconds to wait before the next start after `backoff_count` earlier restarts (exponential, capped)."""
    return min(cap, base * (2 ** max(0, min(backoff_count, 30))))


@dataclass
class ContainerView:
    """What the agent knows of one container at one moment (a pure value; the status is built from it)."""

    name: str
    image: str = ""
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    exit_code: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = None
    container_id: str = ""
    will_restart: bool = False


def pod_phase(restart_policy: str, init_views: Sequence[ContainerView], views: Sequence[ContainerView]) -> str:
    """The pod phase from its containers, following the kubelet's rules (getPhase).

    A failed init container that will not be retried fails the pod; unfinished init containers keep it
    Pending; a container that was never started keeps it Pending; otherwise Running while anything runs
    or will restart, and Succeeded/Failed once every container has exited for good.
    """
    for v in init_views:
        if v.state == "terminated" and v.exit_code not in (0, None) and not v.will_restart:
            return "Failed"
    if any(not (v.state == "terminated" and v.exit_code == 0) for v in init_views):
        return "Pending"
    waiting = running = stopped = succeeded = 0
    for v in views:
        if v.state == "running":
            running += 1
        elif v.state == "terminated":
            stopped += 1
            if v.exit_code == 0:
                succeeded += 1
        elif v.last_terminated is not None:
            stopped += 1  # waiting to restart after a run counts as stopped, as in the kubelet
            if v.last_terminated.get("exitCode") == 0:
                succeeded += 1
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if restart_policy == "Always" or restart_policy == "":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    if restart_policy == "Never":
        return "Failed"
    return "Running"  # OnFailure: the failed ones are restarted


TERMINATED_REASONS = ("Completed", "Error", "StartError")


def container_status(view: ContainerView, is_init: bool = False) -> dict[str, Any]:
    """The containerStatuses entry of one container."""
    if view.state == "running":
        state: dict[str, Any] = {"running": {"startedAt": view.started_at}}
    elif view.state == "terminated":
        state = {
            "terminated": {
                "exitCode": view.exit_code,
                "reason": view.reason
                if view.reason in TERMINATED_REASONS
                else ("Completed" if view.exit_code == 0 else "Error"),
                "startedAt": view.started_at,
                "finishedAt": view.finished_at,
                **({"containerID": view.container_id} if view.container_id else {}),
                **({"message": view.message} if view.message else {}),
            }
        }
    else:
        state = {"waiting": {"reason": view.reason, **({"message": view.message} if view.message else {})}}
    status: dict[str, Any] = {
        "name": view.name,
        "image": view.image,
        "imageID": view.image,
        "ready": view.state == "running" if not is_init else (view.state == "terminated" and view.exit_code == 0),
        "started": view.state == "running",
        "restartCount": view.restart_count,
        "state": state,
        "lastState": {"terminated": view.last_terminated} if view.last_terminated else {},
    }
    if view.container_id:
        status["containerID"] = view.container_id
    return status


MANAGED_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


def pod_status(
    pod: Mapping[str, Any],
    init_views: Sequence[ContainerView],
    views: Sequence[ContainerView],
    phase: str,
    host_ip: str,
    start_time: str,
    now: str,
) -> dict[str, Any]:
    """The whole `status` the agent reports for a pod (sent as a JSON merge patch, so it is complete).

    Conditions the agent does not own (PodScheduled, DisruptionTarget, ...) are carried over, and a
    condition keeps its lastTransitionTime while its status does not change.
    """
    old_status = pod.get("status") or {}
    old_conditions = {c.get("type"): c for c in old_status.get("conditions") or []}
    initialized = all(v.state == "terminated" and v.exit_code == 0 for v in init_views)
    all_running = bool(views) and all(v.state == "running" for v in views)
    terminal = phase in ("Succeeded", "Failed")

    def condition(ctype: str, ok: bool, reason: str = "") -> dict[str, Any]:
        status = "True" if ok else "False"
        old = old_conditions.get(ctype)
        since = old.get("lastTransitionTime") if old and old.get("status") == status else now
        cond: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
        if reason and not ok:
            cond["reason"] = reason
        return cond

    not_ready = "PodCompleted" if terminal else "ContainersNotReady"
    conditions = [c for t, c in old_conditions.items() if t not in MANAGED_CONDITIONS]
    conditions += [
        condition("PodReadyToStartContainers", not terminal),
        condition("Initialized", initialized, "PodCompleted" if terminal else "ContainersNotInitialized"),
        condition("ContainersReady", all_running and not terminal, not_ready),
        condition("Ready", all_running and not terminal, not_ready),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": host_ip,
        "podIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "containerStatuses": [container_status(v) for v in views],
    }
    if init_views:
        status["initContainerStatuses"] = [container_status(v, is_init=True) for v in init_views]
    return status


def _decode(data: Mapping[str, str] | None) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (data or {}).items()}


def secret_data(secret: Mapping[str, Any] | None) -> dict[str, bytes] | None:
    """A Secret's keys and decoded values (`data` is base64, `stringData` never comes back from the API)."""
    if secret is None:
        return None
    return _decode(secret.get("data"))


def configmap_data(configmap: Mapping[str, Any] | None) -> dict[str, bytes] | None:
    if configmap is None:
        return None
    out = {k: v.encode() for k, v in (configmap.get("data") or {}).items()}
    out.update(_decode(configmap.get("binaryData")))
    return out


Lookup = Callable[[str], "dict[str, bytes] | None"]  # object name -> its keys, or None when missing


def field_value(pod: Mapping[str, Any], field_path: str, pod_ip: str, host_ip: str) -> str:
    """The value of a downward API fieldRef."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if field_path in simple:
        return simple[field_path]
    sub = _SUBSCRIPT.match(field_path)
    if sub:
        return (meta.get(sub.group(1)) or {}).get(sub.group(2), "")
    if field_path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(field_path.split(".")[1]) or {}
        return "\n".join(f"{k}={json.dumps(v)}" for k, v in sorted(items.items()))
    raise ConfigError(f"unsupported fieldRef {field_path!r}")


def resource_value(container: Mapping[str, Any], resource: str, allocatable: Mapping[str, str]) -> str:
    """A resourceFieldRef: the container's limit, else its request, else the node's allocatable."""
    res = container.get("resources") or {}
    kind, _, name = resource.partition(".")
    value = (res.get(kind) or {}).get(name) or (res.get("requests") or {}).get(name)
    return str(value or allocatable.get(name, "0"))


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand_vars(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: a defined VAR is replaced, `$$` is a literal `$`, others stay."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR_REF.sub(repl, text)


def resolve_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    secrets: Lookup,
    configmaps: Lookup,
    pod_ip: str,
    host_ip: str,
    allocatable: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A container's environment from `envFrom` then `env` (later wins), as the kubelet builds it.

    Raises ConfigError for a missing Secret/ConfigMap or key that is not `optional`.
    """
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        for kind, lookup in (("secretRef", secrets), ("configMapRef", configmaps)):
            ref = source.get(kind)
            if ref is None:
                continue
            data = lookup(ref.get("name", ""))
            if data is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f"{kind[:-3]} {ref.get('name')!r} not found")
            for key, value in data.items():
                env[prefix + key] = value.decode(errors="replace")
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" not in item or item.get("valueFrom") is None:
            env[name] = expand_vars(item.get("value") or "", env)
            continue
        source = item["valueFrom"]
        for kind, lookup in (("secretKeyRef", secrets), ("configMapKeyRef", configmaps)):
            ref = source.get(kind)
            if ref is None:
                continue
            data = lookup(ref.get("name", ""))
            if data is None or ref.get("key") not in data:
                if ref.get("optional"):
                    break
                what = "secret" if kind == "secretKeyRef" else "configmap"
                missing = (
                    f"{what} {ref.get('name')!r}"
                    if data is None
                    else f"key {ref.get('key')!r} in {what} {ref.get('name')!r}"
                )
                raise ConfigError(f"{missing} not found (env {name})")
            env[name] = data[ref["key"]].decode(errors="replace")
            break
        else:
            if source.get("fieldRef"):
                env[name] = field_value(pod, source["fieldRef"]["fieldPath"], pod_ip, host_ip)
            elif source.get("resourceFieldRef"):
                ref = source["resourceFieldRef"]
                env[name] = resource_value(container, ref.get("resource", ""), allocatable or {})
    return env


def volume_files(
    pod: Mapping[str, Any],
    volume: Mapping[str, Any],
    secrets: Lookup,
    configmaps: Lookup,
    token: Callable[[str, int], str],
    pod_ip: str,
    host_ip: str,
) -> dict[str, tuple[bytes, int]] | None:
    """The files of a volume that is made of API data: {relative path: (content, mode)}.

    None for volumes that are folders instead (emptyDir, hostPath, persistentVolumeClaim, and any kind
    the agent does not know, which become empty folders). `token(audience, seconds)` asks for a service
    account token bound to the pod.
    """
    default_mode = 0o644

    def keyed(kind: str, source: Mapping[str, Any], lookup: Lookup, name_key: str) -> dict[str, tuple[bytes, int]]:
        name = source.get(name_key, "")
        data = lookup(name)
        mode = source.get("defaultMode", default_mode)
        if data is None:
            if source.get("optional"):
                return {}
            raise ConfigError(f"{kind} {name!r} not found (volume {volume.get('name')})")
        items = source.get("items")
        if not items:
            return {k: (v, mode) for k, v in data.items()}
        out = {}
        for it in items:
            if it["key"] not in data:
                if source.get("optional"):
                    continue
                raise ConfigError(f"key {it['key']!r} not in {kind} {name!r} (volume {volume.get('name')})")
            out[it.get("path") or it["key"]] = (data[it["key"]], it.get("mode", mode))
        return out

    def downward(source: Mapping[str, Any], mode_default: int) -> dict[str, tuple[bytes, int]]:
        out = {}
        for it in source.get("items") or []:
            if it.get("fieldRef"):
                value = field_value(pod, it["fieldRef"]["fieldPath"], pod_ip, host_ip)
            else:
                ref = it.get("resourceFieldRef") or {}
                containers = {c["name"]: c for c in (pod.get("spec") or {}).get("containers") or []}
                value = resource_value(containers.get(ref.get("containerName", ""), {}), ref.get("resource", ""), {})
            out[it["path"]] = (value.encode(), it.get("mode", mode_default))
        return out

    if "secret" in volume and volume["secret"] is not None:
        return keyed("secret", volume["secret"], secrets, "secretName")
    if "configMap" in volume and volume["configMap"] is not None:
        return keyed("configmap", volume["configMap"], configmaps, "name")
    if "downwardAPI" in volume and volume["downwardAPI"] is not None:
        return downward(volume["downwardAPI"], volume["downwardAPI"].get("defaultMode", default_mode))
    if "projected" in volume and volume["projected"] is not None:
        projected = volume["projected"]
        mode = projected.get("defaultMode", default_mode)
        files: dict[str, tuple[bytes, int]] = {}
        for src in projected.get("sources") or []:
            if src.get("secret"):
                files.update(keyed("secret", {"defaultMode": mode, **src["secret"]}, secrets, "name"))
            elif src.get("configMap"):
                files.update(keyed("configmap", {"defaultMode": mode, **src["configMap"]}, configmaps, "name"))
            elif src.get("downwardAPI"):
                files.update(downward(src["downwardAPI"], mode))
            elif src.get("serviceAccountToken"):
                sat = src["serviceAccountToken"]
                files[sat.get("path", "token")] = (
                    token(sat.get("audience") or "", int(sat.get("expirationSeconds") or 3607)).encode(),
                    mode,
                )
        return files
    return None


def mount_map(container: Mapping[str, Any], volume_dirs: Mapping[str, str]) -> dict[str, str]:
    """{mountPath: local folder} for a container's volumeMounts (subPath resolved inside the volume)."""
    out: dict[str, str] = {}
    for m in container.get("volumeMounts") or []:
        local = volume_dirs.get(m.get("name", ""))
        if local is None:
            continue
        sub = m.get("subPath") or ""
        out[m["mountPath"].rstrip("/") or "/"] = os.path.join(local, sub) if sub else local
    return out


def map_paths(text: str, mapping: Mapping[str, str]) -> str:
    """Replace every container path under a mount point in `text` with its local path.

    A mount path is replaced only where it is a whole path or a path prefix (followed by `/` or the end
    of a token), so `/data` does not touch `/database` and `--config=/etc/app/x` becomes
    `--config=<local>/x`. Longer mount paths win over shorter ones.
    """
    if not mapping or not text:
        return text
    mounts = sorted((m for m in mapping if m != "/"), key=len, reverse=True)
    if not mounts:
        return text
    pattern = re.compile(r"(?<![\w.\-/])(" + "|".join(re.escape(m) for m in mounts) + r")(?=$|/|[\s\"',;:=)\]}])")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


#: Where a container writes its termination message unless it names another file (as in Kubernetes).
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
#: A kubelet keeps at most this much of the file, and of the log's tail with FallbackToLogsOnError.
TERMINATION_FILE_LIMIT = 4096
TERMINATION_LOG_LIMIT = 2048
TERMINATION_LOG_LINES = 80


def termination_message(policy: str | None, exit_code: int, written: bytes, log_tail: bytes) -> str:
    """A terminated container's message, the kubelet's way: what it wrote to its terminationMessagePath;
    with policy FallbackToLogsOnError and a failure that wrote nothing, the tail of its log."""
    text = written[:TERMINATION_FILE_LIMIT].decode("utf-8", "replace").strip()
    if text or policy != "FallbackToLogsOnError" or exit_code == 0:
        return text
    lines = log_tail.splitlines()[-TERMINATION_LOG_LINES:]
    return b"\n".join(lines)[-TERMINATION_LOG_LIMIT:].decode("utf-8", "replace").strip()


def declared_ports(container: Mapping[str, Any]) -> list[int]:
    return sorted({int(p["containerPort"]) for p in container.get("ports") or [] if p.get("containerPort")})


#: The file_sd file the agent keeps current (in its workdir) for the platform's Prometheus: every running pod
#: container with a port named `metrics`, at the host port it really got (see "Ports"). Pods have no IPs here,
#: so Kubernetes discovery would find nothing to scrape; the agent is the one that knows where each pod listens.
SCRAPE_TARGETS_FILE = "scrape-targets.json"


def scrape_targets(containers: Iterable[tuple[str, str, Mapping[str, Any], Mapping[int, int]]]) -> list[dict[str, Any]]:
    """Prometheus file_sd entries for (namespace, pod, container spec, {containerPort: host port}) of running
    containers: one per port named `metrics`, labelled as the chart's PodMonitor would label it."""
    entries = []
    for namespace, pod, spec, host_ports in containers:
        for port in spec.get("ports") or []:
            host = host_ports.get(int(port.get("containerPort") or 0))
            if port.get("name") == "metrics" and host:
                labels = {"namespace": namespace, "pod": pod, "container": str(spec.get("name") or "")}
                entries.append({"targets": [f"127.0.0.1:{host}"], "labels": labels})
    return sorted(entries, key=lambda e: (e["labels"]["namespace"], e["labels"]["pod"], e["labels"]["container"]))


def map_ports(env: Mapping[str, str], ports: Mapping[int, int]) -> dict[str, str]:
    """`env` with every value that is exactly a declared container port replaced by its host port."""
    by_text = {str(container): str(host) for container, host in ports.items()}
    return {name: by_text.get(value.strip(), value) for name, value in env.items()}


def pod_kubeconfig(server: str, ca_file: str, token_file: str, namespace: str) -> str:
    """A kubeconfig that acts as a pod's ServiceAccount (its projected token, read from a file)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": ca_file}}],
            "users": [{"name": "pod", "user": {"tokenFile": token_file}}],
            "contexts": [{"name": "pod", "context": {"cluster": "local", "user": "pod", "namespace": namespace}}],
            "current-context": "pod",
        },
        indent=2,
    )


def exit_code_of(returncode: int) -> int:
    """A Popen returncode as a container exit code: killed by signal N is 128+N, as in a shell."""
    return 128 - returncode if returncode < 0 else returncode


# ---------------------------------------------------------------------------------------------------
# The running side
# ---------------------------------------------------------------------------------------------------


@dataclass
class _Container:
    """One container of a pod: its spec, its process when it has one, its history."""

    spec: dict[str, Any]
    runs_locally: bool
    view: ContainerView
    popen: subprocess.Popen[bytes] | None = None
    started_mono: float = 0.0
    next_start: float = 0.0
    backoff_count: int = 0
    restart_pending: bool = False  # it exited and will start again: the next start counts as a restart
    log_path: Path | None = None
    log_file: Any = None
    host_ports: dict[int, int] = field(default_factory=dict)  # {containerPort: host port}, see "Ports"

    @property
    def name(self) -> str:
        return self.view.name


@dataclass
class _Pod:
    uid: str
    namespace: str
    name: str
    obj: dict[str, Any]
    directory: Path
    init: list[_Container]
    main: list[_Container]
    start_time: str
    prepared: bool = False
    prepare_error: str = ""
    next_prepare: float = 0.0
    volume_dirs: dict[str, str] = field(default_factory=dict)
    path_map: dict[str, str] = field(default_factory=dict)
    kubeconfig: str | None = None
    phase: str = "Pending"
    terminating_since: float | None = None
    kill_at: float | None = None
    deleted_in_api: bool = False
    final_delete_sent: bool = False
    reported: dict[str, Any] | None = None
    next_report: float = 0.0


def preload_client() -> threading.Thread:
    """Import the kubernetes client's API classes in the background (seconds of CPU: its models are
    pydantic classes built at import), e.g. while the control plane starts; `start()` then finds them."""

    def load() -> None:
        import kubernetes.client.api.coordination_v1_api  # noqa: F401
        import kubernetes.client.api.core_v1_api  # noqa: F401
        import kubernetes.config  # noqa: F401

    thread = threading.Thread(target=load, name="kubernetes-client-import", daemon=True)
    thread.start()
    return thread


def _iter_lines(response: Any) -> Iterator[bytes]:
    """The lines of a streamed HTTP response (one watch event per line)."""
    buffer = b""
    for chunk in response.stream(64 * 1024, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


class NodeAgent:
    """One node of the local cluster: registers it, keeps it alive, and runs the pods bound to it.

    `NodeAgent(kubeconfig, workdir).start()` returns once the Node is registered and Ready and the pod
    watch has listed; `stop()` ends the threads and kills every process the agent started, by PID.
    """

    def __init__(self, kubeconfig: Path | str, workdir: Path | str, settings: AgentSettings | None = None) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.workdir = Path(workdir)
        self.settings = settings or AgentSettings()
        self.node_name = self.settings.node_name
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._pods: dict[str, _Pod] = {}
        self._pods_lock = threading.Lock()  # readers from other threads: pod_dir(), pids()
        self._threads: list[threading.Thread] = []
        self._watch_response: Any = None
        self._listed = threading.Event()
        self._server = ""
        self._ca_file = ""
        self._boot_id = str(uuid.uuid4())
        self._pid_file = self.workdir / "processes.json"
        self._ports = PortClaims()  # the host ports given to containers, claimed until their pod is gone

    # -- public -------------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        from kubernetes import config

        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "pods").mkdir(exist_ok=True)
        self._write_pid_file()  # an empty target list, so Prometheus finds its file_sd file from the start
        self._server, self._ca_file = self._cluster_of_kubeconfig()
        self._api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self._heartbeat_api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self._watch_api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self._register_node()
        self._renew_lease()
        for target, name in (
            (self._heartbeat_loop, "heartbeat"),
            (self._watch_loop, "pod-watch"),
            (self._pod_loop, "pods"),
        ):
            t = threading.Thread(target=target, name=f"node-agent-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        if not self._listed.wait(timeout):
            self.stop()
            from .errors import PlatformError

            raise PlatformError(
                f"node agent could not list pods within {timeout:.0f}s; is the API server at {self._server} up?"
            )

    def stop(self, timeout: float = 10.0) -> None:
        """End the threads, then SIGTERM every process group, and SIGKILL what is left after `timeout`."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + 15
        for t in self._threads:
            while t.is_alive() and time.monotonic() < deadline:
                # A watch blocks in a socket read: closing its socket is what ends it.
                self._shutdown_watch()
                t.join(timeout=0.1)
        self._threads.clear()
        with self._pods_lock:
            containers = [c for p in self._pods.values() for c in p.init + p.main if c.popen and c.popen.poll() is None]
        for c in containers:
            _signal_group(c.popen.pid, signal.SIGTERM)  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout
        for c in containers:
            try:
                c.popen.wait(timeout=max(0.0, deadline - time.monotonic()))  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                pass
            _signal_group(c.popen.pid, signal.SIGKILL)  # type: ignore[union-attr]
            try:
                c.popen.wait(timeout=5)  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                pass
            _close(c)
        self._ports.release_all()
        self._write_pid_file()
        for api in (
            getattr(self, "_api", None),
            getattr(self, "_heartbeat_api", None),
            getattr(self, "_watch_api", None),
        ):
            if api is not None:
                api.close()

    def _shutdown_watch(self) -> None:
        resp = self._watch_response
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:  # already closed
                pass

    def pod_dir(self, namespace: str, name: str) -> Path | None:
        """The local folder of a pod the agent knows (volumes, logs, kubeconfig), newest first."""
        with self._pods_lock:
            for p in self._pods.values():
                if p.namespace == namespace and p.name == name:
                    return p.directory
        matches = sorted(
            (self.workdir / "pods").glob(f"{namespace}_{name}_*"), key=lambda d: d.stat().st_mtime, reverse=True
        )
        return matches[0] if matches else None

    def container_log(self, namespace: str, name: str, container: str) -> Path | None:
        d = self.pod_dir(namespace, name)
        return d / "logs" / f"{container}.log" if d else None

    def container_pid(self, namespace: str, name: str, container: str) -> int | None:
        """The PID of a container's process while it runs (None when it does not, or the pod is gone)."""
        with self._pods_lock:
            for p in self._pods.values():
                if (p.namespace, p.name) != (namespace, name):
                    continue
                for c in p.init + p.main:
                    if c.name == container and c.popen is not None and c.popen.poll() is None:
                        return c.popen.pid
        return None

    def pids(self) -> list[int]:
        """PIDs of the processes the agent runs right now."""
        with self._pods_lock:
            return [
                c.popen.pid
                for p in self._pods.values()
                for c in p.init + p.main
                if c.popen is not None and c.popen.poll() is None
            ]

    # -- node -------------------------------------------------------------------------------------

    def _cluster_of_kubeconfig(self) -> tuple[str, str]:
        import yaml

        cfg = yaml.safe_load(self.kubeconfig.read_text())
        current = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == current)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        ca = cluster.get("certificate-authority", "")
        if not ca and cluster.get("certificate-authority-data"):
            path = self.workdir / "ca.crt"
            path.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
            ca = str(path)
        elif ca and not os.path.isabs(ca):
            ca = str((self.kubeconfig.parent / ca).resolve())
        return cluster["server"], ca

    def _node_status(self) -> dict[str, Any]:
        now = rfc3339(time.time())
        s = self.settings

        def cond(ctype: str, status: str, reason: str, message: str) -> dict[str, str]:
            return {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": self._started_at,
            }

        return {
            "capacity": dict(s.allocatable),
            "allocatable": dict(s.allocatable),
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "node agent: no memory pressure"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "node agent: no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "node agent: no PID pressure"),
                cond("Ready", "True", "KubeletReady", "reprise node agent is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": s.host_ip},
                {"type": "Hostname", "address": self.node_name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "machineID": self._boot_id.replace("-", ""),
                "systemUUID": self._boot_id,
                "bootID": self._boot_id,
                "kernelVersion": os.uname().release,
                "osImage": "reprise node agent (local processes)",
                "containerRuntimeVersion": "reprise-agent://0.1",
                "kubeletVersion": s.kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    def _register_node(self) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        core = client.CoreV1Api(self._api)
        self._started_at = rfc3339(time.time())
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {
                    "kubernetes.io/hostname": self.node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "reprise.dev/node-agent": "true",
                },
            },
            "spec": {},
        }
        try:
            core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            # A node left by an earlier agent: clear taints the node lifecycle controller put on it.
            core.patch_node(self.node_name, {"spec": {"taints": None, "unschedulable": False}})
        core.patch_node_status(self.node_name, {"status": self._node_status()})
        node = core.read_node(self.node_name, _preload_content=False)
        self._node_uid = json.loads(node.data)["metadata"]["uid"]

    def _renew_lease(self) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        coord = client.CoordinationV1Api(self._heartbeat_api if self._threads else self._api)
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {
            "holderIdentity": self.node_name,
            "leaseDurationSeconds": self.settings.lease_duration_seconds,
            "renewTime": now,
        }
        try:
            coord.patch_namespaced_lease(self.node_name, "kube-node-lease", {"spec": spec})
        except ApiException as exc:
            if exc.status != 404:
                raise
            coord.create_namespaced_lease(
                "kube-node-lease",
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": self.node_name,
                        "ownerReferences": [
                            {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": self._node_uid}
                        ],
                    },
                    "spec": spec,
                },
            )

    def _heartbeat_loop(self) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self._heartbeat_api)
        next_status = time.monotonic() + self.settings.status_interval
        while not self._stop.wait(self.settings.lease_renew_interval):
            try:
                self._renew_lease()
                if time.monotonic() >= next_status:
                    core.patch_node_status(self.node_name, {"status": self._node_status()})
                    next_status = time.monotonic() + self.settings.status_interval
            except Exception as exc:  # the API server may be restarting; the next beat retries
                log.warning("node heartbeat failed: %s", exc)

    # -- pod watch ----------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        """List, then watch from the list's resourceVersion; relist on 410 Gone or any broken stream."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        core = client.CoreV1Api(self._watch_api)
        selector = f"spec.nodeName={self.node_name}"
        rv: str | None = None
        failures = 0
        while not self._stop.is_set():
            try:
                if rv is None:
                    resp = core.list_pod_for_all_namespaces(
                        field_selector=selector, _preload_content=False, _request_timeout=30
                    )
                    listed = json.loads(resp.data)
                    rv = listed["metadata"]["resourceVersion"]
                    self._events.put(("sync", listed.get("items") or []))
                    self._wake.set()
                    self._listed.set()
                resp = core.list_pod_for_all_namespaces(
                    field_selector=selector,
                    watch=True,
                    resource_version=rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=120,
                    _preload_content=False,
                    _request_timeout=(10, 150),
                )
                self._watch_response = resp
                if self._stop.is_set():  # stop() may have looked for the response before it existed
                    self._shutdown_watch()
                try:
                    for line in _iter_lines(resp):
                        event = json.loads(line)
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                rv = None  # too old: relist
                            else:
                                raise RuntimeError(f"watch error: {obj.get('message')}")
                            break
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if kind == "BOOKMARK":
                            continue
                        self._events.put(("deleted" if kind == "DELETED" else "pod", obj))
                        self._wake.set()
                finally:
                    self._watch_response = None
                    resp.release_conn()
                failures = 0
            except ApiException as exc:
                if self._stop.is_set():
                    return
                rv = None
                failures += 1
                log.warning("pod watch failed (%s); relisting", exc.status)
                self._stop.wait(min(5.0, 0.2 * 2**failures))
            except Exception as exc:
                if self._stop.is_set():
                    return
                rv = None
                failures += 1
                log.warning("pod watch broke (%s); relisting", exc)
                self._stop.wait(min(5.0, 0.2 * 2**failures))

    # -- pod loop -----------------------------------------------------------------------------------

    def _pod_loop(self) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(self._api)
        while not self._stop.is_set():
            self._wake.wait(0.25)
            self._wake.clear()
            if self._stop.is_set():
                return
            self._drain_events()
            with self._pods_lock:
                pods = list(self._pods.values())
            for pod in pods:
                try:
                    self._step(pod)
                except Exception:
                    log.exception("node agent: pod %s/%s", pod.namespace, pod.name)

    def _drain_events(self) -> None:
        while True:
            try:
                kind, payload = self._events.get_nowait()
            except queue.Empty:
                return
            if kind == "sync":
                seen = {p["metadata"]["uid"] for p in payload}
                with self._pods_lock:
                    for uid, pod in self._pods.items():
                        if uid not in seen:
                            pod.deleted_in_api = True
                for obj in payload:
                    self._upsert(obj)
            elif kind == "pod":
                self._upsert(payload)
            else:
                with self._pods_lock:
                    pod = self._pods.get(payload["metadata"]["uid"])
                if pod is not None:
                    pod.deleted_in_api = True
                    pod.obj = payload

    def _upsert(self, obj: dict[str, Any]) -> None:
        uid = obj["metadata"]["uid"]
        with self._pods_lock:
            pod = self._pods.get(uid)
        if pod is not None:
            pod.obj = obj
            return
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") and not obj["metadata"].get("deletionTimestamp"):
            return  # finished before this agent knew it; nothing to run
        meta, spec = obj["metadata"], obj.get("spec") or {}
        pattern = self.settings.run_image_pattern
        spark = is_spark_pod(obj)

        def containers(specs: Iterable[dict[str, Any]]) -> list[_Container]:
            return [
                _Container(
                    spec=c,
                    runs_locally=spark
                    or image_runs_locally(
                        c.get("image", ""),
                        pattern,
                        published=bool(image_paths(c.get("image") or "", self.settings.image_store)),
                    ),
                    view=ContainerView(name=c["name"], image=c.get("image", "")),
                )
                for c in specs
            ]

        pod = _Pod(
            uid=uid,
            namespace=meta["namespace"],
            name=meta["name"],
            obj=obj,
            directory=self.workdir / "pods" / f"{meta['namespace']}_{meta['name']}_{uid[:8]}",
            init=containers(spec.get("initContainers") or []),
            main=containers(spec.get("containers") or []),
            start_time=(obj.get("status") or {}).get("startTime") or rfc3339(time.time()),
            phase=phase if phase in ("Succeeded", "Failed") else "Pending",
        )
        with self._pods_lock:
            self._pods[uid] = pod

    def _step(self, pod: _Pod) -> None:
        now = time.monotonic()
        if pod.deleted_in_api or pod.obj["metadata"].get("deletionTimestamp"):
            self._terminate(pod, now)
            return
        if pod.phase in ("Succeeded", "Failed"):
            self._report(pod, now)
            return
        if not pod.prepared and now >= pod.next_prepare:
            self._prepare(pod, now)
        if pod.prepared:
            self._run_containers(pod, now)
        self._report(pod, now)

    def _prepare(self, pod: _Pod, now: float) -> None:
        """Materialise the pod's volumes and compute its path map; retried while data is missing."""
        secrets, configmaps = self._lookups(pod.namespace)
        volumes_root = pod.directory / "volumes"
        try:
            volume_dirs: dict[str, str] = {}
            for vol in (pod.obj.get("spec") or {}).get("volumes") or []:
                name = vol["name"]
                if vol.get("hostPath"):
                    volume_dirs[name] = vol["hostPath"]["path"]
                    continue
                if vol.get("persistentVolumeClaim"):
                    # Outlives the pod like a claim does: keyed by namespace and claim name.
                    d = self.workdir / "claims" / f"{pod.namespace}_{vol['persistentVolumeClaim']['claimName']}"
                    d.mkdir(parents=True, exist_ok=True)
                    volume_dirs[name] = str(d)
                    continue
                files = volume_files(
                    pod.obj,
                    vol,
                    secrets,
                    configmaps,
                    lambda aud, secs: self._token(pod, aud, secs),
                    self.settings.host_ip,
                    self.settings.host_ip,
                )
                d = volumes_root / name
                d.mkdir(parents=True, exist_ok=True)
                for rel, (content, mode) in (files or {}).items():
                    target = d / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if target.exists():
                        target.chmod(0o600)
                    target.write_bytes(content)
                    target.chmod((mode & 0o777) | 0o400)
                volume_dirs[name] = str(d)
        except ConfigError as exc:
            pod.prepare_error = str(exc)
            pod.next_prepare = now + 2.0
            for c in pod.init + pod.main:
                c.view.reason, c.view.message = "CreateContainerConfigError", str(exc)
            return
        except Exception as exc:  # the API may be briefly unavailable
            pod.prepare_error = str(exc)
            pod.next_prepare = now + 2.0
            log.warning("preparing pod %s/%s: %s", pod.namespace, pod.name, exc)
            return
        (pod.directory / "logs").mkdir(parents=True, exist_ok=True)
        pod.volume_dirs = volume_dirs
        pod.prepared = True
        pod.prepare_error = ""
        for c in pod.init + pod.main:
            if c.view.reason == "CreateContainerConfigError":
                c.view.reason, c.view.message = "ContainerCreating", ""

    def _token(self, pod: _Pod, audience: str, seconds: int) -> str:
        spec: dict[str, Any] = {
            "expirationSeconds": max(600, seconds),
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid},
        }
        if audience:
            spec["audiences"] = [audience]
        sa = (pod.obj.get("spec") or {}).get("serviceAccountName") or "default"
        resp = self._core.create_namespaced_service_account_token(
            sa,
            pod.namespace,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
            _preload_content=False,
        )
        return json.loads(resp.data)["status"]["token"]

    def _lookups(self, namespace: str) -> tuple[Lookup, Lookup]:
        from kubernetes.client.rest import ApiException

        cache: dict[tuple[str, str], dict[str, bytes] | None] = {}

        def fetch(kind: str, name: str) -> dict[str, bytes] | None:
            if (kind, name) not in cache:
                try:
                    if kind == "secret":
                        resp = self._core.read_namespaced_secret(name, namespace, _preload_content=False)
                        cache[(kind, name)] = secret_data(json.loads(resp.data))
                    else:
                        resp = self._core.read_namespaced_config_map(name, namespace, _preload_content=False)
                        cache[(kind, name)] = configmap_data(json.loads(resp.data))
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    cache[(kind, name)] = None
            return cache[(kind, name)]

        return (lambda n: fetch("secret", n)), (lambda n: fetch("configmap", n))

    def _run_containers(self, pod: _Pod, now: float) -> None:
        policy = (pod.obj.get("spec") or {}).get("restartPolicy") or "Always"
        # Init containers one after the other (always retried unless the pod's policy is Never).
        for c in pod.init:
            self._poll(pod, c, "Never" if policy == "Never" else "OnFailure", now)
            if c.view.state == "terminated" and c.view.exit_code == 0:
                continue
            if c.view.state == "terminated" and not c.view.will_restart:
                break  # failed for good: the pod fails
            if c.view.state != "running" and now >= c.next_start:
                self._start(pod, c, now)
            break
        else:
            for c in pod.main:
                self._poll(pod, c, policy, now)
                if c.view.state == "waiting" and now >= c.next_start:
                    self._start(pod, c, now)
        pod.phase = pod_phase(policy, [c.view for c in pod.init], [c.view for c in pod.main])

    def _poll(self, pod: _Pod, c: _Container, policy: str, now: float) -> None:
        """Notice a process that exited: record it, and schedule its restart if the policy says so."""
        if c.popen is None or c.view.state != "running":
            return
        code = c.popen.poll()
        if code is None:
            return
        _close(c)
        exit_code = exit_code_of(code)
        v = c.view
        v.exit_code, v.finished_at = exit_code, rfc3339(time.time())
        v.reason = "Completed" if exit_code == 0 else "Error"
        v.will_restart = should_restart(policy, exit_code)
        if now - c.started_mono >= self.settings.backoff_reset_after:
            c.backoff_count = 0
        if v.will_restart:
            delay = restart_delay(c.backoff_count, self.settings.backoff_base, self.settings.backoff_cap)
            c.backoff_count += 1
            c.next_start = now + delay
            c.restart_pending = True
            # As a kubelet: the run that failed keeps its termination message while the next one waits.
            message = self._termination_message(pod, c, exit_code)
            v.last_terminated = {
                "exitCode": exit_code,
                "reason": v.reason,
                **({"message": message} if message else {}),
                "startedAt": v.started_at,
                "finishedAt": v.finished_at,
                "containerID": v.container_id,
            }
            v.state, v.reason = "waiting", "CrashLoopBackOff"
            v.message = f"back-off {delay:.0f}s restarting failed container={c.name} pod={pod.name}"
        else:
            v.state = "terminated"
            v.message = self._termination_message(pod, c, exit_code)
        self._write_pid_file()

    def _termination_message(self, pod: _Pod, c: _Container, exit_code: int) -> str:
        written = pod.directory / "termination" / c.name
        log_tail = b""
        if c.log_path is not None and c.log_path.exists():
            with open(c.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 16 * TERMINATION_LOG_LIMIT))
                log_tail = f.read()
        return termination_message(
            c.spec.get("terminationMessagePolicy"),
            exit_code,
            written.read_bytes() if written.is_file() else b"",
            log_tail,
        )

    def _start(self, pod: _Pod, c: _Container, now: float) -> None:
        v = c.view
        if not c.runs_locally:
            # Like kwok: the container is reported running and nothing runs.
            v.state, v.reason, v.message = "running", "", ""
            v.started_at = rfc3339(time.time())
            v.container_id = f"reprise-agent://not-run/{pod.uid[:8]}-{c.name}"
            if c in pod.init:  # an init container that does not run has nothing to do: it succeeded
                v.state, v.exit_code, v.finished_at, v.reason = "terminated", 0, v.started_at, "Completed"
            return
        secrets, configmaps = self._lookups(pod.namespace)
        try:
            argv, env, cwd = self._process_spec(pod, c, secrets, configmaps)
        except ConfigError as exc:
            v.state, v.reason, v.message = "waiting", "CreateContainerConfigError", str(exc)
            c.next_start = now + 2.0
            return
        if c.restart_pending:
            v.restart_count += 1
            c.restart_pending = False
        logs = pod.directory / "logs"
        c.log_path = logs / f"{c.name}.log"
        if c.log_path.exists():
            c.log_path.replace(logs / f"{c.name}.previous.log")
        c.log_file = open(c.log_path, "ab")
        try:
            c.popen = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=c.log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            _close(c)
            ts = rfc3339(time.time())
            v.state, v.exit_code, v.started_at, v.finished_at = "running", 128, ts, ts
            v.reason, v.message = "StartError", f"cannot run {argv[:1]}: {exc.strerror}"
            c.popen = None
            # Treat as an immediate exit with 128 so the restart policy and backoff apply.
            self._record_start_failure(pod, c, now)
            return
        v.state, v.reason, v.message, v.exit_code = "running", "", "", None
        v.started_at, v.finished_at = rfc3339(time.time()), None
        v.container_id = f"reprise-agent://{c.popen.pid}"
        v.will_restart = False
        c.started_mono = now
        self._write_pid_file()
        log.info("pod %s/%s container %s: pid %d: %s", pod.namespace, pod.name, c.name, c.popen.pid, shlex.join(argv))

    def _record_start_failure(self, pod: _Pod, c: _Container, now: float) -> None:
        policy = (pod.obj.get("spec") or {}).get("restartPolicy") or "Always"
        if c in pod.init:
            policy = "Never" if policy == "Never" else "OnFailure"
        v = c.view
        v.will_restart = should_restart(policy, 128)
        if v.will_restart:
            delay = restart_delay(c.backoff_count, self.settings.backoff_base, self.settings.backoff_cap)
            c.backoff_count += 1
            c.next_start = now + delay
            c.restart_pending = True
            v.last_terminated = {
                "exitCode": 128,
                "reason": "StartError",
                "message": v.message,
                "startedAt": v.started_at,
                "finishedAt": v.finished_at,
            }
            v.state, v.reason = "waiting", "CrashLoopBackOff"
        else:
            v.state = "terminated"

    def _process_spec(
        self, pod: _Pod, c: _Container, secrets: Lookup, configmaps: Lookup
    ) -> tuple[list[str], dict[str, str], str]:
        s = self.settings
        spec = c.spec
        paths = dict(s.extra_path_map)
        paths.update(image_paths(spec.get("image") or "", s.image_store))
        paths.update(mount_map(spec, pod.volume_dirs))
        # The termination message file, like a volume: the process writes the container path, we read ours.
        written = pod.directory / "termination" / spec["name"]
        written.parent.mkdir(parents=True, exist_ok=True)
        written.unlink(missing_ok=True)
        paths[spec.get("terminationMessagePath") or TERMINATION_MESSAGE_PATH] = str(written)
        pod_env = resolve_env(pod.obj, spec, secrets, configmaps, s.host_ip, s.host_ip, s.allocatable)
        env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        # `sh -c "python ..."` finds the agent's interpreter first, as the image's PATH would find its own.
        env["PATH"] = os.pathsep.join(filter(None, [os.path.dirname(s.python), env.get("PATH", os.defpath)]))
        env["HOSTNAME"] = pod.name
        env["PYTHONUNBUFFERED"] = "1"  # logs reach the file as they are written, as with `docker logs`
        env["REPRISE_PATH_PREFIX_MAP"] = json.dumps(paths, sort_keys=True)
        kubeconfig = self._pod_kubeconfig(pod, spec, paths)
        if kubeconfig:
            env["KUBECONFIG"] = kubeconfig
        for port in declared_ports(spec):
            # Checked again at every (re)start: another process may have taken the port in the meantime. A
            # port is claimed when chosen (see PortClaims), so no other pod is given it before this one listens.
            known = c.host_ports.get(port)
            if known is None or not port_is_bindable(known):
                if known is not None:
                    self._ports.release(known)
                c.host_ports[port] = self._ports.claim_port(port)
        pod_env = map_ports(pod_env, c.host_ports)
        if c.host_ports:
            env["REPRISE_PORT_MAP"] = json.dumps({str(k): v for k, v in c.host_ports.items()}, sort_keys=True)
        env.update({k: map_paths(v, paths) for k, v in pod_env.items()})
        repo = str(s.repo_root)
        own = f"{repo}{os.pathsep}{repo}/operator"
        env["PYTHONPATH"] = own + (os.pathsep + env["PYTHONPATH"] if pod_env.get("PYTHONPATH") else "")
        command = [map_paths(expand_vars(a, pod_env), paths) for a in spec.get("command") or []]
        args = [map_paths(expand_vars(a, pod_env), paths) for a in spec.get("args") or []]
        entrypoint = SPARK_ENTRYPOINT if is_spark_pod(pod.obj) else s.default_entrypoint
        argv = local_argv(command, args, s.python, entrypoint)
        if not argv:
            raise ConfigError("container has no command and no default entrypoint")
        cwd = str(pod.directory)
        working = spec.get("workingDir")
        if working:
            mapped = map_paths(working, paths)
            if mapped != working or os.path.isdir(mapped):
                cwd = mapped
        return argv, env, cwd

    def _pod_kubeconfig(self, pod: _Pod, spec: Mapping[str, Any], paths: Mapping[str, str]) -> str | None:
        """A kubeconfig acting as the pod's ServiceAccount, when the container mounts its token."""
        for mount_path, local in paths.items():
            token = Path(local) / "token"
            if mount_path.startswith("/var/run/secrets/kubernetes.io/serviceaccount") and token.is_file():
                path = pod.directory / f"kubeconfig-{spec['name']}"
                ca = Path(local) / "ca.crt"
                path.write_text(
                    pod_kubeconfig(self._server, str(ca if ca.is_file() else self._ca_file), str(token), pod.namespace)
                )
                return str(path)
        return None

    def _terminate(self, pod: _Pod, now: float) -> None:
        """SIGTERM, SIGKILL after the grace period, then the final delete with grace 0."""
        running = [c for c in pod.init + pod.main if c.popen is not None and c.popen.poll() is None]
        if pod.terminating_since is None:
            pod.terminating_since = now
            meta, spec = pod.obj["metadata"], pod.obj.get("spec") or {}
            grace = meta.get("deletionGracePeriodSeconds")
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            pod.kill_at = now + float(grace or 0)
            for c in running:
                _signal_group(c.popen.pid, signal.SIGTERM)  # type: ignore[union-attr]
        if running and now >= (pod.kill_at or now):
            for c in running:
                _signal_group(c.popen.pid, signal.SIGKILL)  # type: ignore[union-attr]
        for c in pod.init + pod.main:
            if c.popen is not None and c.popen.poll() is not None:
                _close(c)
        if any(c.popen is not None and c.popen.poll() is None for c in pod.init + pod.main):
            return
        self._write_pid_file()
        if not pod.deleted_in_api and not pod.final_delete_sent:
            from kubernetes.client.rest import ApiException

            try:
                self._core.delete_namespaced_pod(
                    pod.name,
                    pod.namespace,
                    grace_period_seconds=0,
                    body={
                        "apiVersion": "v1",
                        "kind": "DeleteOptions",
                        "gracePeriodSeconds": 0,
                        "preconditions": {"uid": pod.uid},
                    },
                )
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise
            pod.final_delete_sent = True
        if pod.deleted_in_api:
            with self._pods_lock:
                self._pods.pop(pod.uid, None)
            for c in pod.init + pod.main:
                for host_port in c.host_ports.values():
                    self._ports.release(host_port)

    def _report(self, pod: _Pod, now: float) -> None:
        """Patch the pod status when it changed (a JSON merge patch of the whole status)."""
        if pod.reported is not None and now < pod.next_report:
            return
        status = pod_status(
            pod.obj,
            [c.view for c in pod.init],
            [c.view for c in pod.main],
            pod.phase,
            self.settings.host_ip,
            pod.start_time,
            rfc3339(time.time()),
        )
        if status == pod.reported:
            return
        # Conditions carry fresh transition times only when a status flips: compare without them.
        from kubernetes.client.rest import ApiException

        try:
            self._core.patch_namespaced_pod_status(
                pod.name,
                pod.namespace,
                {"status": status},
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status == 404:
                pod.deleted_in_api = True
                return
            pod.next_report = now + 1.0
            raise
        pod.reported = status
        # Keep the conditions we sent as the "old" ones, so their transition times stay stable.
        pod.obj.setdefault("status", {})["conditions"] = status["conditions"]

    def _write_pid_file(self) -> None:
        """The PIDs of running containers, for `python -m local_platform down` from another process; and the
        metrics endpoints among them, for Prometheus (`SCRAPE_TARGETS_FILE`): both change when a process does."""
        try:
            pids = self.pids()
            tmp = self._pid_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"pids": [[pid, start_ticks(pid)] for pid in pids]}))
            tmp.replace(self._pid_file)
            with self._pods_lock:
                running = [
                    (p.namespace, p.name, c.spec, dict(c.host_ports))
                    for p in self._pods.values()
                    for c in p.main
                    if c.popen is not None and c.popen.poll() is None
                ]
            targets = self.workdir / SCRAPE_TARGETS_FILE
            tmp = targets.with_suffix(".tmp")
            tmp.write_text(json.dumps(scrape_targets(running), indent=1))
            tmp.replace(targets)  # file_sd must never read a half-written file
        except OSError:
            pass

    @property
    def scrape_targets_file(self) -> Path:
        return self.workdir / SCRAPE_TARGETS_FILE


def _close(c: _Container) -> None:
    if c.log_file is not None:
        c.log_file.close()
        c.log_file = None


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks since boot), so a recycled PID is never mistaken for it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None
