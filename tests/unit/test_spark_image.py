"""The rules by which the node agent runs a Spark driver pod as a local spark-submit (local_platform.spark_image)."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_platform.node_agent import SPARK_ENTRYPOINT, local_argv
from local_platform.spark_controller import webhook_configurations
from local_platform.spark_image import (
    IMAGE_PATHS,
    LOCAL_MASTER,
    SparkImageError,
    driver_argv,
    format_properties,
    image_jar,
    is_spark_pod,
    local_driver_properties,
    parse_properties,
)

REPO = IMAGE_PATHS["/opt/reprise"]

# What spark-submit 4.x writes into the driver's ConfigMap (Properties.store escapes ':' and '=').
SPARK_PROPERTIES = r"""#Java properties built from Kubernetes config map with name: spark-drv-1-conf-map
#Mon Nov 23 22:40:00 UTC 2026
spark.app.name=lr-spark
spark.master=k8s\://https\://127.0.0.1\:6443
spark.submit.deployMode=cluster
spark.jars=local\:///opt/spark/jars/spark-sql-kafka-0-10_2.13-4.1.4.jar,local\:///opt/spark/jars/spark-token-provider-kafka-0-10_2.13-4.1.4.jar
spark.driver.port=7078
spark.kubernetes.driver.label.sparkoperator.k8s.io/app-name=lr-spark
spark.sql.shuffle.partitions=4
spark.task.maxFailures=1
"""

RESOLVED = {
    "spark-sql-kafka-0-10_2.13": "/cache/sql-kafka-4.1.1.jar",
    "spark-token-provider-kafka-0-10_2.13": "/cache/token-4.1.1.jar",
    "kafka-clients": "/cache/kafka-clients.jar",
    "commons-pool2": "/cache/pool2.jar",
}


def test_spark_pods_are_known_by_their_role_label_whatever_their_image() -> None:
    assert is_spark_pod({"metadata": {"labels": {"spark-role": "driver"}}, "spec": {"containers": [{"image": "x:1"}]}})
    assert is_spark_pod({"metadata": {"labels": {"spark-role": "executor"}}})
    assert not is_spark_pod({"metadata": {"labels": {"app": "spark"}}})
    assert not is_spark_pod({"metadata": {}})


def test_a_driver_container_without_command_runs_the_spark_entrypoint() -> None:
    args = [
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        "local:///opt/reprise/spark_app/main.py",
        "--to",
        "x",
    ]
    argv = local_argv(None, args, "/venv/python", SPARK_ENTRYPOINT)
    assert argv[:3] == ["/venv/python", "-m", "local_platform.spark_image"] and argv[3:] == args


def test_properties_written_by_spark_submit_are_read_with_their_escapes() -> None:
    props = parse_properties(SPARK_PROPERTIES)
    assert props["spark.master"] == "k8s://https://127.0.0.1:6443"
    assert props["spark.jars"].startswith("local:///opt/spark/jars/spark-sql-kafka")
    assert props["spark.kubernetes.driver.label.sparkoperator.k8s.io/app-name"] == "lr-spark"
    assert "#Mon Nov 23 22:40:00 UTC 2026" not in "".join(props)
    assert parse_properties("a.b = c d\\\n   e\nk\\=ey:v\\u00e9\n") == {"a.b": "c de", "k=ey": "vé"}


def test_properties_round_trip() -> None:
    props = {"a": "x=y:z", "b key": " leading", "c": "back\\slash\nnewline", "d": ""}
    assert parse_properties(format_properties(props)) == props


def test_the_local_driver_runs_in_local_mode_with_the_images_jars_mapped(tmp_path: Path) -> None:
    spark_jars = tmp_path / "jars"
    spark_jars.mkdir()
    (spark_jars / "spark-core_2.13-4.1.4.jar").write_text("")
    props = parse_properties(SPARK_PROPERTIES)
    props["spark.jars"] += ",local:///opt/spark/jars/spark-core_2.13-4.1.4.jar,s3a://bucket/extra.jar"
    local = local_driver_properties(
        props, resolved=RESOLVED, classpath=list(RESOLVED.values()), spark_jars_dir=spark_jars
    )
    assert local["spark.master"] == LOCAL_MASTER and local["spark.submit.deployMode"] == "client"
    # The image's /opt/spark/jars is the classpath: pyspark's jars and the four the image bakes in, always.
    assert local["spark.jars"].split(",") == [
        "s3a://bucket/extra.jar",
        "/cache/sql-kafka-4.1.1.jar",
        "/cache/token-4.1.1.jar",
        "/cache/kafka-clients.jar",
        "/cache/pool2.jar",
    ]
    assert local_driver_properties({}, resolved=RESOLVED, classpath=list(RESOLVED.values()), spark_jars_dir=None)[
        "spark.jars"
    ].split(",") == list(RESOLVED.values())
    # Free ports on loopback, not the cluster-mode 7078 that a second driver on this host would collide on.
    assert local["spark.driver.port"] == "0" and local["spark.driver.host"] == "127.0.0.1"
    # What the application set wins over the small-machine defaults; the rest is kept as the controller wrote it.
    assert local["spark.sql.shuffle.partitions"] == "4" and local["spark.ui.enabled"] == "false"
    assert local["spark.task.maxFailures"] == "1" and local["spark.app.name"] == "lr-spark"


def test_a_jar_of_the_image_this_machine_does_not_have_is_refused_by_name() -> None:
    with pytest.raises(SparkImageError, match="/opt/spark/jars/delta-spark_2.13-4.0.0.jar"):
        image_jar("local:///opt/spark/jars/delta-spark_2.13-4.0.0.jar", RESOLVED, None)
    assert image_jar("local:///opt/other/x.jar", RESOLVED, None) == "local:///opt/other/x.jar"
    assert image_jar("local:///opt/spark/jars/spark-sql-kafka-0-10_2.13-4.1.4.jar", RESOLVED, None) is None


def test_the_driver_argv_is_a_client_mode_spark_submit_of_the_mapped_main_file() -> None:
    args = [
        "driver",
        "--properties-file",
        "/pods/x/volumes/spark-conf-volume-driver/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        "local:///opt/reprise/spark_app/main.py",
        "--source",
        "file:///lake",
        "--latest-schema",
        "/pods/x/volumes/schema/latest.json",
    ]
    argv = driver_argv(args, "/spark/bin/spark-submit", "/pods/x/spark-local.properties")
    assert argv == [
        "/spark/bin/spark-submit",
        "--deploy-mode",
        "client",
        "--properties-file",
        "/pods/x/spark-local.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        f"{REPO}/spark_app/main.py",
        "--source",
        "file:///lake",
        "--latest-schema",
        "/pods/x/volumes/schema/latest.json",
    ]
    with pytest.raises(SparkImageError, match="not a driver"):
        driver_argv(["executor"], "/spark/bin/spark-submit", "p")


def test_the_webhook_is_registered_by_url_for_spark_pods_and_applications() -> None:
    mutating, validating = webhook_configurations(9443, ["ns-a"])
    pods = mutating["webhooks"][0]
    assert pods["clientConfig"] == {"url": "https://localhost:9443/mutate--v1-pod"}
    assert pods["objectSelector"] == {"matchLabels": {"sparkoperator.k8s.io/launched-by-spark-operator": "true"}}
    assert pods["namespaceSelector"]["matchExpressions"][0]["values"] == ["ns-a"]
    assert validating["webhooks"][0]["rules"][0]["resources"] == ["sparkapplications"]
    assert "namespaceSelector" not in webhook_configurations(9443)[0]["webhooks"][0]
