"""Stopping the real node leaves nothing of it on the host: no process, mount, interface, cgroup or fixed host
folder, even when its kubelet and containerd were killed with SIGKILL while a pod ran."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from local_platform.control_plane import ControlPlane
from local_platform.node_images import reprise_image
from local_platform.real_node import CGROUP_HIERARCHIES, KUBELET_HOST_DIRS, RealNode

from .conftest import IMAGE


def _identity(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process, None once it is gone: a zombie waiting for its parent to reap it counts
    as gone, and a PID the kernel gave to another process since has another start time."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (fields[0], fields[19]) if fields[0] != "Z" else None


def _host_mounts_under(folder: Path) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(folder) in line]


def test_stop_removes_everything_after_kubelet_and_containerd_were_killed(tmp_path: Path):
    dirs_before = {d for d in KUBELET_HOST_DIRS if d.exists()}
    control_plane = ControlPlane(tmp_path / "control-plane")
    node = RealNode(control_plane.kubeconfig, tmp_path / "node")
    kubectl = [str(control_plane.kubectl), f"--kubeconfig={control_plane.kubeconfig}"]
    try:
        control_plane.start()
        node.start()
        node.load_image(os.environ.get("REPRISE_NODE_IMAGE") or reprise_image()[0], IMAGE)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "sleeper", "namespace": "default"},
            "spec": {
                "securityContext": {"runAsUser": 65532, "runAsGroup": 65532},
                "containers": [{"name": "s", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}],
            },
        }
        subprocess.run(
            [*kubectl, "create", "-f", "-"], input=json.dumps(pod), text=True, check=True, capture_output=True
        )
        subprocess.run([*kubectl, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s"], check=True)
        pod_processes = node._pod_processes()
        assert pod_processes, "the pod's processes are not in the node's cgroups"
        ours = {pid: _identity(pid) for pid in [*pod_processes, node.holder.pid]}  # type: ignore[union-attr]
        os.kill(node.kubelet.pid, signal.SIGKILL)  # type: ignore[union-attr]
        os.kill(node.containerd.pid, signal.SIGKILL)  # type: ignore[union-attr]
    finally:
        node.stop()
        control_plane.stop()
    for pid, identity in ours.items():
        now = _identity(pid)
        assert now is None or now[1] != identity[1], f"pid {pid} of the node is still running ({now})"  # type: ignore[index]
    assert subprocess.run(["ip", "link", "show", node.bridge], capture_output=True).returncode != 0, "bridge left"
    left = [h for h in CGROUP_HIERARCHIES if (Path("/sys/fs/cgroup") / h / node.cgroup_root.lstrip("/")).exists()]
    assert left == [], f"cgroups left in {left}"
    assert _host_mounts_under(tmp_path) == []
    assert {d for d in KUBELET_HOST_DIRS if d.exists()} <= dirs_before
    results = Path("/var/lib/cni/results")
    assert not (results.is_dir() and list(results.glob("reprise-net-*"))), "libcni results of the node's pods left"
