"""The chart's release on the local platform's real node (`make run NODE=real`): the operator as it ships, the Helm
chart's Deployment running the image the project's Dockerfile builds, not a host process.

`values()` is what differs from an install on a cluster, each for a reason of this platform:
- the API server and Kafka listen on loopback and there is no kube-proxy, so the operator pod uses the node's
  network (`operator.hostNetwork`) and is told the API server's address in its env, which wins over the kubelet's
  `KUBERNETES_SERVICE_*` variables;
- the admission webhook is called by URL on 127.0.0.1 (no Service routing), and the webhook and metrics ports are
  free ports of this machine (pods on the node's network share its ports);
- every Kafka name of the namespace `kafka` is the local broker (`REPRISE_KAFKA_BOOTSTRAP_ALIASES`), as for the
  operator `make run` runs as a host process;
- the image is `reprise:dev`, loaded into the node's containerd, never pulled;
- the Kafka prefix policy admits every group and topic (the demos use the PLAINTEXT listener and groups of any
  name; `make run TENANTS=1` is where the policy is shown).

`install()` runs `helm install` and waits for the operator's pod to be Ready; on a failure it says what the pod
and its container said.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping

from .errors import PlatformError

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "reprise"
RELEASE = "reprise"
NAMESPACE = "reprise-system"
#: How pod specs on the real node name the project's image (loaded into containerd; imagePullPolicy Never).
IMAGE_REPOSITORY, IMAGE_TAG = "reprise", "dev"
OPERATOR_SELECTOR = "app.kubernetes.io/component=operator"


def values(
    *, api_port: int, metrics_port: int, webhook_port: int, extra_env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The chart's values for this platform (the module docstring says why each differs from the defaults)."""
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api_port), **(extra_env or {})}
    return {
        "image": {"repository": IMAGE_REPOSITORY, "tag": IMAGE_TAG, "pullPolicy": "Never"},
        "operator": {
            "hostNetwork": True,
            "metricsPort": metrics_port,
            "extraEnv": [{"name": k, "value": v} for k, v in env.items()],
        },
        "admission": {"port": webhook_port, "url": f"https://127.0.0.1:{webhook_port}"},
        "networkPolicy": {
            "apiServerPeers": [{"ipBlock": {"cidr": "127.0.0.1/32"}}],
            "kafkaPeers": [{"ipBlock": {"cidr": "127.0.0.1/32"}}],
        },
        "kafka": {"allowAnonymous": True, "prefixes": {"groups": [""], "topics": [""]}},
    }


def install(
    helm: Path, kubectl: Path, kubeconfig: Path, chart_values: Mapping[str, Any], workdir: Path, timeout: float = 300
) -> str:
    """`helm install` the chart as release `reprise` in `reprise-system`; the operator's pod name once Ready."""
    workdir.mkdir(parents=True, exist_ok=True)
    values_file = workdir / "values.json"  # JSON is YAML; the file stays for `helm upgrade -f` by hand
    values_file.write_text(json.dumps(chart_values, indent=2))
    argv = [str(helm), f"--kubeconfig={kubeconfig}", "install", RELEASE, str(CHART), "--namespace", NAMESPACE]
    done = subprocess.run(
        [*argv, "--create-namespace", "--values", str(values_file)], capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise PlatformError(f"helm install of charts/reprise failed: {done.stderr.strip()[-400:]}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = _operator_pod(kubectl, kubeconfig)
        if pod is not None and _ready(pod):
            return str(pod["metadata"]["name"])
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
        if statuses[0].get("restartCount", 0) > 0:
            raise PlatformError(
                f"the operator's container restarted before it was Ready: {diagnosis(kubectl, kubeconfig)}"
            )
        time.sleep(1)
    raise PlatformError(
        f"the operator's pod was not Ready {timeout:.0f}s after helm install: {diagnosis(kubectl, kubeconfig)}"
    )


def _operator_pod(kubectl: Path, kubeconfig: Path) -> dict | None:
    done = subprocess.run(
        [
            str(kubectl),
            f"--kubeconfig={kubeconfig}",
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            OPERATOR_SELECTOR,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return None
    live = [p for p in json.loads(done.stdout)["items"] if not p["metadata"].get("deletionTimestamp")]
    return live[0] if len(live) == 1 else None


def _ready(pod: dict) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def diagnosis(kubectl: Path, kubeconfig: Path) -> str:
    """One line of what the operator's pod and container said: its waiting reason and its log's last lines."""
    base = [str(kubectl), f"--kubeconfig={kubeconfig}", "-n", NAMESPACE]
    pod = _operator_pod(kubectl, kubeconfig)
    statuses = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
    log = subprocess.run([*base, "logs", "-l", OPERATOR_SELECTOR, "--tail=5"], capture_output=True, text=True)
    tail = " | ".join((log.stdout or log.stderr).strip().splitlines()[-5:])
    return f"state {statuses[0].get('state')}; log: {tail}; more: kubectl logs -n {NAMESPACE} -l {OPERATOR_SELECTOR}"
