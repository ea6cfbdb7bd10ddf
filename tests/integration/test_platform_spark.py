"""The local platform's Spark JVM options: the class-data archive `make platform` dumps really serves Spark's
driver classes, and the options the tests run Spark with name it."""

from __future__ import annotations

import os
import subprocess

import pytest

from local_platform.spark_jvm import C1_ONLY, ensure_class_data_archive, short_job_options
from local_platform.spark_image import spark_submit_executable

pytestmark = pytest.mark.integration


def test_spark_submit_loads_its_classes_from_the_class_data_archive() -> None:
    archive = ensure_class_data_archive()
    assert short_job_options() == f"{C1_ONLY} -XX:SharedArchiveFile={archive}"
    # -Xshare:on refuses to start when the archive does not match this JVM and Spark's classpath.
    done = subprocess.run(
        [spark_submit_executable(), "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SPARK_SUBMIT_OPTS": f"-Xshare:on -XX:SharedArchiveFile={archive} -Xlog:class+load=info"},
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    output = done.stdout + done.stderr
    # "(top)" is the dynamic archive's layer, above the JDK's own base archive.
    assert "org.apache.spark.deploy.SparkSubmit source: shared objects file (top)" in output
