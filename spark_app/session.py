"""The SparkSession of the job, and the small local one tests and benchmarks use.

The job sets only what its correctness needs (UTC session time zone, so days and RFC 3339 bounds mean the
same everywhere; redaction of Kafka credentials in plans); everything else comes from spark-submit's
`--conf` / the SparkApplication's `sparkConf`.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Mapping

from pyspark.sql import SparkSession

JOB_CONF = {
    "spark.sql.session.timeZone": "UTC",
    # Kafka options that can carry credentials are shown as *********(redacted) in plans and the UI.
    "spark.sql.redaction.options.regex": r"(?i)url|jaas|password|secret|token|sasl|ssl\.key|keystore|truststore",
    "spark.ui.showConsoleProgress": "false",
}

# For tests and benchmarks on shared 2-core machines: two threads, no UI, few shuffle partitions.
LOCAL_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.adaptive.enabled": "true",
}


# What a table format needs of the session before it starts: Delta refuses to read (even by path) without its
# extension and catalog. Iceberg reads tables by path without any. Spark skips an extension whose class is
# missing, so a job without the Delta jars still reaches the read and says which package to add.
FORMAT_CONF: dict[str, dict[str, str]] = {
    "delta": {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    },
}


def job_session(extra: Mapping[str, str] | None = None, table_format: str = "") -> SparkSession:
    builder = SparkSession.builder.appName("reprise-lake-replay")
    for key, value in {**JOB_CONF, **FORMAT_CONF.get(table_format, {}), **dict(extra or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def local_session(extra: Mapping[str, str] | None = None) -> SparkSession:
    """A `local[2]` session with the job's settings (one per process: getOrCreate returns the running one)."""
    return job_session({**LOCAL_CONF, **dict(extra or {})})


def stop_local_session(spark: SparkSession) -> None:
    """Stop the session and the JVM pyspark started for it, by that JVM's PID. A second call (two test
    folders sharing the one session) finds the JVM already gone and does nothing."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = getattr(gateway, "proc", None)
    spark.stop()
    if gateway is not None:
        try:
            gateway.shutdown()
        except Exception:  # the JVM may already be gone
            pass
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is not None and process.poll() is None:
        try:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
