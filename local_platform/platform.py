"""The whole local platform as one thing: a Kafka broker, the Kubernetes control plane and a node, which is the
node agent (the default) or, with `node="real"`, a kubelet and containerd (`real_node.RealNode`).

`LocalPlatform(workdir).up()` starts them (Kafka and the control plane at the same time, then the node), and
records what runs in a state file (`<repo>/.reprise/platform.json`: PIDs with their start
times, ports, kubeconfig, bootstrap) so that `python -m local_platform down` or `status`, run from another
process, can find and stop a platform by PID. `down()` stops everything in reverse order.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .control_plane import ControlPlane
from .errors import PlatformError
from .kafka_tenants import MultiTenant
from .node_agent import NodeAgent, preload_client, start_ticks
from .real_node import RealNode
from .toolchain import helm_path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKDIR = REPO_ROOT / ".reprise" / "platform"
STATE_FILE = REPO_ROOT / ".reprise" / "platform.json"


#: On the local platform every Kafka address in the namespace `kafka` (the examples' `kafka-bootstrap.kafka:9092`)
#: is the local broker, so `kubectl apply -f examples/...` works unchanged (reprise_operator.shared.bootstrap_aliases).
IN_CLUSTER_KAFKA = "*.kafka:*"
#: The nodes a platform can run: the node agent (pods as local processes) or the real node (containers).
NODES = ("agent", "real")


class LocalPlatform:
    """Kafka + Kubernetes on loopback, all under `workdir` (replaced at each `up()`)."""

    def __init__(
        self,
        workdir: Path | str = DEFAULT_WORKDIR,
        *,
        state_file: Path | str | None = STATE_FILE,
        kafka: bool = True,
        multi_tenant: MultiTenant | None = None,
        node: str = "agent",
    ) -> None:
        if node not in NODES:
            raise PlatformError(f"unknown node {node!r}: choose one of {', '.join(NODES)} (NODE= of `make run`)")
        self.workdir = Path(workdir).resolve()
        self.state_file = Path(state_file) if state_file else None
        self.with_kafka = kafka
        self.multi_tenant = multi_tenant
        self.control_plane = ControlPlane(self.workdir / "kube")
        self.node = node
        self.agent: Any = (
            NodeAgent(self.control_plane.kubeconfig, self.workdir / "node-agent") if node == "agent" else None
        )
        self.real_node: Any = RealNode(self.control_plane.kubeconfig, self.workdir / "node") if node == "real" else None
        self.kafka: Any = None
        self.started_in = 0.0
        self._recorded: dict[str, int] = {}
        self._urls: dict[str, str] = {}

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    @property
    def bootstrap(self) -> str | None:
        return self.kafka.bootstrap if self.kafka is not None else None

    @property
    def kafka_bootstrap_aliases(self) -> str | None:
        """REPRISE_KAFKA_BOOTSTRAP_ALIASES for this platform's operator: every Kafka name of the namespace `kafka`
        is the local broker. Also in the state file, where `kubectl reprise plan` reads it (kubectl_reprise.kafka_address)."""
        if not self.bootstrap:
            return None
        # On the real node the pods the operator makes are containers on the bridge: the address they can reach.
        return f"{IN_CLUSTER_KAFKA}={self.kafka.pod_bootstrap or self.bootstrap}"

    @property
    def kubectl(self) -> Path:
        return self.control_plane.kubectl

    @property
    def helm(self) -> Path:
        return helm_path()

    def up(self) -> "LocalPlatform":
        if self.state_file is not None:
            running = read_state(self.state_file)
            if running is not None and _alive(running.get("owner")):
                raise PlatformError(
                    f"a local platform is already running (pid {running['owner'][0]}, kubeconfig {running.get('kubeconfig')}): "
                    "stop it with `python -m local_platform down` first"
                )
        began = time.monotonic()
        for stale in ("kube", "node-agent", "kafka"):
            shutil.rmtree(self.workdir / stale, ignore_errors=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            kafka_error: list[BaseException] = []
            kafka_thread = None
            if self.with_kafka:
                from .kafka_broker import KafkaBroker

                pod_host = None
                if self.real_node is not None:  # the node's pods reach Kafka on the bridge's address of the host
                    self.real_node.prepare_network()
                    pod_host = self.real_node.node_ip
                self.kafka = KafkaBroker(self.workdir / "kafka", multi_tenant=self.multi_tenant, pod_host=pod_host)

                def start_kafka() -> None:
                    try:
                        self.kafka.start()
                    except BaseException as exc:  # reported below, from the calling thread
                        kafka_error.append(exc)

                # The JVM and the API server start in parallel: together they take as long as the slower one.
                kafka_thread = threading.Thread(target=start_kafka, name="kafka-start", daemon=True)
                kafka_thread.start()
            preload_client()  # the kubernetes client's slow import overlaps the control plane's start
            self.control_plane.start()
            if self.agent is not None:
                self.agent.start()
            else:
                self.real_node.start()
            if kafka_thread is not None:
                kafka_thread.join()
                if kafka_error:
                    raise kafka_error[0]
        except BaseException:
            self.down()
            raise
        self.started_in = time.monotonic() - began
        self._write_state()
        return self

    def down(self) -> None:
        """Stop everything this object started, by PID, the node first and Kafka last."""
        try:
            if self.agent is not None:
                self.agent.stop()
            if self.real_node is not None:
                self.real_node.stop()
        finally:
            try:
                self.control_plane.stop()
            finally:
                if self.kafka is not None:
                    self.kafka.stop()
                if self.state_file is not None:
                    state = read_state(self.state_file)
                    if state is not None and state.get("owner", [None])[0] == os.getpid():
                        self.state_file.unlink(missing_ok=True)

    def __enter__(self) -> "LocalPlatform":
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def record_process(self, name: str, pid: int) -> None:
        """Record a process started on this platform (the Spark operator's), so `down` stops it too."""
        self._recorded[name] = pid
        self._write_state()

    def record_url(self, name: str, url: str) -> None:
        """Record where a service of this platform answers (Prometheus's), for the demos to print."""
        self._urls[name] = url
        self._write_state()

    def state(self) -> dict[str, Any]:
        procs = {name: [pid, start_ticks(pid)] for name, pid in self.control_plane.pids().items()}
        procs.update({name: [pid, start_ticks(pid)] for name, pid in self._recorded.items()})
        if self.real_node is not None:  # if this process dies, `down` stops them by PID (kubelet first)
            procs.update(
                {f"real-node {n}": [pid, start_ticks(pid)] for n, pid in reversed(self.real_node.pids().items())}
            )
        if self.kafka is not None and self.kafka.pid:
            procs["kafka"] = [self.kafka.pid, start_ticks(self.kafka.pid)]
        return {
            "owner": [os.getpid(), start_ticks(os.getpid())],
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "workdir": str(self.workdir),
            "kubeconfig": str(self.kubeconfig),
            "api_server": self.control_plane.server,
            "bootstrap": self.bootstrap,
            "sasl_bootstrap": self.kafka.sasl_bootstrap if self.kafka is not None else None,
            # Where the real node's pods reach Kafka (None on the node agent, whose pods share the host's loopback).
            "pod_bootstrap": self.kafka.pod_bootstrap if self.kafka is not None else None,
            "kafka_bootstrap_aliases": self.kafka_bootstrap_aliases,
            "node": self.agent.node_name if self.agent is not None else self.real_node.name,
            "node_kind": self.node,
            # ctr reaches the real node's containerd through the namespace holder (docs/local-platform.md).
            "node_ctr": self.real_node.ctr if self.real_node is not None else None,
            "processes": procs,
            "container_pid_file": str(self.agent.workdir / "processes.json") if self.agent is not None else "",
            "kubectl": str(self.kubectl),
            "helm": str(self.helm),
            "urls": dict(self._urls),
        }

    def _write_state(self) -> None:
        if self.state_file is None:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state(), indent=2))
        tmp.replace(self.state_file)


def read_state(state_file: Path = STATE_FILE) -> dict[str, Any] | None:
    try:
        return json.loads(Path(state_file).read_text())
    except (OSError, ValueError):
        return None


def _alive(entry: Any) -> bool:
    """Whether [pid, start ticks] is still that same process (a recycled PID is not)."""
    if not entry:
        return False
    pid, ticks = entry[0], entry[1] if len(entry) > 1 else None
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return ticks is None or start_ticks(pid) == ticks


def _signal(entry: Any, sig: int) -> None:
    if not _alive(entry):
        return
    try:
        os.killpg(entry[0], sig)  # each was started in its own session: its group has its children
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(entry[0], sig)
        except ProcessLookupError:
            pass


def _wait_gone(entries: list[Any], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(e) for e in entries):
            return True
        time.sleep(0.1)
    return not any(_alive(e) for e in entries)


def stop_recorded(state_file: Path = STATE_FILE, timeout: float = 60.0) -> list[str]:
    """Stop a platform started by another process, from its state file; returns what was stopped.

    The owner (`python -m local_platform up`/`run-operator`) gets SIGTERM and tears down in order; any
    process it leaves (it may have been SIGKILLed) is then stopped by its recorded PID, checked against
    its start time so a recycled PID is never signalled.
    """
    state = read_state(state_file)
    if state is None:
        return []
    stopped = []
    owner = state.get("owner")
    if _alive(owner) and owner[0] != os.getpid():
        os.kill(owner[0], signal.SIGTERM)
        if _wait_gone([owner], timeout):
            stopped.append(f"platform process {owner[0]}")
        else:
            raise PlatformError(
                f"the platform process {owner[0]} did not stop within {timeout:.0f}s; kill it with `kill -9 {owner[0]}`"
            )
    leftovers: list[tuple[str, Any]] = []
    try:
        containers = json.loads(Path(state.get("container_pid_file", "")).read_text()).get("pids", [])
        leftovers += [("container process", e) for e in containers]
    except (OSError, ValueError):
        pass
    # Reverse start order: the scheduler and controller manager before the API server, etcd and Kafka last.
    order = ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "kafka"]
    procs = state.get("processes", {})
    leftovers += [(name, entry) for name, entry in procs.items() if name not in order]  # recorded ones first
    leftovers += [(name, procs[name]) for name in order if name in procs]
    for name, entry in leftovers:
        if _alive(entry):
            _signal(entry, signal.SIGTERM)
            if not _wait_gone([entry], 15):
                _signal(entry, signal.SIGKILL)
                _wait_gone([entry], 5)
            stopped.append(f"{name} (pid {entry[0]})")
    Path(state_file).unlink(missing_ok=True)
    return stopped


def status(state_file: Path = STATE_FILE) -> dict[str, Any] | None:
    """The recorded platform with each process marked alive or not, or None when none is recorded."""
    state = read_state(state_file)
    if state is None:
        return None
    state["owner_alive"] = _alive(state.get("owner"))
    state["alive"] = {name: _alive(entry) for name, entry in state.get("processes", {}).items()}
    return state
