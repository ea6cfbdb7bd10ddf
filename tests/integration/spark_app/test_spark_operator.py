"""The real Kubeflow Spark operator (controller and webhook, tests/fixtures/spark.py) on the real API server, its
driver pods run by the node agent: the job runs from a SparkApplication (a mounted Secret, and a ConfigMap the
webhook mounts) to COMPLETED; a driver that exits non-zero is retried OnFailure, then FAILED with the
controller's own errorMessage; deleting the application stops its driver (the webhook's owner reference)."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections import Counter
from datetime import datetime, timezone

import pytest

from local_platform.spark_jars import pyspark_version as spark_version
from local_platform.spark_operator import GROUP, PLURAL, VERSION
from spark_app.lakegen import LATEST_SCHEMA, expected_records
from tests.fixtures.kube import wait_for

from .conftest import REPO, read_topic

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def custom_objects(kube):
    from kubernetes import client

    api_client = kube.api_client()
    try:
        yield client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    finally:
        api_client.close()


def spark_application(name: str, main: str, arguments: list[str], **spec) -> dict:
    # Any image name: the node agent runs Spark's pods by their role, as the Spark image would.
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": "example.org/spark-jobs:4.1",
            "sparkVersion": "4.1.4",
            "mainApplicationFile": main,
            "arguments": arguments,
            "driver": {"cores": 1, "memory": "1g"},
            "executor": {"instances": 1, "cores": 1, "memory": "1g"},
            **spec,
        },
    }


def status_of(api, namespace: str, name: str) -> dict:
    return api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status") or {}


def state(status: dict) -> str:
    return (status.get("applicationState") or {}).get("state", "")


def test_the_job_runs_from_a_spark_application_to_completed(
    custom_objects, spark_operator, namespace, kafka, lake, tmp_path
):
    api, core = custom_objects
    from kubernetes import client

    topic = kafka.create_topic(f"spark-op-{uuid.uuid4().hex[:8]}", 2)
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata={"name": "kafka-client"}, data={"client.id": base64.b64encode(b"reprise-lake-replay").decode()}
        ),
    )
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata={"name": "schema"}, data={"latest.json": json.dumps(LATEST_SCHEMA)})
    )
    arguments = [
        "--source",
        lake.uri,
        "--partition-column",
        "dt",
        "--timestamp-column",
        "ts",
        "--key-column",
        "user_id",
        "--from",
        "2024-01-07T00:00:00Z",
        "--to",
        "2024-01-08T00:00:00Z",
        "--latest-schema",
        "/etc/reprise/schema/latest.json",
        "--kafka-settings",
        "/etc/reprise/kafka",
        "--bootstrap-servers",
        kafka.bootstrap,
        "--topic",
        topic,
        "--progress",
        f"file://{tmp_path}/progress",
    ]
    app = spark_application(
        "lr-1-spark", "local:///opt/reprise/spark_app/main.py", arguments, restartPolicy={"type": "Never"}
    )
    app["spec"]["driver"].update(
        secrets=[{"name": "kafka-client", "path": "/etc/reprise/kafka", "secretType": "Generic"}],
        configMaps=[{"name": "schema", "path": "/etc/reprise/schema"}],
    )
    api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)

    seen: list[str] = []

    def finished() -> dict | None:
        status = status_of(api, namespace, "lr-1-spark")
        if not seen or seen[-1] != state(status):
            seen.append(state(status))
        return status if state(status) in ("COMPLETED", "FAILED") else None

    status = wait_for(finished, 900, "the SparkApplication to finish")
    log = spark_operator.log_path(namespace, "lr-1-spark").read_text(errors="replace")
    assert state(status) == "COMPLETED", log[-3000:]
    assert (
        seen[-1] == "COMPLETED"
        and "FAILING" not in seen
        and set(seen) <= {"", "SUBMITTED", "RUNNING", "SUCCEEDING", "COMPLETED"}
    )
    assert (status["submissionAttempts"], status["executionAttempts"]) == (1, 1)
    assert status["driverInfo"]["podName"] == "lr-1-spark-driver"
    assert status["submissionID"] and status["lastSubmissionAttemptTime"] and status["terminationTime"]
    assert "Kafka client settings from" in log and "client.id" in log
    day_end = datetime(2024, 1, 8, tzinfo=timezone.utc)
    expected = Counter(
        lake.spec.day_text(n)
        for n, _ in expected_records(lake.spec, datetime(2024, 1, 7, tzinfo=timezone.utc), day_end)
    )
    assert Counter(r.headers["reprise-origin"].rsplit("=", 1)[1] for r in read_topic(kafka, topic)) == expected


def test_a_failing_application_is_retried_on_failure_then_failed(custom_objects, spark_operator, namespace):
    api, _ = custom_objects
    # Arguments the job refuses (exit code 2) before Spark even starts: a quick failure.
    app = spark_application(
        "bad-args",
        "local:///opt/reprise/spark_app/main.py",
        ["--source", "file:///nowhere"],
        restartPolicy={
            "type": "OnFailure",
            "onFailureRetries": 1,
            "onFailureRetryInterval": 1,
            "onSubmissionFailureRetries": 1,
            "onSubmissionFailureRetryInterval": 1,
        },
    )
    api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)
    status = wait_for(
        lambda: (s := status_of(api, namespace, "bad-args")) and state(s) == "FAILED" and s,
        600,
        "the SparkApplication to fail",
    )
    assert status["applicationState"]["errorMessage"] == "driver container failed with ExitCode: 2, Reason: Error"
    assert (status["submissionAttempts"], status["executionAttempts"]) == (2, 2)
    # The second driver pod's log (the first pod was deleted for the retry).
    assert "the following arguments are required" in spark_operator.log_path(namespace, "bad-args").read_text()


def test_deleting_a_running_application_stops_its_driver(custom_objects, spark_operator, namespace, tmp_path):
    api, _ = custom_objects
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(900)\n")
    api.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, spark_application("sleeper", f"local://{sleeper}", [])
    )
    wait_for(lambda: state(status_of(api, namespace, "sleeper")) == "RUNNING", 300, "the application to run")
    pid = spark_operator.pid(namespace, "sleeper")
    assert pid is not None
    os.kill(pid, 0)  # alive

    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "sleeper")

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    # The driver pod is owned by its SparkApplication (the webhook's owner reference): garbage collection
    # deletes it, and the node agent stops its process.
    wait_for(gone, 120, f"the driver (pid {pid}) to be stopped")
    assert spark_operator.pid(namespace, "sleeper") is None


def test_reprises_driver_pod_as_the_spark_operator_makes_it_is_admitted_under_restricted_pod_security(
    kube, custom_objects, spark_operator, tmp_path
):
    """The SparkApplication LakeReplay builds (examples/lakereplay.yaml), its main file swapped for one that
    exits at once: the driver pod spark-submit creates and the webhook mutates (security contexts, the mounted
    schema ConfigMap, the owner reference) is admitted in a namespace that enforces PodSecurity `restricted`."""
    import yaml

    from reprise_operator.api import LakeReplaySpec
    from reprise_operator.kinds.lakereplay.rules import spark_application as lake_spark_application
    from reprise_operator.rules.workloads import Owner

    api, core = custom_objects
    namespace = f"spark-restricted-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", namespace)
    kube.kubectl(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    try:
        wait_for(
            lambda: kube.kubectl("get", "serviceaccount", "default", "-n", namespace, check=False).returncode == 0,
            30,
            "the default ServiceAccount",
        )
        spec = LakeReplaySpec.model_validate(
            yaml.safe_load((REPO / "examples" / "lakereplay.yaml").read_text())["spec"]
        )
        from kubernetes import client

        core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata={"name": spec.source.schema_.config_map_ref.name},
                data={spec.source.schema_.config_map_ref.key: "{}"},
            ),
        )
        owner = Owner("reprise.io/v1alpha1", "LakeReplay", "accounts", "00000000-0000-0000-0000-000000000003")
        app = lake_spark_application(owner=owner, namespace=namespace, spec=spec)
        app["metadata"].pop("ownerReferences")  # no LakeReplay here: the garbage collector would delete it
        quick = tmp_path / "quick.py"
        # Flushed as printed: once the line was missing from a completed driver's log. The likely cause (not
        # proven): spark-submit copies the Python driver's output through a thread the JVM does not wait for at
        # exit, so a line flushed only at the interpreter's exit can miss the log.
        quick.write_text("print('admitted', flush=True)\n")
        app["spec"].update(
            mainApplicationFile=f"local://{quick}",
            arguments=[],
            sparkVersion=spark_version(),
            restartPolicy={"type": "Never"},
        )
        app["spec"].pop("deps", None)
        app["spec"]["driver"].pop("envFrom", None)  # the example's lake credentials Secret is not here
        app["spec"]["driver"].pop("secrets", None)
        if app["spec"]["driver"].get("serviceAccount"):  # the example's (`spark`), which the user creates
            core.create_namespaced_service_account(
                namespace, {"metadata": {"name": app["spec"]["driver"]["serviceAccount"]}}
            )
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)
        name = app["metadata"]["name"]
        status = wait_for(
            lambda: (
                (s := status_of(api, namespace, name))
                and state(s) in ("COMPLETED", "FAILED", "SUBMISSION_FAILED")
                and s
            ),
            300,
            "the application to finish",
        )
        assert state(status) == "COMPLETED", status
        pod = json.loads(kube.kubectl("get", "pod", f"{name}-driver", "-n", namespace, "-o", "json").stdout)
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "SparkApplication"
        assert any(
            v.get("configMap", {}).get("name") == spec.source.schema_.config_map_ref.name
            for v in pod["spec"]["volumes"]
        ), "the webhook mounts driver.configMaps"
        log = spark_operator.log_path(namespace, name)
        assert wait_for(lambda: "admitted" in log.read_text(), 30, "the driver's output in its log", interval=0.5)
    finally:
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
