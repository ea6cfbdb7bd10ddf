"""The real SparkApplication CRD (Kubeflow Spark Operator, `sparkoperator.k8s.io/v1beta2`), from the Go module proxy.

LakeReplay creates SparkApplications; the test API server must know the real resource, not a copy of it
written by hand. `ensure_sparkapplication_crd()` downloads the operator's Go module
(`go mod download -json github.com/kubeflow/spark-operator/v2@<tag>`) into its own module cache under
`<cache>/spark-operator-<tag>/` once, and returns the path of the CRD the operator's own `make manifests`
generates from its API types: `config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml`.

Only tags from v2.2.0 on carry the `/v2` module path; v2.2.0 itself is refused by the proxy
("not available"), so the newest release it serves is pinned. The same release's controller and webhook are
built by `toolchain.SPARK_OPERATOR` and run by `spark_controller`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from .cache import component_dir
from .errors import PlatformError

MODULE = "github.com/kubeflow/spark-operator/v2"
SPARK_OPERATOR_VERSION = "v2.5.0"
CRD_RELATIVE = Path("config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml")
GROUP = "sparkoperator.k8s.io"
VERSION = "v1beta2"
PLURAL = "sparkapplications"
KIND = "SparkApplication"

_GO_TIMEOUT = 900.0


def ensure_sparkapplication_crd(version: str = SPARK_OPERATOR_VERSION) -> Path:
    """The path of the real SparkApplication CRD YAML of the Spark operator at `version`, downloaded once."""
    home = component_dir("spark-operator", version)
    pointer = home / "module-dir"

    def cached() -> Path | None:
        try:
            crd = Path(pointer.read_text().strip()) / CRD_RELATIVE
        except OSError:
            return None
        return crd if crd.is_file() else None

    found = cached()
    if found is not None:
        return found
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached()
        if found is not None:
            return found
        module_dir = _download(version, home)
        crd = module_dir / CRD_RELATIVE
        if not crd.is_file():
            raise PlatformError(
                f"{MODULE}@{version} has no {CRD_RELATIVE}: pin a v2 release that has it "
                f"(SPARK_OPERATOR_VERSION in {__file__})"
            )
        pointer.write_text(f"{module_dir}\n")
        return crd


def _download(version: str, home: Path) -> Path:
    go = shutil.which("go")
    if go is None:
        raise PlatformError(
            "go not found on PATH, needed once to fetch the Spark operator's CRD from the Go "
            "module proxy: install Go 1.25 or newer and put it on PATH"
        )
    env = dict(os.environ)
    # A module cache of its own, so the download is keyed by version and a fresh clone finds it again.
    env.update(GOMODCACHE=str(home / "gomod"), GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GO111MODULE="on")
    log = home / "go-download.log"
    argv = [go, "mod", "download", "-json", f"{MODULE}@{version}"]
    try:
        # Run in the cache folder: a go.mod in the caller's working directory must not take part.
        done = subprocess.run(
            argv, cwd=home, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=_GO_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise PlatformError(
            f"`go mod download {MODULE}@{version}` took over {_GO_TIMEOUT:.0f}s: check access to "
            f"the Go module proxy (GOPROXY) and try again"
        ) from None
    log.write_bytes(done.stdout + b"\n" + done.stderr)
    try:
        info = json.loads(done.stdout.decode() or "{}")
    except ValueError:
        info = {}
    if done.returncode != 0 or info.get("Error") or not info.get("Dir"):
        reason = info.get("Error") or done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        if isinstance(reason, list):
            reason = reason[0]
        raise PlatformError(
            f"`go mod download {MODULE}@{version}` failed: {reason}; check access to the Go module "
            f"proxy (GOPROXY) or pin another v2 release; see {log}"
        )
    return Path(info["Dir"])


def install_sparkapplication_crd(api_client: Any, crd: Path | None = None, timeout: float = 60.0) -> None:
    """Create (or update) the real SparkApplication CRD on the API server of `api_client` and wait until
    it is Established, so SparkApplications can be created right after."""
    import yaml
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    body = yaml.safe_load((crd or ensure_sparkapplication_crd()).read_text())
    extensions = client.ApiextensionsV1Api(api_client)
    name = body["metadata"]["name"]
    try:
        extensions.create_custom_resource_definition(body)
    except ApiException as exc:
        if exc.status != 409:
            raise PlatformError(
                f"the API server refused the SparkApplication CRD: {exc.reason} ({exc.status})"
            ) from None
        existing = extensions.read_custom_resource_definition(name)
        body["metadata"]["resourceVersion"] = existing.metadata.resource_version
        extensions.replace_custom_resource_definition(name, body)
    deadline = time.monotonic() + timeout
    while True:
        conditions = extensions.read_custom_resource_definition(name).status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise PlatformError(f"the SparkApplication CRD was not Established within {timeout:.0f}s")
        time.sleep(0.2)


if __name__ == "__main__":
    print(ensure_sparkapplication_crd())
