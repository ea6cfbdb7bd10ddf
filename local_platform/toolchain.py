"""The Go-built binaries of the local platform: etcd, the Kubernetes control plane, kubectl, helm, the
Kubeflow Spark operator (controller and webhook in one binary), and Prometheus with promtool (the chart's
alerts are unit-tested by promtool and evaluated by a real Prometheus on the platform).

Each is built once per machine by a script in `local_platform/build/` from the Go module proxy into
`<cache>/<component>-<version>/bin/` (see `cache`), keyed by version; later calls find the binaries and
return at once. Two processes asking at once are serialised by a lock file, so a test session and
`make run` never build the same thing twice. A failure is a PlatformError of one line naming the log.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_root, component_dir
from .errors import PlatformError
from .spark_operator import SPARK_OPERATOR_VERSION

KUBE_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.16"  # kube-apiserver 1.35 wants etcd 3.5.13+; 3.6 is what it is tested with
HELM_VERSION = "v3.20.2"  # built against k8s.io/client-go v0.35, the same minor as the control plane
PROMETHEUS_VERSION = "v0.316.0"  # Prometheus 3.x's Go module tag; the trial built it with `-tags remove_all_sd`
GO_MINIMUM = (1, 26)  # the `go` directive of prometheus v0.316.0 (1.26.7; kubernetes v1.35 and helm v3.20 need 1.25)

BUILD_DIR = Path(__file__).resolve().parent / "build"


@dataclass(frozen=True)
class KubeBinaries:
    apiserver: Path
    controller_manager: Path
    scheduler: Path
    kubectl: Path


@dataclass(frozen=True)
class Component:
    """One thing built by one script: its cache folder, version variable and binaries."""

    name: str
    version: str
    script: str
    version_env: str
    binaries: tuple[str, ...]

    @property
    def directory(self) -> Path:
        return component_dir(self.name, self.version)

    @property
    def log_path(self) -> Path:
        return cache_root() / f"{self.name}-build.log"

    def paths(self) -> list[Path]:
        return [self.directory / "bin" / b for b in self.binaries]

    def built(self) -> bool:
        return all(p.is_file() and os.access(p, os.X_OK) for p in self.paths())


KUBE = Component(
    "kube",
    KUBE_VERSION,
    "kube.sh",
    "KUBE_VERSION",
    ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
)
ETCD = Component("etcd", ETCD_VERSION, "etcd.sh", "ETCD_VERSION", ("etcd",))
HELM = Component("helm", HELM_VERSION, "helm.sh", "HELM_VERSION", ("helm",))
SPARK_OPERATOR = Component(
    "spark-operator", SPARK_OPERATOR_VERSION, "spark-operator.sh", "SPARK_OPERATOR_VERSION", ("spark-operator",)
)
PROMETHEUS = Component(
    "prometheus", PROMETHEUS_VERSION, "prometheus.sh", "PROMETHEUS_VERSION", ("promtool", "prometheus")
)
COMPONENTS = (ETCD, KUBE, HELM, SPARK_OPERATOR, PROMETHEUS)
#: Only for the real node (REPRISE_NODE=real), so not in COMPONENTS: `make platform` does not build it by default.
#: kube.sh builds it as it builds the control plane (the binaries are passed to the script), in a directory of its own.
KUBELET = Component("kubelet", KUBE_VERSION, "kube.sh", "KUBE_VERSION", ("kubelet",))


def go_problem() -> str | None:
    """The one-line problem with the Go toolchain, or None when it can build these versions."""
    go = shutil.which("go")
    fix = "install Go 1.26 or newer (https://go.dev/doc/install) and put it on PATH"
    if go is None:
        return f"go not found on PATH, needed once to build etcd, Kubernetes, helm, the Spark operator and Prometheus: {fix}"
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`go env GOVERSION` failed ({exc}): {fix}"
    m = re.match(r"go(\d+)\.(\d+)", out.strip())
    if not m or (int(m.group(1)), int(m.group(2))) < GO_MINIMUM:
        return f"{out.strip() or 'an unknown Go'} is too old to build Kubernetes {KUBE_VERSION} and Prometheus {PROMETHEUS_VERSION}: {fix}"
    return None


def ensure(component: Component, announce=None) -> list[Path]:
    """The component's binaries, building them first if the cache does not have them.

    `announce(message)` is told when a build starts and how long it took (the CLI prints it).
    """
    if component.built():
        return component.paths()
    problem = go_problem()
    if problem:
        raise PlatformError(problem)
    lock_path = cache_root() / f"{component.name}-{component.version}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now: wait for it
        if component.built():
            return component.paths()
        if announce:
            announce(f"building {component.name} {component.version} (once per machine; log: {component.log_path})")
        started = time.monotonic()
        env = dict(os.environ, **{component.version_env: component.version})
        with open(component.log_path, "w") as log:
            rc = subprocess.run(
                # Every script takes the output folder; kube.sh also the binaries to build (the others ignore them).
                ["bash", str(BUILD_DIR / component.script), str(component.directory), *component.binaries],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            ).returncode
            log.write(f"rc={rc}\n")
        if rc != 0 or not component.built():
            raise PlatformError(
                f"building {component.name} {component.version} failed (exit {rc}): "
                f"{_last_error(component.log_path)}; see {component.log_path}"
            )
        if announce:
            announce(f"built {component.name} {component.version} in {time.monotonic() - started:.0f}s")
    return component.paths()


def _last_error(log: Path) -> str:
    """The most telling line of a failed Go build log, for the one-line message."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    for line in reversed(lines):
        if re.search(r"error|cannot|fail|not found|no such", line, re.I) and not line.startswith("rc="):
            return line[:200]
    return lines[-2][:200] if len(lines) >= 2 else "no output"


def ensure_kube_binaries(announce=None) -> KubeBinaries:
    apiserver, controller_manager, scheduler, kubectl = ensure(KUBE, announce)
    return KubeBinaries(apiserver, controller_manager, scheduler, kubectl)


def ensure_etcd(announce=None) -> Path:
    return ensure(ETCD, announce)[0]


def ensure_helm(announce=None) -> Path:
    return ensure(HELM, announce)[0]


def kubectl_path() -> Path:
    """Where kubectl is (or will be) cached; `ensure_kube_binaries()` builds it."""
    return KUBE.directory / "bin" / "kubectl"


def ensure_kubelet(announce=None) -> Path:
    return ensure(KUBELET, announce)[0]


def ensure_spark_operator(announce=None) -> Path:
    return ensure(SPARK_OPERATOR, announce)[0]


def helm_path() -> Path:
    return HELM.directory / "bin" / "helm"


def ensure_promtool(announce=None) -> Path:
    """promtool, without waiting for the server's build when promtool is already there (the build script makes
    promtool first): the chart's unit tests need only promtool."""
    promtool = PROMETHEUS.directory / "bin" / "promtool"
    if promtool.is_file() and os.access(promtool, os.X_OK):
        return promtool
    return ensure(PROMETHEUS, announce)[0]


def ensure_prometheus(announce=None) -> Path:
    return ensure(PROMETHEUS, announce)[1]
