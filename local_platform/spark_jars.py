"""The Kafka connector jars of the LakeReplay Spark job, resolved from Maven Central into the cache.

Spark does not ship its Kafka sink. `ensure_spark_jars()` resolves, with Maven and `spark_app/jars/pom.xml`,
`spark-sql-kafka-0-10_2.13` and `spark-token-provider-kafka-0-10_2.13` of the installed pyspark's version,
plus `kafka-clients` and `commons-pool2` at the versions that Spark release's pom names, into
`<cache>/spark-kafka-<pyspark version>/jars/`, and returns their paths for `spark.jars`. Ivy
(`spark.jars.packages`) is never used: it may try other repositories and hang offline.

When the registry does not hold the connector at pyspark's exact version (Maven Central as seen from these
machines has no 4.1.4 connector, and no 4.1.x token provider at all), the newest published version of the
same major.minor line that is not newer than pyspark is used instead, artifact by artifact, and a warning
says so. Spark keeps binary compatibility within a release line; the integration tests run the sink and
source on the exact pyspark installed. Set `REPRISE_SPARK_JARS_EXACT=1` to refuse that substitution.
What was resolved is recorded in `resolved.json` next to the jars.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_root, component_dir
from .errors import PlatformError
from .prerequisites import missing

POM = Path(__file__).resolve().parent.parent / "spark_app" / "jars" / "pom.xml"
CONNECTOR = "spark-sql-kafka-0-10_2.13"
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10_2.13"
KAFKA_CLIENTS = "kafka-clients"
COMMONS_POOL2 = "commons-pool2"
# The four artifacts copied; everything else those poms pull in is already in Spark's jars/ folder.
ARTIFACTS = (CONNECTOR, TOKEN_PROVIDER, KAFKA_CLIENTS, COMMONS_POOL2)
EXACT_ENV = "REPRISE_SPARK_JARS_EXACT"

_MAVEN_TIMEOUT = 1800.0
_MANIFEST = "resolved.json"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SparkJars:
    """What was resolved: the jar paths in `spark.jars` order, and the versions behind them."""

    spark_version: str
    jars: tuple[Path, ...]
    versions: dict[str, str]

    @property
    def exact(self) -> bool:
        """True when both Spark artifacts are of the Spark version that runs the job."""
        return self.versions.get(CONNECTOR) == self.spark_version == self.versions.get(TOKEN_PROVIDER)

    @property
    def spark_jars_conf(self) -> str:
        """The value for `spark.jars`."""
        return ",".join(str(p) for p in self.jars)


def pyspark_version() -> str:
    """The version of the installed pyspark: the Spark that runs the job locally."""
    try:
        from pyspark.version import __version__
    except ImportError:
        raise PlatformError("pyspark is not installed in this environment: run `make venv`") from None
    return __version__


def line_range(version: str) -> str:
    """The Maven version range of `version`'s major.minor line, up to and including `version` itself.

    Maven sorts unknown qualifiers after the release (4.1.0-preview1 > 4.1.0), so `[4.1,4.1.4]` holds 4.1.0
    to 4.1.4 and the 4.1.0-previewN builds, and no 4.2 pre-release.
    """
    match = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?", version)
    if not match:
        raise PlatformError(f"cannot read a major.minor from Spark version {version!r}")
    return f"[{match.group(1)}.{match.group(2)},{version}]"


def ensure_spark_jars(spark_version: str | None = None) -> list[Path]:
    """The Kafka connector jar paths for `spark.jars` (default: for the installed pyspark), resolved once."""
    return list(resolve_spark_jars(spark_version).jars)


def resolve_spark_jars(spark_version: str | None = None) -> SparkJars:
    """The Kafka connector jars for `spark_version` (default: the installed pyspark) with their versions."""
    for tool in ("java", "mvn"):
        problem = missing(tool)
        if problem:
            raise PlatformError(problem)
    version = spark_version or pyspark_version()
    exact_only = os.environ.get(EXACT_ENV, "") not in ("", "0", "false")
    digest = hashlib.sha256(POM.read_bytes() + f"exact={exact_only}".encode()).hexdigest()[:16]
    home = component_dir("spark-kafka", version)
    manifest = home / _MANIFEST

    def cached() -> SparkJars | None:
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            return None
        if data.get("pom_digest") != digest:
            return None
        jars = tuple(Path(p) for p in data["jars"])
        if not all(p.is_file() for p in jars):
            return None
        return SparkJars(version, jars, dict(data["versions"]))

    found = cached()
    if found is None:
        # A test session and `make platform` may resolve at once: one does it, the other reuses it.
        with open(home / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = cached()
            if found is None:
                found = _resolve(version, home, exact_only)
                manifest.write_text(
                    json.dumps(
                        {
                            "pom_digest": digest,
                            "spark_version": version,
                            "exact": found.exact,
                            "versions": found.versions,
                            "jars": [str(p) for p in found.jars],
                        },
                        indent=2,
                    )
                    + "\n"
                )
    if not found.exact:
        _log.warning(
            "Spark %s's Kafka connector is not on Maven Central as seen from here; using %s %s and %s %s of "
            "the same release line (set %s=1 to refuse)",
            version,
            CONNECTOR,
            found.versions[CONNECTOR],
            TOKEN_PROVIDER,
            found.versions[TOKEN_PROVIDER],
            EXACT_ENV,
        )
    return found


def _resolve(version: str, home: Path, exact_only: bool) -> SparkJars:
    # Maven runs on a copy of the pom in the cache, so nothing (target/, ...) is written into the checkout.
    build = home / "build"
    build.mkdir(exist_ok=True)
    (build / "pom.xml").write_bytes(POM.read_bytes())
    attempts: list[dict[str, str]] = [{"spark.version": version}]
    if not exact_only:
        within_line = line_range(version)
        attempts.append(
            {"spark.version": version, "spark.kafka.version": within_line, "spark.token-provider.version": within_line}
        )
    problem = ""
    for number, properties in enumerate(attempts, start=1):
        staging = home / "jars.partial"
        shutil.rmtree(staging, ignore_errors=True)
        log = home / f"mvn-{number}.log"
        code = _maven(build, staging, properties, log, version)
        if code == 0:
            jars, versions = _collect(staging, log)
            final = home / "jars"
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
            return SparkJars(version, tuple(final / p.name for p in jars), versions)
        problem = _first_error(log)
        if "Could not find artifact" not in problem and "could not be resolved" not in problem:
            break  # not a missing version (the network, a broken pom): another range will not help
    hint = "" if exact_only else " or of its release line"
    raise PlatformError(
        f"Maven could not resolve Spark {version}'s Kafka connector{hint}: {problem}; check access to Maven "
        f"Central (or a mirror in ~/.m2/settings.xml) and run `make platform` again; see {home}/mvn-*.log"
    )


def _maven(build: Path, staging: Path, properties: dict[str, str], log: Path, version: str) -> int:
    argv = [
        "mvn",
        "-B",
        f"-Dmaven.repo.local={cache_root() / 'maven-repository'}",
        *(f"-D{key}={value}" for key, value in properties.items()),
        "dependency:copy-dependencies",
        f"-DincludeArtifactIds={','.join(ARTIFACTS)}",
        f"-DoutputDirectory={staging}",
    ]
    try:
        with open(log, "wb") as out:
            return subprocess.run(
                argv, cwd=build, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=_MAVEN_TIMEOUT
            ).returncode
    except subprocess.TimeoutExpired:
        raise PlatformError(
            f"Maven did not resolve Spark {version}'s Kafka connector within {_MAVEN_TIMEOUT:.0f}s: check access "
            f"to Maven Central and run `make platform` again; see {log}"
        ) from None


def _collect(staging: Path, log: Path) -> tuple[list[Path], dict[str, str]]:
    """The copied jars in `ARTIFACTS` order, and each artifact's version read from its file name."""
    jars: list[Path] = []
    versions: dict[str, str] = {}
    for artifact in ARTIFACTS:
        matches = [
            p
            for p in staging.glob(f"{artifact}-*.jar")
            if re.fullmatch(rf"{re.escape(artifact)}-(\d[^/]*)\.jar", p.name)
        ]
        if len(matches) != 1:
            raise PlatformError(f"Maven ran but {artifact} is not (or not once) in {staging}: see {log}, fix {POM}")
        jars.append(matches[0])
        versions[artifact] = matches[0].name[len(artifact) + 1 : -len(".jar")]
    return jars, versions


def _first_error(log: Path) -> str:
    for line in log.read_text(errors="replace").splitlines():
        if "[ERROR]" in line and line.strip() != "[ERROR]":
            return line.replace("[ERROR]", "").strip()[:400]
    return "no [ERROR] line in its output"


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    print(resolve_spark_jars().spark_jars_conf)
