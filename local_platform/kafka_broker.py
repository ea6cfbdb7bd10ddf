"""The real Kafka broker of the local platform: its classpath from Maven Central, and one KRaft node on loopback.

`ensure_kafka()` resolves Apache Kafka's jars with Maven (`local_platform/kafka/pom.xml`) into the cache,
once per version of that pom, and records a class-data-sharing archive of a broker run next to them (the
JVM then maps Kafka's classes instead of loading and verifying them: a start takes about a third of the
time). `KafkaBroker` runs one node that is both broker and controller, in a work dir of its own, on free
loopback ports that it keeps across `restart()` so clients and tests can keep their bootstrap address
while the broker goes away and comes back.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import logging
import re
import shutil
import signal
import string
import subprocess
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import processes
from .cache import cache_root, component_dir
from .errors import PlatformError
from .kafka_tenants import MultiTenant
from .prerequisites import missing

KAFKA_DIR = Path(__file__).resolve().parent / "kafka"
POM = KAFKA_DIR / "pom.xml"
SERVER_TEMPLATE = KAFKA_DIR / "server.properties"
LOG4J_CONFIG = KAFKA_DIR / "log4j2.properties"

NODE_ID = 1
# Resolution is skipped when this stamp holds the digest of the pom that produced `libs/`.
_STAMP = ".resolved"
_MAVEN_TIMEOUT = 1800.0

# librdkafka reports every refused connection while the broker starts or restarts; those go to logging
# (quiet unless a test turns it on) instead of stderr.
_client_log = logging.getLogger("local_platform.kafka.client")
_log = logging.getLogger(__name__)


def kafka_version() -> str:
    """The Kafka version the pom pins (`kafka.version`): the one place it is set."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = ET.parse(POM).getroot().find("m:properties/m:kafka.version", ns)
    if node is None or not (node.text or "").strip():
        raise PlatformError(f"{POM} has no <kafka.version> property: restore it from git")
    return node.text.strip()


def ensure_kafka() -> Path:
    """The folder of Kafka's runtime jars (a classpath), resolved with Maven the first time only.

    The first call on a machine (per pom and per JDK) also records the broker's class archive, which
    runs a broker once (some seconds); a failure there only costs later starts their speed.
    """
    for tool in ("java", "mvn"):
        problem = missing(tool)
        if problem:
            raise PlatformError(problem)
    version = kafka_version()
    pom = POM.read_bytes()
    digest = hashlib.sha256(pom).hexdigest()[:16]
    home = component_dir("kafka", version)
    libs = home / "libs"
    stamp = home / _STAMP

    def done() -> bool:
        resolved = libs.is_dir() and stamp.is_file() and stamp.read_text().strip() == digest
        return resolved and _archive_settled(libs)

    if done():
        return libs
    # Two sessions (the CLI and a test run) may build at once: one does it, the other waits and reuses it.
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (libs.is_dir() and stamp.is_file() and stamp.read_text().strip() == digest):
            stamp.unlink(missing_ok=True)
            shutil.rmtree(home / "cds", ignore_errors=True)  # archives of the old classpath no longer match
            _resolve(version, pom, home, libs)
            stamp.write_text(digest + "\n")
        if not _archive_settled(libs):
            _record_class_archive(libs)
    return libs


def class_archive(libs: Path) -> Path:
    """Where the broker's class-data-sharing archive for `libs` and the `java` on PATH lives (may not exist).

    Keyed by the JDK's install (path, size and time of libjvm) because an archive only fits the JVM
    build that wrote it; the JVM checks that too and just starts slower on a mismatch.
    """
    java = Path(shutil.which("java") or "java").resolve()
    jdk = java.parent.parent
    libjvm = next(iter(sorted(jdk.glob("lib/*/libjvm.so"))), java)
    st = libjvm.stat() if libjvm.exists() else None
    key = hashlib.sha256(f"{jdk}|{st and st.st_size}|{st and st.st_mtime_ns}".encode()).hexdigest()[:12]
    return libs.parent / "cds" / f"broker-{key}.jsa"


def _archive_settled(libs: Path) -> bool:
    archive = class_archive(libs)
    return archive.is_file() or archive.with_suffix(".failed").is_file()


def _record_class_archive(libs: Path) -> None:
    """Run a broker once with -XX:ArchiveClassesAtExit, through the produce, fetch and group paths."""
    archive = class_archive(libs)
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="kafka-cds-", dir=archive.parent))
    broker = KafkaBroker(
        workdir, libs=libs, use_class_archive=False, jvm_options=[f"-XX:ArchiveClassesAtExit={partial}"]
    )
    try:
        broker.start(timeout=300)
        _exercise(broker)
        broker.stop()  # the JVM writes the archive as it exits
        if not partial.is_file():
            raise PlatformError(f"the JVM wrote no class archive; see {broker.log_path}")
        partial.rename(archive)
    except Exception as exc:  # noqa: BLE001 - the archive is an optimisation, never a reason to fail
        partial.unlink(missing_ok=True)
        archive.with_suffix(".failed").write_text(f"{exc}\n")
        _log.warning(
            "no class archive for the Kafka broker, so its starts are slower (%s); delete %s to try again",
            exc,
            archive.with_suffix(".failed"),
        )
    finally:
        broker.stop(kill=True)  # a no-op after the clean stop above
        shutil.rmtree(workdir, ignore_errors=True)


def _exercise(broker: "KafkaBroker") -> None:
    # Loads the classes tests use first (topic creation, produce, fetch, consumer groups) into the archive.
    from confluent_kafka import Consumer, Producer

    topic = broker.create_topic("reprise-class-archive", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "logger": _client_log})
    for i in range(200):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 100)
    producer.flush(60)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "reprise-class-archive",
            "auto.offset.reset": "earliest",
            "logger": _client_log,
        }
    )
    try:
        consumer.subscribe([topic])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 200 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _resolve(version: str, pom: bytes, home: Path, libs: Path) -> None:
    # Maven runs on a copy of the pom in the cache, so nothing (target/, ...) is written into the checkout.
    build = home / "build"
    build.mkdir(exist_ok=True)
    (build / "pom.xml").write_bytes(pom)
    staging = home / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    log = home / "mvn.log"
    argv = [
        "mvn",
        "-q",
        "-B",
        "-Dstyle.color=never",
        f"-Dmaven.repo.local={cache_root() / 'maven-repository'}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    try:
        with open(log, "wb") as out:
            code = subprocess.run(
                argv, cwd=build, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=_MAVEN_TIMEOUT
            ).returncode
    except subprocess.TimeoutExpired:
        raise PlatformError(
            f"Maven did not resolve Kafka {version} within {_MAVEN_TIMEOUT:.0f}s: check access to Maven Central "
            f"(or set a mirror in ~/.m2/settings.xml) and run `make platform` again; see {log}"
        ) from None
    if code != 0:
        raise PlatformError(
            f"Maven failed to resolve Kafka {version} (exit {code}): {_first_error(log)}; check the versions in "
            f"{POM} and access to Maven Central (or a mirror in ~/.m2/settings.xml), then run `make platform` "
            f"again; see {log}"
        )
    if not (staging / f"kafka_2.13-{version}.jar").is_file():
        raise PlatformError(f"Maven ran but kafka_2.13-{version}.jar is not in {staging}: see {log}, fix {POM}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)


def _first_error(log: Path) -> str:
    for line in log.read_text(errors="replace").splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        if "[ERROR]" in line and line.strip() != "[ERROR]":
            text = line.replace("[ERROR]", "").strip()
            return text if len(text) <= 400 else text[:400] + "..."
    return "no [ERROR] line in its output"


def new_cluster_id() -> str:
    """A random KRaft cluster id: a UUID in the 22 characters of URL-safe base64 Kafka uses.

    It may start with '-', so callers pass it as `--cluster-id=<id>`, never as a separate argument."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaBroker:
    """One Kafka node (broker and KRaft controller) on loopback, its data and logs in `workdir`.

    The ports are chosen when the object is made (or `port` is given) and kept for its lifetime, so
    `restart()` comes back on the same bootstrap address with the same data.
    """

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        libs: Path | None = None,
        heap: str = "1g",
        jvm_options: Sequence[str] = (),
        use_class_archive: bool = True,
        multi_tenant: MultiTenant | None = None,
        pod_host: str | None = None,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self.port = port or processes.free_port()
        # The real node's pods (on its bridge) cannot reach loopback: a second PLAINTEXT listener on the bridge's
        # address of the host (real_node.RealNode.node_ip) serves them, the same broker, the same ANONYMOUS user.
        self.pod_host = pod_host
        self.pod_port = processes.free_port() if pod_host is not None else None
        controller = processes.free_port()
        while controller == self.port:
            controller = processes.free_port()
        self.controller_port = controller
        # The multi-tenant form (kafka_tenants): a SASL listener and an authorizer beside the PLAINTEXT listener.
        self.multi_tenant = multi_tenant
        self.sasl_port: int | None = None
        if multi_tenant is not None:
            sasl = processes.free_port()
            while sasl in (self.port, self.controller_port):
                sasl = processes.free_port()
            self.sasl_port = sasl
        self.heap = heap
        self.jvm_options = list(jvm_options)
        self.use_class_archive = use_class_archive
        self._libs = libs
        self._process: processes.ManagedProcess | None = None
        self.started_in: float | None = None  # seconds the last start() took (for reports, not for tests)

    # -- addresses and files

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str | None:
        """The SASL/PLAIN listener of the multi-tenant form, where teams connect with their own principal."""
        return f"127.0.0.1:{self.sasl_port}" if self.sasl_port is not None else None

    @property
    def pod_bootstrap(self) -> str | None:
        """Where the real node's pods reach the broker (None without a real node)."""
        return f"{self.pod_host}:{self.pod_port}" if self.pod_host is not None else None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.alive() else None

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def config_path(self) -> Path:
        return self.workdir / "server.properties"

    def running(self) -> bool:
        return self._process is not None and self._process.alive()

    # -- lifecycle

    def start(self, timeout: float = 180.0) -> "KafkaBroker":
        """Start the node (formatting its storage on first start) and return once it serves clients."""
        if self.running():
            return self
        began = time.monotonic()
        libs = self._libs or ensure_kafka()
        processes.require_port_free(self.port, "the Kafka broker")
        processes.require_port_free(self.controller_port, "the Kafka controller")
        if self.sasl_port is not None:
            processes.require_port_free(self.sasl_port, "the Kafka SASL listener")
        self._write_config()
        if not (self.data_dir / "meta.properties").is_file():
            self._format(libs, timeout)
        self._process = processes.start(
            "kafka broker",
            [*self._java(libs), "kafka.Kafka", str(self.config_path)],
            self.log_path,
            cwd=self.workdir,
        )
        try:
            self._wait_ready(time.monotonic() - began, timeout)
            if self.multi_tenant is not None:
                self.multi_tenant.grant(self)  # idempotent: a restart finds them in the metadata log already
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def stop(self, *, kill: bool = False) -> None:
        """Stop the node by its PID: a clean shutdown, or SIGKILL (a crash) with `kill=True`. Idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        if kill:
            process.stop_signal = signal.SIGKILL
        process.stop(timeout=60.0)

    def restart(self, timeout: float = 180.0, *, kill: bool = False) -> "KafkaBroker":
        """Stop and start again on the same ports with the same data; `kill=True` crashes it instead of a clean stop."""
        self.stop(kill=kill)
        return self.start(timeout=timeout)

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients

    def admin(self, **config: Any):
        """A confluent_kafka AdminClient for this broker; `config` adds or overrides librdkafka settings."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "logger": _client_log, **config})

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None, timeout: float = 60.0
    ) -> str:
        """Create `name` (replication factor 1) and return it once its every partition has a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        futures[name].result(timeout=timeout)
        deadline = time.monotonic() + timeout
        while True:
            topic = admin.list_topics(topic=name, timeout=10).topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return name
            if time.monotonic() > deadline:
                raise PlatformError(
                    f"topic {name} was created but has no leader for all {partitions} partitions "
                    f"after {timeout:.0f}s; see {self.log_path}"
                )
            time.sleep(0.1)

    # -- internals

    def _java(self, libs: Path, *, server: bool = True) -> list[str]:
        # Lean flags: startup runs at the start of every test session. The class archive only changes how
        # classes are loaded, not how code is compiled, so the broker runs as fast as a stock one after
        # startup (benchmarks measure against it). -XX:TieredStopAtLevel=1 would start it faster still
        # but slow it down for good.
        argv = ["java", f"-Xmx{self.heap}", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]
        if self.use_class_archive:
            archive = class_archive(libs)
            if archive.is_file():
                argv.append(f"-XX:SharedArchiveFile={archive}")
        return [
            *argv,
            *(self.jvm_options if server else ()),
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp",
            f"{libs}/*",
        ]

    def _write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        extra = (
            self.multi_tenant.server_properties(self.sasl_port)
            if self.multi_tenant is not None and self.sasl_port is not None
            else {"sasl_listener": "", "sasl_protocol": "", "multi_tenant": ""}
        )
        if self.pod_host is not None:  # appended to listeners, advertised.listeners and the protocol map
            extra = {
                **extra,
                "sasl_listener": f"{extra['sasl_listener']},PODS://{self.pod_host}:{self.pod_port}",
                "sasl_protocol": f"{extra['sasl_protocol']},PODS:PLAINTEXT",
            }
        text = string.Template(SERVER_TEMPLATE.read_text()).substitute(
            broker_port=self.port,
            controller_port=self.controller_port,
            log_dirs=self.data_dir,
            **extra,
        )
        self.config_path.write_text(text)
        shutil.copyfile(LOG4J_CONFIG, self.workdir / "log4j2.properties")

    def _format(self, libs: Path, timeout: float) -> None:
        log = self.workdir / "format.log"
        argv = [
            *self._java(libs, server=False),
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={new_cluster_id()}",
            "-c",
            str(self.config_path),
        ]
        try:
            with open(log, "wb") as out:
                code = subprocess.run(
                    argv,
                    cwd=self.workdir,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout,
                ).returncode
        except subprocess.TimeoutExpired:
            raise PlatformError(f"formatting Kafka storage took over {timeout:.0f}s; see {log}") from None
        if code != 0:
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
            raise PlatformError(
                f"formatting Kafka storage in {self.data_dir} failed (exit {code}): {tail}; "
                f"delete {self.workdir} and start again, see {log}"
            )

    def _wait_ready(self, spent: float, timeout: float) -> None:
        assert self._process is not None
        probe: list[Any] = []

        def ready() -> bool:
            # The client is made only once the port listens: librdkafka's reconnect backoff would
            # otherwise grow while the JVM starts and delay the first successful request.
            if not processes.port_is_open(self.port):
                return False
            if not probe:
                probe.append(self.admin(**{"reconnect.backoff.max.ms": 250, "socket.timeout.ms": 2000}))
            # A KRaft broker lists itself in metadata only once it is registered and unfenced.
            metadata = probe[0].list_topics(timeout=2)
            return NODE_ID in metadata.brokers

        processes.wait_until(self._process, ready, max(timeout - spent, 1.0), "serving clients", interval=0.1)
