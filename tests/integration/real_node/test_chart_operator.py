"""The chart's operator as it ships: `helm install` on the real node, the Deployment's pod running the image the
Dockerfile builds, as uid/gid 65532 with no passwd entry (the image's crash at start, issue 29, would show here
as CrashLoopBackOff), Ready; then its process killed, the kubelet restarts the container and it is Ready again.

The node has no Service routing (no kube-proxy) and the platform's API server listens on loopback, so the pod
uses the node's network (`operator.hostNetwork`) and is told the API server's address in its env, which wins
over the kubelet's `KUBERNETES_SERVICE_*` variables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid

from local_platform.processes import free_port
from tests.fixtures.kube import wait_for
from tests.integration.chart.conftest import helm_install

from .conftest import NodeCluster, process_status


def _operator_pod(kube, namespace: str) -> dict | None:
    pods = json.loads(
        kube.kubectl("get", "pods", "-n", namespace, "-l", "app.kubernetes.io/component=operator", "-o", "json").stdout
    )["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live[0] if len(live) == 1 else None


def _diagnosis(kube, namespace: str) -> str:
    """What the pod and its container said, for a failure message."""
    pods = kube.kubectl("get", "pods", "-n", namespace, "-o", "json", check=False).stdout
    events = kube.kubectl("get", "events", "-n", namespace, check=False).stdout
    logs = kube.kubectl("logs", "-n", namespace, "-l", "app.kubernetes.io/component=operator", "--tail=40", check=False)
    previous = kube.kubectl(
        "logs", "-n", namespace, "-l", "app.kubernetes.io/component=operator", "--previous", "--tail=20", check=False
    )
    return (
        f"pods: {pods[-3000:]}\nevents:\n{events[-3000:]}\nlog:\n{logs.stdout}{logs.stderr}\n"
        f"log of the previous container:\n{previous.stdout}{previous.stderr}"
    )


def _ready(pod: dict | None) -> bool:
    conditions = (pod or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _ready_or_restarted(pod: dict | None) -> dict | None:
    """The pod once it is Ready, or once its container has restarted (a crash at start: no need to wait on)."""
    statuses = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
    return pod if _ready(pod) or statuses[0].get("restartCount", 0) > 0 else None


def _container_pid(cluster: NodeCluster, pod: dict) -> int:
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    tasks = subprocess.run(
        [*cluster.node.ctr, "-n", "k8s.io", "tasks", "ls"], capture_output=True, text=True, check=True
    ).stdout
    return int(next(line.split()[1] for line in tasks.splitlines() if line.startswith(container_id)))


def test_chart_operator_runs_in_its_image_and_restarts_cleanly(real_cluster: NodeCluster, tmp_path):
    kube = real_cluster.kube
    namespace = f"reprise-system-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", namespace)
    # Not labelled `restricted`: that standard forbids hostNetwork, which only this platform needs. The pod's own
    # security context is the chart's restricted one, checked below from the kernel's side.
    webhook_port = free_port()
    values = {
        "image": {"repository": "reprise", "tag": "dev", "pullPolicy": "Never"},
        "operator": {
            "hostNetwork": True,
            "metricsPort": free_port(),
            "pollInterval": 1,
            "extraEnv": [
                {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                {"name": "KUBERNETES_SERVICE_PORT", "value": str(kube.control_plane.port)},
            ],
        },
        "admission": {"port": webhook_port, "url": f"https://127.0.0.1:{webhook_port}"},
    }
    try:
        helm_install(kube, "reprise", namespace, values, tmp_path)
        try:
            pod = wait_for(lambda: _ready_or_restarted(_operator_pod(kube, namespace)), 240, "the operator pod Ready")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_diagnosis(kube, namespace)}") from None
        status = pod["status"]["containerStatuses"][0]
        assert status["restartCount"] == 0, f"the operator crashed at start: {status}\n{_diagnosis(kube, namespace)}"
        log = kube.kubectl("logs", "-n", namespace, pod["metadata"]["name"]).stdout
        assert "reprise operator watching" in log and "getpwuid" not in log, log
        process = process_status(_container_pid(real_cluster, pod))
        assert process["Uid"].split()[0] == "65532" and process["Gid"].split()[0] == "65532", process
        assert int(process["CapEff"], 16) == 0 and process["NoNewPrivs"] == "1", process

        # Killed, as an OOM kill or a crash would: the kubelet restarts the container in the same pod.
        os.kill(_container_pid(real_cluster, pod), signal.SIGKILL)

        def restarted_and_ready() -> dict | None:
            again = _operator_pod(kube, namespace)
            statuses = (again or {}).get("status", {}).get("containerStatuses") or [{}]
            return again if statuses[0].get("restartCount") == 1 and _ready(again) else None

        again = wait_for(restarted_and_ready, 240, "the operator container restarted and Ready again")
        assert again["metadata"]["name"] == pod["metadata"]["name"]
        log = kube.kubectl("logs", "-n", namespace, again["metadata"]["name"]).stdout
        assert "reprise operator watching" in log and "Traceback" not in log, log
    finally:
        kube.helm("uninstall", "reprise", "--namespace", namespace, "--wait", "--timeout", "120s", check=False)
        kube.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
