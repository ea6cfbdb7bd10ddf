"""A real schema registry on the local platform: Apicurio Registry, serving the Confluent-compatible API.

Apicurio's finished Quarkus app is on Maven Central as `io.apicurio:apicurio-registry-app:<version>`, classifier
`all`, type `tar.gz` (../shared/trials/schema-registry-and-prometheus.md). `ensure_registry` fetches it once with
Maven into the cache's Maven repository and unpacks it beside it; `SchemaRegistry` runs it with a Java 21+ JDK
(Java 17, the machine's default, cannot load its classes), storing in H2 in memory (every start is empty, as
tests want), HTTP and management ports on loopback. Its global compatibility is set to BACKWARD at start,
Confluent's default (Apicurio's is NONE). Started by `make run` and, lazily, by the tests that need it
(`tests/fixtures/schema_registry.py`); stopped by its PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .cache import component_dir, maven_artifact
from .errors import PlatformError
from .processes import free_port

VERSION = "3.3.3"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
#: The Confluent-compatible API, under the HTTP port.
CCOMPAT_PATH = "/apis/ccompat/v7"
#: Where JDKs live on these machines; the first of version 21 or later is used unless REPRISE_REGISTRY_JAVA_HOME
#: names one.
JVM_DIRS = (Path("/usr/lib/jvm"),)
MIN_JAVA = 21
#: Quarkus started in 26 to 56 s under load in the trial; a loaded CI machine gets more than twice that.
START_TIMEOUT_S = 180.0
_HEAP = ("-Xmx256m", "-XX:+UseSerialGC")


def _java_version(home: Path) -> int:
    release = home / "release"
    try:
        for line in release.read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                return int(line.split("=", 1)[1].strip().strip('"').split(".")[0])
    except (OSError, ValueError):
        return 0
    return 0


def registry_java() -> Path:
    """The `java` of a JDK that can run the registry: `$REPRISE_REGISTRY_JAVA_HOME`, else the newest JDK of
    version 21 or later under /usr/lib/jvm."""
    explicit = os.environ.get("REPRISE_REGISTRY_JAVA_HOME")
    homes = [Path(explicit)] if explicit else sorted(p for d in JVM_DIRS if d.is_dir() for p in d.iterdir())
    found = [(v, h) for h in homes if (v := _java_version(h)) >= MIN_JAVA and (h / "bin" / "java").is_file()]
    if not found:
        raise PlatformError(
            f"the schema registry needs Java {MIN_JAVA} or later and none was found under "
            f"{', '.join(map(str, JVM_DIRS))}: install one (e.g. a Temurin 25 JDK) or set REPRISE_REGISTRY_JAVA_HOME"
        )
    return max(found)[1] / "bin" / "java"


def ensure_registry() -> Path:
    """The unpacked app (the folder holding `quarkus-run.jar`), fetched and unpacked the first time only."""
    home = component_dir("apicurio-registry", VERSION)
    app = home / "app"
    if (app / "quarkus-run.jar").is_file():
        return app
    archive = maven_artifact(
        ARTIFACT,
        f"io/apicurio/apicurio-registry-app/{VERSION}/apicurio-registry-app-{VERSION}-all.tar.gz",
        home / "mvn.log",
    )
    staging = home / "app.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    # The archive holds the quarkus-app layout, possibly under one top folder.
    runner = next(staging.rglob("quarkus-run.jar"), None)
    if runner is None:
        raise PlatformError(f"{archive} holds no quarkus-run.jar: delete it and run again")
    shutil.rmtree(app, ignore_errors=True)
    runner.parent.rename(app)
    shutil.rmtree(staging, ignore_errors=True)
    return app


class SchemaRegistry:
    """Apicurio as a child process on loopback (`url` is the ccompat base a client is given)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.port = 0
        self.management_port = 0
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL: what `spec.schemaRegistry.url` names."""
        return f"{self.base}{CCOMPAT_PATH}"

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    @property
    def log_path(self) -> Path:
        return self.workdir / "schema-registry.log"

    def start(self, timeout: float = START_TIMEOUT_S, *, port: int | None = None) -> "SchemaRegistry":
        """Start (on `port`, to come back where clients expect it after a stop) and wait until ready."""
        app = ensure_registry()
        java = registry_java()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.management_port = free_port()
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                [
                    str(java),
                    *_HEAP,
                    "-Dquarkus.http.host=127.0.0.1",
                    f"-Dquarkus.http.port={self.port}",
                    "-Dquarkus.management.host=127.0.0.1",
                    f"-Dquarkus.management.port={self.management_port}",
                    "-jar",
                    str(app / "quarkus-run.jar"),
                ],
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.popen.poll() is not None:
                raise PlatformError(f"the schema registry exited with {self.popen.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise PlatformError(
                    f"the schema registry was not ready within {timeout:.0f}s (Quarkus starts slowly on a loaded "
                    f"machine); see {self.log_path}"
                )
            time.sleep(0.5)
        # Confluent's default, so that a registration a Confluent registry refuses is refused here too.
        self.request("PUT", "/config", {"compatibility": "BACKWARD"})
        return self

    def ready(self) -> bool:
        """The management interface's readiness, then the ccompat API itself (ready can precede routing)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.management_port}/health/ready", timeout=2) as r:
                if r.status != 200:
                    return False
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call of the ccompat API (`path` under `/apis/ccompat/v7`); its JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise PlatformError(f"schema registry {method} {path}: HTTP {exc.code} {exc.read()[:300]!r}") from None

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register a schema version under `subject` (BACKWARD-checked); its id."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        return int(self.request("POST", f"/subjects/{subject}/versions", body)["id"])
