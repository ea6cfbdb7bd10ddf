"""What runs SparkApplications on the local platform: today the Spark operator STAND-IN (`spark_standin`).

The one place that wires a Spark operator into the local platform, for `make run` (`start_spark_controller`)
and for the test fixtures (tests/fixtures/spark.py): the real SparkApplication CRD installed, a controller acting
on SparkApplications, and what the Spark image has that this machine lays out differently, mapped. Replacing the
stand-in with the real controller changes this module and nothing that calls it.

The mapping, never a change to the SparkApplication: `/opt/reprise` is this checkout (the stand-in's default);
the Kafka connector jars the image bakes into /opt/spark/jars at its Spark version (the `deps.jars` Reprise puts
in every SparkApplication) are the jars `spark_jars` resolved from Maven Central; kafka-clients and
commons-pool2, which the image has on Spark's classpath as well, are added as `spark.jars`. Every spark-submit
runs with `spark_jvm.short_job_options()` in `SPARK_SUBMIT_OPTS` unless the caller's environment sets its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .spark_jars import COMMONS_POOL2, CONNECTOR, KAFKA_CLIENTS, TOKEN_PROVIDER, pyspark_version, resolve_spark_jars
from .spark_jvm import short_job_options
from .spark_operator import install_sparkapplication_crd
from .spark_standin import LOCAL_MASTER, SparkOperatorStandIn

#: What `make run` prints about the Spark controller: plainly a stand-in, and what it does and does not do.
NOTICE = (f"Spark operator: a STAND-IN, not the Kubeflow Spark operator. It runs each SparkApplication "
          f"(type Python) with the local spark-submit in {LOCAL_MASTER} and writes its status as the real "
          "controller does (states, retries, suspend, TTL); no driver or executor pods, no web UI, no batch "
          "schedulers (docs/local-platform.md)")

# Shared 2-core machines: no UI, few shuffle partitions (local[2] is the stand-in's master).
SMALL_MACHINE_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}


def image_jar_map(spark_version: str) -> tuple[dict[str, str], list[str]]:
    """(image jar path -> local jar, the other jars of the image's classpath) for `spark_version`."""
    from reprise_operator.spark_application import connector_jars

    resolved = resolve_spark_jars(spark_version)
    local = {artifact: str(path) for artifact, path in zip((CONNECTOR, TOKEN_PROVIDER, KAFKA_CLIENTS, COMMONS_POOL2),
                                                           resolved.jars)}
    image = [j[len("local://"):] for j in connector_jars(spark_version)]
    mapping = {image[0]: local[CONNECTOR], image[1]: local[TOKEN_PROVIDER]}
    return mapping, [local[KAFKA_CLIENTS], local[COMMONS_POOL2]]


def install_crd(kubeconfig: str | Path) -> None:
    """The Spark operator's own SparkApplication CRD on the API server of `kubeconfig`, Established."""
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        install_sparkapplication_crd(api_client)
    finally:
        api_client.close()


def start_spark_controller(kubeconfig: str | Path, workdir: str | Path, *, namespace: str | None = None,
                           env: Mapping[str, str] | None = None) -> SparkOperatorStandIn:
    """A running controller for the SparkApplications of `namespace` (all when None); `stop()` it when done.

    The CRD must be installed (`install_crd`). Applications name Spark `pyspark_version()`, the version
    whose jars are mapped (the operator's REPRISE_SPARK_VERSION on the local platform).
    """
    mapping, classpath = image_jar_map(pyspark_version())
    controller = SparkOperatorStandIn(
        kubeconfig, workdir, namespace=namespace, path_map=mapping,
        spark_conf={"spark.jars": ",".join(classpath), **SMALL_MACHINE_CONF},
        env={"SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS") or short_job_options(), **dict(env or {})},
    )
    return controller.start()
