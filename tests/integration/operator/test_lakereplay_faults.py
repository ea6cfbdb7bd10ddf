"""LakeReplay under faults, end to end (the parts as in test_lakereplay_e2e.py): operator crashes and a
suspend while Spark writes, a delete mid-flight, and a SparkApplication that fails.

Apart from test_lakereplay_e2e.py so that `make test` can run the two files on different workers: each runs
Spark several times.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timezone

import pytest

from tests.fixtures.kube import wait_for

from .lake_scenario import (
    Sink,
    assert_lake_children_gone,
    drain_consumer,
    get,
    lake,  # noqa: F401 - the session fixture
    lake_replay,
    schema_configmap,
    topic_exists,
    watch,
)
from .scenario import apply, group_state

pytestmark = pytest.mark.integration

UTC = timezone.utc


def patch_spec(kube, namespace: str, name: str, spec: dict) -> None:
    kube.kubectl("patch", "lakereplay", name, "-n", namespace, "--type", "merge", "-p", json.dumps({"spec": spec}))


def written(kube, namespace: str, name: str) -> int:
    body = get(kube, namespace, "lakereplay", name) or {}
    return ((body.get("status") or {}).get("spark") or {}).get("recordsWritten") or 0


def test_operator_restarts_and_a_suspend_mid_spark_resume_where_they_were_without_duplicates(
    kube, kafka, operator, spark_operator, spark_version, namespace, lake, tmp_path
):
    """Approval, an operator crash while Spark writes, a suspend (the SparkApplication's own `suspend`, the drain
    scaled to zero), another crash while suspended, and a resume: every event of the range processed once."""
    start, end = datetime(2024, 1, 3, tzinfo=UTC), datetime(2024, 1, 5, tzinfo=UTC)
    sink = tmp_path / "sink"
    sink.mkdir()
    schema_configmap(kube, namespace)
    body = lake_replay(
        "paused",
        kafka.bootstrap,
        lake,
        spark_version,
        start="2024-01-03T00:00:00Z",
        to="2024-01-05T00:00:00Z",
        consumer=drain_consumer(sink),
        approval="Manual",
    )
    # Slow enough that the crash and the suspend happen while Spark writes (the job paces itself).
    body["spec"]["spark"]["maxRecordsPerSecond"] = 250
    apply(kube, namespace, body)
    watch(kube, namespace, "paused", "PlanReady", 120, operator)
    assert get(kube, namespace, "sparkapplication", "paused-spark") is None, "nothing runs before approval"
    kube.kubectl("annotate", "lakereplay", "paused", "-n", namespace, "reprise.io/approve=true")

    wait_for(lambda: written(kube, namespace, "paused") > 0, 300, "Spark to write the first records")
    operator.kill()
    patch_spec(kube, namespace, "paused", {"suspend": True})
    operator.start()
    seen = watch(kube, namespace, "paused", "Suspended", 120, operator, spark_operator)
    app = wait_for(
        lambda: (
            (a := get(kube, namespace, "sparkapplication", "paused-spark"))
            and a["status"]["applicationState"]["state"] == "SUSPENDED"
            and a
        ),
        120,
        "Spark to be SUSPENDED",
    )
    assert app["spec"]["suspend"] is True
    # SUSPENDED says the controller deleted the driver pod; the driver stops within the pod's grace period.
    wait_for(lambda: spark_operator.pid(namespace, "paused-spark") is None, 60, "the suspended driver to stop")
    drain = get(kube, namespace, "deployment", "paused-drain")
    assert drain["spec"]["replicas"] == 0
    assert written(kube, namespace, "paused") < len(lake.expected(start, end)), "Spark finished before the suspend"

    operator.kill()
    operator.start()
    patch_spec(kube, namespace, "paused", {"suspend": False})
    seen = watch(kube, namespace, "paused", "Complete", 900, operator, spark_operator, seen)
    status = seen.body["status"]

    expected = lake.expected(start, end)
    counts = Sink.read(sink).event_counts(status["children"]["backfillTopic"])
    assert set(counts) == set(expected) and max(counts.values()) == 1
    assert status["spark"]["attempts"] >= 2, "the resumed application is submitted again"
    assert status["spark"]["recordsWritten"] == len(expected), "the retried job wrote no record twice"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["Suspended"]["status"], conditions["Suspended"]["reason"]) == ("False", "Resumed")
    assert conditions["Approved"]["status"] == "True"
    assert "Suspended" in seen.phases and seen.phases[-1] == "Complete"
    assert_lake_children_gone(kube, kafka, namespace, "paused", status)


def test_deleting_a_lakereplay_mid_flight_stops_spark_and_removes_everything(
    kube, kafka, operator, spark_operator, spark_version, namespace, lake, tmp_path
):
    sink = tmp_path / "sink"
    sink.mkdir()
    schema_configmap(kube, namespace)
    body = lake_replay(
        "doomed", kafka.bootstrap, lake, spark_version, to="2024-01-07T00:00:00Z", consumer=drain_consumer(sink)
    )
    body["spec"]["spark"]["maxRecordsPerSecond"] = 100
    apply(kube, namespace, body)
    wait_for(lambda: written(kube, namespace, "doomed") > 0, 300, "Spark to write the first records")
    status = get(kube, namespace, "lakereplay", "doomed")["status"]
    pid = spark_operator.pid(namespace, "doomed-spark")
    assert pid is not None

    kube.kubectl("delete", "lakereplay", "doomed", "-n", namespace, "--wait=true", "--timeout=180s")

    assert get(kube, namespace, "lakereplay", "doomed") is None
    assert_lake_children_gone(kube, kafka, namespace, "doomed", status)
    assert spark_operator.pid(namespace, "doomed-spark") is None, "the spark-submit must be stopped"


def test_a_killed_driver_is_retried_by_the_spark_operator_and_no_day_is_written_twice(
    kube, kafka, operator, spark_operator, spark_version, namespace, lake, tmp_path
):
    """`kill -9` of the driver part-way through its write: the Spark operator sees its pod fail (exit code 137),
    retries it under restartPolicy OnFailure, and the retried driver leaves out the records of the days the
    first one wrote (all in one write unit here) that are already in the topic: every event once, and no more
    records than events."""
    start, end = datetime(2024, 1, 2, tzinfo=UTC), datetime(2024, 1, 6, tzinfo=UTC)
    sink = tmp_path / "sink"
    sink.mkdir()
    schema_configmap(kube, namespace)
    body = lake_replay(
        "crashed",
        kafka.bootstrap,
        lake,
        spark_version,
        start="2024-01-02T00:00:00Z",
        to="2024-01-06T00:00:00Z",
        consumer=drain_consumer(sink),
    )
    body["spec"]["spark"]["maxRecordsPerSecond"] = 400
    body["spec"]["spark"]["retries"] = {"onFailure": 2, "intervalSeconds": 1}
    apply(kube, namespace, body)
    expected = lake.expected(start, end)
    wait_for(lambda: written(kube, namespace, "crashed") > len(expected) / 3, 300, "Spark to write a third")
    pid = spark_operator.pid(namespace, "crashed-spark")
    assert pid is not None, "the driver must be running"
    os.killpg(pid, signal.SIGKILL)

    seen = watch(kube, namespace, "crashed", "Complete", 900, operator, spark_operator)
    status = seen.body["status"]
    counts = Sink.read(sink).event_counts(status["children"]["backfillTopic"])
    assert set(counts) == set(expected) and max(counts.values()) == 1
    assert status["spark"]["recordsWritten"] == len(expected), "the retried driver wrote a record twice"
    assert status["spark"]["attempts"] == 2, "the Spark operator submits the killed application once more"
    retried = spark_operator.log_path(namespace, "crashed-spark").read_text(errors="replace")
    assert "started by an earlier attempt: leaving out records already in the topic" in retried
    assert_lake_children_gone(kube, kafka, namespace, "crashed", status)


def test_a_spark_application_that_fails_fails_the_lakereplay_with_the_drivers_message(
    kube, kafka, operator, spark_operator, spark_version, namespace, lake, tmp_path
):
    """The job refuses a filter over a column the schema does not have (exit code 2); the controller retries
    as spec.spark.retries says (once, after a second), then gives up: the LakeReplay fails with its message and leaves nothing in Kafka."""
    sink = tmp_path / "sink"
    sink.mkdir()
    schema_configmap(kube, namespace)
    body = lake_replay(
        "broken",
        kafka.bootstrap,
        lake,
        spark_version,
        start="2024-01-02T00:00:00Z",
        to="2024-01-03T00:00:00Z",
        filter_="no_such_column > 1",
        consumer=drain_consumer(sink),
    )
    body["spec"]["spark"]["retries"] = {"onFailure": 1, "intervalSeconds": 1}
    apply(kube, namespace, body)
    seen = watch(kube, namespace, "broken", "Failed", 600, operator, spark_operator)
    status = seen.body["status"]
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "SparkFailed"
    assert failed["message"].startswith("SparkApplication broken-spark is FAILED after 2 submission attempt(s)")
    # The controller's message, then the driver's own: its root cause and where its log is (issue 32, item 3).
    assert "driver container failed with ExitCode: 2, Reason: Error; pod broken-spark-driver" in failed["message"]
    assert "no_such_column" in failed["message"].split("; pod broken-spark-driver", 1)[1], failed["message"]
    assert failed["message"].endswith(
        f"its log: kubectl logs -n {namespace} broken-spark-driver -c spark-kubernetes-driver"
    ), failed["message"]
    # No condition still says Spark is running, and progress claims nothing of a topic nothing was written to.
    produced = {c["type"]: c for c in status["conditions"]}["Produced"]
    assert (produced["status"], produced["reason"]) == ("False", "SparkFailed"), produced
    progress = status.get("progress") or {}
    assert progress.get("percent") != 100 and progress.get("lag") is None, progress
    assert all(p["state"] != "Drained" for p in progress.get("partitions") or []), progress
    # The retries are in the message above; FAILING itself may fall between two polls of the operator.
    assert seen.spark_states[-1] == "FAILED"
    assert "no_such_column" in spark_operator.log_path(namespace, "broken-spark").read_text(errors="replace")
    # The failed SparkApplication stays for `kubectl describe` (it goes with the LakeReplay); what runs and what
    # is in Kafka is removed.
    assert get(kube, namespace, "sparkapplication", "broken-spark") is not None
    children = status["children"]
    assert get(kube, namespace, "deployment", children["deployment"]) is None
    assert not topic_exists(kafka.bootstrap, children["backfillTopic"])
    assert group_state(kafka.bootstrap, children["replayGroup"]) in ("DEAD", "Dead")
