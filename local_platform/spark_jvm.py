"""The JVM options of the Spark runs on the local platform: short jobs on two shared cores.

Every Spark run here (the Spark operator's and the local drivers' spark-submits, the job tests' spark-submits,
the tests' in-process sessions) processes thousands of rows, not billions, and starts a fresh JVM. Two JVM defaults made for long
jobs cost most of such a run's CPU:
- the C2 compiler: it compiles hot Spark code for a throughput these runs never reach. `-XX:TieredStopAtLevel=1`
  stops at C1 and halves a run's CPU time (30k-row lake write: 21 → 11 CPU-s, wall 12 → 10 s).
- class loading: a Spark driver writing a lake loads about 20,000 classes. A dynamic class-data archive of them
  (`-XX:SharedArchiveFile`, Java 13+), dumped once into the cache by `make platform`, takes another quarter
  off (10 → 7 s wall, 11 → 8 CPU-s). A JVM or pyspark that no longer matches the archive only loses the
  speed: the JVM checks the archive's header and classpath, warns and loads classes as usual.

`short_job_options()` is the value for `SPARK_SUBMIT_OPTS`, which spark-submit adds to the driver JVM's command
in client mode (the only mode used here). It is the platform's choice, never the SparkApplication's: a
production Spark image keeps the JVM defaults that suit long jobs. Benchmarks do not use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cache import component_dir
from .errors import PlatformError

#: C1 only: a short job's CPU goes to running, not to C2 compiling code for a throughput it never reaches.
C1_ONLY = "-XX:TieredStopAtLevel=1"
ARCHIVE_NAME = "spark-driver.jsa"


def _java_identity() -> str:
    """A short digest of `java -version`: an archive is only valid for the JVM build that dumped it."""
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PlatformError(f"cannot run `java -version` ({exc}): install a Java 17 JDK") from None
    return hashlib.sha256(out.encode()).hexdigest()[:12]


def _classpath_identity() -> str:
    """A short digest of where pyspark's jars are: an archive records the classpath it was dumped with, and a
    JVM refuses it for another one. A new Python environment (another venv path) installs the same pyspark
    version elsewhere, so the version alone does not name the archive."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    origin = str(Path(spec.origin).resolve().parent) if spec is not None and spec.origin else "none"
    return hashlib.sha256(origin.encode()).hexdigest()[:8]


def archive_path() -> Path:
    """Where the class-data archive of this pyspark (at this path) on this JVM lives in the cache (it may not
    exist yet)."""
    from .spark_jars import pyspark_version

    return component_dir("spark-cds", f"{pyspark_version()}-{_classpath_identity()}-{_java_identity()}") / ARCHIVE_NAME


def short_job_options() -> str:
    """`SPARK_SUBMIT_OPTS` for the platform's Spark runs: C1 only, and the class-data archive once it exists."""
    archive = archive_path()
    return f"{C1_ONLY} -XX:SharedArchiveFile={archive}" if archive.is_file() else C1_ONLY


def ensure_class_data_archive() -> Path:
    """Dump the archive once: a small lake written, then read by the job's dry run, in a JVM that records every
    class it loaded at exit. Written under a temporary name and renamed, so a concurrent dump or a killed
    one never leaves a half-written archive under the real name."""
    archive = archive_path()
    if archive.is_file():
        return archive
    partial = archive.with_name(f"{ARCHIVE_NAME}.{os.getpid()}.partial")
    log_path = archive.with_name("dump.log")
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": f"{C1_ONLY} -XX:ArchiveClassesAtExit={partial}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    with open(log_path, "wb") as log:
        done = subprocess.run(
            [sys.executable, "-m", "local_platform.spark_jvm"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=900,
        )
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise PlatformError(f"dumping Spark's class-data archive failed (exit {done.returncode}); see {log_path}")
    partial.rename(archive)
    return archive


def _dump_workload() -> None:
    """What the archive should hold: the classes of a session, a Parquet write and the job's read, evolve and
    order (its dry run), as the tests' and the local drivers' runs load them."""
    from pyspark import SparkContext

    from spark_app.job import run as run_job
    from spark_app.lakegen import LATEST_SCHEMA, LakeSpec, write_lake
    from spark_app.session import local_session
    from spark_app.settings import parse_settings

    with tempfile.TemporaryDirectory(prefix="reprise-spark-cds-") as folder:
        spark = local_session()
        try:
            spark.sparkContext.setLogLevel("ERROR")
            lake = f"file://{folder}/lake"
            write_lake(spark, LakeSpec(rows=3000, days=6, keys=50), lake)
            schema = Path(folder) / "latest.json"
            schema.write_text(json.dumps(LATEST_SCHEMA))
            run_job(
                spark,
                parse_settings(
                    [
                        "--source",
                        lake,
                        "--partition-column",
                        "dt",
                        "--timestamp-column",
                        "ts",
                        "--key-column",
                        "user_id",
                        "--latest-schema",
                        str(schema),
                        "--to",
                        "2024-01-07T00:00:00Z",
                        "--bootstrap-servers",
                        "127.0.0.1:9",
                        "--topic",
                        "unused",
                        "--progress",
                        f"file://{folder}/progress",
                        "--filter",
                        "event_type <> 'view'",
                        "--dry-run",
                    ]
                ),
            )
        finally:
            gateway = SparkContext._gateway
            spark.stop()
            gateway.shutdown()
            # The JVM writes the archive as it exits, which takes a while: it exits normally when its stdin
            # closes, and is waited for, not signalled on a timeout.
            gateway.proc.stdin.close()
            gateway.proc.wait(timeout=600)


if __name__ == "__main__":
    began = time.monotonic()
    _dump_workload()
    print(f"class-data workload ran in {time.monotonic() - began:.0f}s", flush=True)
