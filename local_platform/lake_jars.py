"""The jars of the lake's storage and formats (s3a, Avro files, Delta, Iceberg), resolved only when asked for.

Spark ships none of them. `resolve_lake_jars({"s3a", "delta"})` resolves, with Maven and the profiles of
`spark_app/jars/lake/pom.xml`, each named set into `<cache>/lake-jars-<pom digest>/<set>/` once, and
returns the jar paths for `spark.jars`. A jar whose artifact pyspark's own `jars/` folder already holds
(httpclient, commons-codec, ...) is dropped: the same classes twice on the classpath load whichever comes
first. Ivy (`spark.jars.packages`) is not used, as for the Kafka connector (see spark_jars.py).

`needed_sets(uri, format)` says which sets a lake needs: `s3a` for an `s3a://` URI, and the format's own.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterable

from .cache import cache_root, component_dir
from .errors import PlatformError
from .prerequisites import missing

POM = Path(__file__).resolve().parent.parent / "spark_app" / "jars" / "lake" / "pom.xml"
SETS = ("s3a", "avro", "delta", "iceberg")
_FORMAT_SETS = {"avro": "avro", "delta": "delta", "iceberg": "iceberg"}
_MAVEN_TIMEOUT = 1800.0
_STAMP = ".resolved"
# <artifact>-<version>.jar, the version starting with a digit.
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")


def needed_sets(uri: str, fmt: str) -> tuple[str, ...]:
    """The jar sets a lake at `uri` in `fmt` needs, in `spark.jars` order."""
    wanted = []
    if uri.lower().startswith("s3a://"):
        wanted.append("s3a")
    if fmt in _FORMAT_SETS:
        wanted.append(_FORMAT_SETS[fmt])
    return tuple(wanted)


def resolve_lake_jars(sets: Iterable[str]) -> list[Path]:
    """The jar paths of `sets`, resolved the first time a set is asked for."""
    jars: list[Path] = []
    for name in sets:
        if name not in SETS:
            raise PlatformError(f"no lake jar set {name!r}: the sets are {', '.join(SETS)}")
        jars.extend(_resolved(name))
    return jars


def _resolved(name: str) -> list[Path]:
    for tool in ("java", "mvn"):
        problem = missing(tool)
        if problem:
            raise PlatformError(problem)
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    home = component_dir("lake-jars", digest)
    folder = home / name
    stamp = folder / _STAMP
    if stamp.is_file():
        return _listed(folder)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a test session and `make run` may resolve at once
        if stamp.is_file():
            return _listed(folder)
        build = home / "build"
        build.mkdir(exist_ok=True)
        (build / "pom.xml").write_bytes(POM.read_bytes())  # Maven writes nothing into the checkout
        staging = home / f"{name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        log = home / f"mvn-{name}.log"
        argv = [
            "mvn",
            "-B",
            f"-Dmaven.repo.local={cache_root() / 'maven-repository'}",
            f"-P{name}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
        ]
        try:
            with open(log, "wb") as out:
                code = subprocess.run(
                    argv,
                    cwd=build,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=_MAVEN_TIMEOUT,
                ).returncode
        except subprocess.TimeoutExpired:
            raise PlatformError(
                f"Maven did not resolve the {name} jars within {_MAVEN_TIMEOUT:.0f}s; see {log}"
            ) from None
        if code != 0 or not any(staging.glob("*.jar")):
            raise PlatformError(
                f"Maven could not resolve the lake's {name} jars: check access to Maven Central (or a mirror in "
                f"~/.m2/settings.xml) and run again; see {log}"
            )
        shipped = _spark_artifacts()
        for jar in staging.glob("*.jar"):
            match = _JAR_NAME.match(jar.name)
            if match and match.group("artifact") in shipped:
                jar.unlink()
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
        stamp.write_text(digest + "\n")
    return _listed(folder)


def _listed(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jar"))


def _spark_artifacts() -> set[str]:
    """The artifact names of the jars pyspark ships."""
    try:
        import pyspark
    except ImportError:
        raise PlatformError("pyspark is not installed in this environment: run `make venv`") from None
    jars = Path(pyspark.__file__).parent / "jars"
    found = set()
    for jar in jars.glob("*.jar"):
        match = _JAR_NAME.match(jar.name)
        if match:
            found.add(match.group("artifact"))
    return found


if __name__ == "__main__":
    import sys

    print(",".join(str(p) for p in resolve_lake_jars(sys.argv[1:] or SETS)))
