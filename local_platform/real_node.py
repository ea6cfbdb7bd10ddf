"""A real Kubernetes node on this machine: containerd, runc, the CNI bridge plugin and a kubelet, registered
with the local control plane (`REPRISE_NODE=real`; the node agent stays the default until the suite runs here).

What it owns, and removes on `stop()`:
- a private mount namespace, held by one `unshare ... sleep infinity` process. containerd, the kubelet and every
  shim run inside it, so their overlay, tmpfs, netns and volume mounts never reach the host's namespace, and
  the three sysctls the kubelet insists on (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1)
  are bind-mounted files inside it: the kubelet reads them as already set and writes nothing to the host;
- containerd (Debian's 1.6, runc, cgroupfs) with `restrict_oom_score_adj`, because root here lacks
  CAP_SYS_RESOURCE and runc cannot lower a sandbox's oom_score_adj to -998;
- the kubelet (built from the Go module proxy at the control plane's version) with `failCgroupV1: false` and
  `cgroupDriver: cgroupfs` (the cgroup layout is hybrid and there is no systemd), its pods under a cgroup root
  of its own in every v1 hierarchy;
- a bridge made in advance with its own /24, no gateway and no masquerade, so `ip_forward` and the iptables
  ruleset stay as they are. Pods that must reach the platform's loopback services (the API server, Kafka) use
  `hostNetwork`; the others get an address on the bridge.

Stopping goes kubelet, containers, containerd, then every process still in the namespace (found by its mount
namespace) or in the node's cgroups, signalled by PID, the namespace holder, the bridge, the cgroups (deepest
first) and the files the kubelet and containerd write outside their own folders. That holds also after the kubelet
and containerd were killed with SIGKILL.

containerd's content store lives in the cache (`node/containerd`), so images are imported once per machine;
a lock on it allows one real node per machine at a time, and a second one is refused with the first one's PID.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from . import node_images, processes
from .cache import cache_root
from .errors import PlatformError
from .processes import ManagedProcess, free_port
from .toolchain import ensure_kubelet

#: Every hierarchy of the hybrid layout the kubelet makes its cgroup root in (the cgroup2 `unified` mount too).
CGROUP_HIERARCHIES = (
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "blkio",
    "pids",
    "systemd",
    "hugetlb",
    "unified",
)
#: Folders the kubelet makes at hard-coded paths whatever its --root-dir; removed on stop if this node made them
#: and they are empty (another node of the machine may be using them).
KUBELET_HOST_DIRS = (
    Path("/var/lib/kubelet/device-plugins"),
    Path("/var/lib/kubelet"),
    # containerd 1.6's shim sockets and ctr's fifos, also at fixed paths
    Path("/run/containerd/s"),
    Path("/run/containerd/fifo"),
    Path("/run/containerd"),
    Path("/var/lib/cni/results"),
    Path("/var/lib/cni"),
)
#: The values the kubelet sets unless they are set (pkg/kubelet/cm: setupKernelTunables), bind-mounted over
#: /proc/sys inside the node's namespace only.
KERNEL_TUNABLES = {"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}
CNI_BIN = Path("/usr/lib/cni")
REQUIRED = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "ip": "iproute2",
    "podman": "podman",
    "buildah": "buildah",
    "mmdebstrap": "mmdebstrap",
    "gcc": "gcc",
}


def missing_packages() -> list[str]:
    """The Debian packages the real node needs that are not installed."""
    missing = {package for tool, package in REQUIRED.items() if shutil.which(tool) is None}
    if not (CNI_BIN / "bridge").exists():
        missing.add("containernetworking-plugins")
    return sorted(missing)


class RealNode:
    """One kubelet + containerd node, everything under `workdir` but containerd's content store."""

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = Path(workdir).resolve()
        tag = hashlib.sha256(str(self.workdir).encode()).hexdigest()[:6]
        self.name = f"reprise-node-{tag}"
        self.bridge = f"reprisebr{tag}"[:15]
        # A /24 of 10.244.0.0/16 picked by the workdir, so two checkouts' nodes do not share a subnet.
        self.subnet_octet = int(tag, 16) % 250 + 1
        self.node_ip = f"10.244.{self.subnet_octet}.1"
        self.cgroup_root = f"/{self.name}"
        self.holder: ManagedProcess | None = None
        self.containerd: ManagedProcess | None = None
        self.kubelet: ManagedProcess | None = None
        self.socket = self.workdir / "containerd.sock"
        self.store = cache_root() / "node" / "containerd"
        self._lock: Any = None
        self._made_bridge = False
        self._host_dirs_before: set[Path] = set()

    # ---- what other parts use

    @property
    def ctr(self) -> list[str]:
        """ctr, inside the node's namespace, against its containerd."""
        return [*self._nsenter(), "ctr", "--address", str(self.socket)]

    def pids(self) -> dict[str, int]:
        return {p.name: p.pid for p in (self.holder, self.containerd, self.kubelet) if p is not None}

    def load_image(self, tag: str, *references: str) -> None:
        node_images.load(tag, references, self.ctr)

    # ---- start

    def start(self, timeout: float = 180.0) -> "RealNode":
        missing = missing_packages()
        if missing:
            raise PlatformError(
                "the real node (REPRISE_NODE=real) needs Debian packages that are not installed: "
                f"apt-get install -y --no-install-recommends {' '.join(missing)}"
            )
        kubelet = ensure_kubelet()
        self._take_store()
        self._host_dirs_before = {d for d in KUBELET_HOST_DIRS if d.exists()}
        networked = self._made_bridge
        if not networked:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir.mkdir(parents=True)
        try:
            env = node_images.podman_env()
            pause = node_images.pause_image(env)
            if not networked:
                self._make_bridge()
            self._make_cgroups()
            self._start_namespace()
            self._start_containerd(pause)
            self.load_image(pause)
            self._start_kubelet(kubelet)
            assert self.kubelet is not None
            processes.wait_until(self.kubelet, self._ready, timeout, f"Ready as node {self.name}", interval=0.5)
        except BaseException:
            self.stop()
            raise
        return self

    def prepare_network(self) -> None:
        """The bridge (with `node_ip`) and its CNI network, before `start()`: so that a service the pods must reach,
        Kafka, can listen on `node_ip` from its start. `stop()` removes it."""
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        try:
            self._make_bridge()
        except BaseException:
            self.stop()
            raise

    def _take_store(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        lock = open(self.store.parent / "containerd.lock", "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            lock.close()
            raise PlatformError(
                f"another real node runs on this machine (pid {holder}); one at a time shares the image store: "
                "stop it with `python -m local_platform down` in its checkout"
            ) from None
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def _make_bridge(self) -> None:
        if subprocess.run(["ip", "link", "show", self.bridge], capture_output=True).returncode == 0:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)  # left by a killed run
        for argv in (
            ["ip", "link", "add", self.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{self.node_ip}/24", "dev", self.bridge],
            ["ip", "link", "set", self.bridge, "up"],
        ):
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise PlatformError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")
            self._made_bridge = True
        conf = self.workdir / "cni" / "net.d"
        conf.mkdir(parents=True)
        network = {
            "cniVersion": "0.4.0",
            "name": "reprise-net",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    # no gateway and no masquerade: nothing changes ip_forward or the iptables ruleset
                    "isGateway": False,
                    "ipMasq": False,
                    "hairpinMode": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [
                            [
                                {
                                    "subnet": f"10.244.{self.subnet_octet}.0/24",
                                    "rangeStart": f"10.244.{self.subnet_octet}.10",
                                    "rangeEnd": f"10.244.{self.subnet_octet}.250",
                                }
                            ]
                        ],
                        "dataDir": str(self.workdir / "cni" / "ipam"),
                    },
                },
            ],
        }
        (conf / "10-reprise.conflist").write_text(json.dumps(network, indent=2))

    def _make_cgroups(self) -> None:
        for hierarchy in CGROUP_HIERARCHIES:
            base = Path("/sys/fs/cgroup") / hierarchy
            if base.is_dir():
                (base / self.cgroup_root.lstrip("/")).mkdir(exist_ok=True)
        cpuset = Path("/sys/fs/cgroup/cpuset")
        for key in ("cpuset.cpus", "cpuset.mems"):
            (cpuset / self.cgroup_root.lstrip("/") / key).write_text((cpuset / key).read_text())

    def _nsenter(self) -> list[str]:
        assert self.holder is not None, "the node's namespace is not started"
        return ["nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--"]

    def _start_namespace(self) -> None:
        self.holder = processes.start(
            "node-namespace",
            ["unshare", "--mount", "--propagation", "private", "sleep", "infinity"],
            self.workdir / "logs" / "namespace.log",
        )
        # unshare has made the namespace once /proc/<pid>/ns/mnt differs from ours.
        processes.wait_until(
            self.holder,
            lambda: os.readlink(f"/proc/{self.holder.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"),  # type: ignore[union-attr]
            10,
            "in a mount namespace of its own",
            interval=0.02,
        )
        tunables = self.workdir / "sysctl"
        tunables.mkdir()
        for key, value in KERNEL_TUNABLES.items():
            held = tunables / key.replace("/", ".")
            held.write_text(value + "\n")
            done = subprocess.run(
                [*self._nsenter(), "mount", "--bind", str(held), f"/proc/sys/{key}"], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise PlatformError(f"masking /proc/sys/{key} in the node's namespace failed: {done.stderr.strip()}")

    def _start_containerd(self, pause: str) -> None:
        state = self.workdir / "containerd"
        config = self.workdir / "containerd.toml"
        config.write_text(
            f"""version = 2
root = "{self.store}"
state = "{state / "state"}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{state / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # root here lacks CAP_SYS_RESOURCE: runc cannot lower a sandbox's oom_score_adj to -998, so clamp it
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which("runc")}"
        Root = "{state / "runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{self.workdir / "cni" / "net.d"}"
"""
        )
        self.containerd = processes.start(
            "containerd",
            [*self._nsenter(), "containerd", "--config", str(config), "--log-level", "warn"],
            self.workdir / "logs" / "containerd.log",
        )
        processes.wait_until(
            self.containerd,
            lambda: subprocess.run([*self.ctr, "version"], capture_output=True).returncode == 0,
            60,
            "serving on its socket",
            interval=0.2,
        )

    def _start_kubelet(self, kubelet: Path) -> None:
        port, healthz = free_port(), free_port()
        config = self.workdir / "kubelet.yaml"
        settings = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # the hybrid layout counts as cgroup v1, which 1.35 refuses by default
            "cgroupDriver": "cgroupfs",  # no systemd here
            "cgroupRoot": self.cgroup_root,
            "cgroupsPerQOS": True,
            "enforceNodeAllocatable": ["pods"],
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.node_ip,
            "port": port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": healthz,
            # The API server reaches it for logs and exec without a client certificate of its own: local only.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "makeIPTablesUtilChains": False,
            "protectKernelDefaults": False,  # its three sysctls are masked in the namespace (KERNEL_TUNABLES)
            "failSwapOn": False,
            "podLogsDir": str(self.workdir / "pod-logs"),
            "volumePluginDir": str(self.workdir / "volume-plugins"),
            "resolvConf": "/etc/resolv.conf",
            "clusterDomain": "cluster.local",
            "serializeImagePulls": False,
            "evictionHard": {"memory.available": "200Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
            "imageGCHighThresholdPercent": 99,
            "imageGCLowThresholdPercent": 98,
            "registerNode": True,
            "rotateCertificates": False,
            "syncFrequency": "10s",
            "fileCheckFrequency": "5s",
        }
        config.write_text(json.dumps(settings, indent=2))
        self.healthz = healthz
        self.kubelet = processes.start(
            "kubelet",
            [
                *self._nsenter(),
                str(kubelet),
                f"--config={config}",
                f"--kubeconfig={self.kubeconfig}",
                f"--root-dir={self.workdir / 'kubelet'}",
                f"--cert-dir={self.workdir / 'kubelet-pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.node_ip}",
                "--v=1",
            ],
            self.workdir / "logs" / "kubelet.log",
        )

    def _ready(self) -> bool:
        node = self._kubectl_json("get", "node", self.name)
        if node is None:
            return False
        return any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions", [])
        )

    def _kubectl_json(self, *args: str) -> dict | None:
        from .toolchain import kubectl_path

        done = subprocess.run(
            [str(kubectl_path()), f"--kubeconfig={self.kubeconfig}", *args, "-o", "json"],
            capture_output=True,
            text=True,
        )
        return json.loads(done.stdout) if done.returncode == 0 else None

    # ---- stop

    def stop(self) -> None:
        """Remove every process, mount, interface, cgroup and host file this node made."""
        try:
            if self.kubelet is not None:
                self.kubelet.stop(timeout=30)
            if self.containerd is not None and self.containerd.alive():
                self._remove_containers()
                self.containerd.stop(timeout=30)
            self._stop_namespace_members()
            if self.holder is not None:
                self.holder.stop(timeout=10)  # the last process of the namespace: its mounts go with it
        finally:
            self.kubelet = self.containerd = self.holder = None
            if self._made_bridge:
                subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
                self._made_bridge = False
            self._remove_cgroups()
            self._remove_host_files()
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _remove_containers(self) -> None:
        """Kill the pods' tasks, so that their shims exit with them."""
        listed = subprocess.run([*self.ctr, "-n", "k8s.io", "tasks", "ls", "-q"], capture_output=True, text=True)
        for task in listed.stdout.split():
            subprocess.run([*self.ctr, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", task], capture_output=True)
        for task in listed.stdout.split():
            subprocess.run([*self.ctr, "-n", "k8s.io", "tasks", "rm", "-f", task], capture_output=True)
        containers = subprocess.run(
            [*self.ctr, "-n", "k8s.io", "containers", "ls", "-q"], capture_output=True, text=True
        )
        for container in containers.stdout.split():
            subprocess.run([*self.ctr, "-n", "k8s.io", "containers", "rm", container], capture_output=True)

    def _namespace_members(self) -> list[int]:
        """The PIDs in the node's mount namespace but its holder (shims, pods' processes left behind)."""
        if self.holder is None or not self.holder.alive():
            return []
        try:
            ours = os.readlink(f"/proc/{self.holder.pid}/ns/mnt")
        except OSError:
            return []
        members = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.holder.pid:
                continue
            try:
                if os.readlink(entry / "ns" / "mnt") == ours:
                    members.append(int(entry.name))
            except OSError:
                continue
        return members

    def _pod_processes(self) -> list[int]:
        """The PIDs in the node's cgroup tree: containers' processes, which have mount namespaces of their own and
        outlive a containerd that was killed before it could stop them."""
        top = Path("/sys/fs/cgroup/pids") / self.cgroup_root.lstrip("/")
        pids: set[int] = set()
        for procs in top.rglob("cgroup.procs") if top.is_dir() else []:
            try:
                pids.update(int(line) for line in procs.read_text().split())
            except OSError:
                continue
        return sorted(pids)

    def _stop_namespace_members(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            members = self._namespace_members() + self._pod_processes()
            for pid in members:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while (self._namespace_members() or self._pod_processes()) and time.monotonic() < deadline:
                time.sleep(0.1)

    def _remove_cgroups(self) -> None:
        for hierarchy in CGROUP_HIERARCHIES:
            top = Path("/sys/fs/cgroup") / hierarchy / self.cgroup_root.lstrip("/")
            if not top.is_dir():
                continue
            for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                try:
                    path.rmdir()
                except OSError:
                    pass
            try:
                top.rmdir()
            except OSError:
                pass

    def _remove_host_files(self) -> None:
        """What the kubelet and containerd write outside their folders (hard-coded paths), if this node made it."""
        Path("/var/lib/kubelet/device-plugins/kubelet.sock").unlink(missing_ok=True)
        # libcni's result cache: one file per sandbox and network, kept when a sandbox goes without a CNI DEL (its
        # task killed at stop). `reprise-net` is this node's network; containerd's own loopback one shares the id.
        results = Path("/var/lib/cni/results")
        for cached in results.glob("reprise-net-*") if results.is_dir() else []:
            sandbox = cached.name.split("-")[2]
            cached.unlink(missing_ok=True)
            (results / f"cni-loopback-{sandbox}-lo").unlink(missing_ok=True)
        for folder in KUBELET_HOST_DIRS:  # deepest first
            if folder not in self._host_dirs_before:
                try:
                    folder.rmdir()
                except OSError:
                    pass  # not empty: another node's
        for netns in Path("/run/netns").glob("cni-*") if Path("/run/netns").is_dir() else []:
            # Empty files on the host (the mounts were in the node's namespace); another node's are mounted.
            if not os.path.ismount(netns):
                netns.unlink(missing_ok=True)
