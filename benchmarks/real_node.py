"""What the real node costs (REPRISE_NODE=real; skipped otherwise): the kubelet's and containerd's CPU and memory
while idle, and pod create -> Running over 20 pods of the project's image on the CNI bridge.

    REPRISE_NODE=real python -m benchmarks real_node

Figures, no targets: CPU is the share of one core over the idle sample (utime+stime from /proc), memory the
resident set at its end; create -> Running runs, on this process's clock, from the start of the
create call to the first watch event that reports the pod Running. Pods are created one after another,
each left running, so the 20th starts beside 19 others.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

IDLE_SECONDS = 60
PODS = 20


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def idle_cost(pids: dict[str, int], seconds: float = IDLE_SECONDS) -> dict[str, Any]:
    hertz = os.sysconf("SC_CLK_TCK")
    before = {name: _cpu_ticks(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    return {
        name: {
            "cpu_percent_of_one_core": round(100 * (_cpu_ticks(pid) - before[name]) / hertz / seconds, 2),
            "rss_mib": round(_rss_mib(pid), 1),
        }
        for name, pid in pids.items()
    }


def pod_start_seconds(kubectl: list[str], namespace: str, image: str, count: int = PODS) -> list[float]:
    seconds = []
    for i in range(count):
        name = f"start-{i}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532},
                "containers": [
                    {
                        "name": "sleep",
                        "image": image,
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    }
                ],
            },
        }
        watch = subprocess.Popen(
            [
                *kubectl,
                "get",
                "pods",
                "-n",
                namespace,
                f"--field-selector=metadata.name={name}",  # a watch by name fails before the pod exists
                "--watch",
                "-o",
                'jsonpath={.status.phase}{"\\n"}',
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        began = time.monotonic()
        subprocess.run(
            [*kubectl, "create", "-f", "-"], input=json.dumps(pod), capture_output=True, text=True, check=True
        )
        try:
            assert watch.stdout is not None
            for line in watch.stdout:
                if line.strip() == "Running":
                    seconds.append(time.monotonic() - began)
                    break
        finally:
            watch.kill()
            watch.wait()
        if len(seconds) != i + 1:
            raise RuntimeError(f"pod {name} was never reported Running")
    return seconds


def run() -> dict[str, Any]:
    if os.environ.get("REPRISE_NODE") != "real":
        return {"skipped": "set REPRISE_NODE=real to measure the real node"}
    from local_platform.control_plane import ControlPlane
    from local_platform.node_images import reprise_image
    from local_platform.real_node import RealNode

    with tempfile.TemporaryDirectory(prefix="reprise-bench-node-") as scratch:
        workdir = Path(scratch)
        control_plane = ControlPlane(workdir / "kube")
        node = RealNode(control_plane.kubeconfig, workdir / "node")
        try:
            control_plane.start()
            began = time.monotonic()
            node.start()
            node_start = time.monotonic() - began
            tag, built_in = reprise_image()
            node.load_image(tag, "reprise:dev")
            pids = {"kubelet": node.kubelet.pid, "containerd": node.containerd.pid}  # type: ignore[union-attr]
            idle = idle_cost(pids)
            kubectl = [str(control_plane.kubectl), f"--kubeconfig={control_plane.kubeconfig}"]
            subprocess.run([*kubectl, "create", "namespace", "bench"], capture_output=True, check=True)
            deadline = time.monotonic() + 60
            while subprocess.run([*kubectl, "get", "sa", "default", "-n", "bench"], capture_output=True).returncode:
                if time.monotonic() > deadline:
                    raise RuntimeError("no default ServiceAccount in namespace bench")
                time.sleep(0.2)
            starts = pod_start_seconds(kubectl, "bench", "reprise:dev")
        finally:
            node.stop()
            control_plane.stop()
    return {
        "node_start_seconds": round(node_start, 1),
        "image_build_seconds": round(built_in, 1),
        "idle": idle,
        "pod_create_to_running_seconds": {
            "pods": len(starts),
            "median": round(statistics.median(starts), 2),
            "max": round(max(starts), 2),
        },
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
