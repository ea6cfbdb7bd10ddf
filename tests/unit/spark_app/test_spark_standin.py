"""The Spark operator stand-in's pure parts: its state machine (as the real controller's) and the
spark-submit command it builds from a SparkApplication."""

from datetime import datetime, timedelta, timezone

import pytest

from local_platform.spark_standin import (
    Decision,
    Observed,
    SubmissionError,
    decide,
    map_path,
    submission,
    submitted,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
RUNNING_PROCESS, GONE = Observed("running"), Observed("none")
ON_FAILURE = {"restartPolicy": {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 10,
                                "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 5}}


def state(decision: Decision) -> str:
    return decision.status.get("applicationState", {}).get("state", "")


def exited(code):
    return Observed("exited", code)


def test_a_new_application_is_submitted_and_counted_as_the_real_controller_does():
    assert decide({}, None, GONE, NOW).action == "submit"
    status = submitted({}, "lr-1-spark", {}, NOW, "sub-1")
    assert status == {"submissionID": "sub-1", "driverInfo": {"podName": "lr-1-spark-driver"},
                      "lastSubmissionAttemptTime": "2026-01-01T12:00:00Z", "submissionAttempts": 1,
                      "executionAttempts": 1, "applicationState": {"state": "SUBMITTED"}}
    failed = submitted(status, "x", {"driver": {"podName": "p"}}, NOW, "sub-2", error="no such file")
    assert failed["applicationState"] == {"state": "SUBMISSION_FAILED", "errorMessage": "no such file"}
    assert (failed["submissionAttempts"], failed["executionAttempts"], failed["driverInfo"]) == (2, 1, {"podName": "p"})


def test_a_successful_run_goes_running_succeeding_completed():
    status = submitted({}, "a", {}, NOW, "s")
    running = decide({}, status, RUNNING_PROCESS, NOW)
    assert (state(running), running.action) == ("RUNNING", "none")
    succeeding = decide({}, running.status, exited(0), NOW)
    assert state(succeeding) == "SUCCEEDING" and succeeding.status["terminationTime"] == "2026-01-01T12:00:00Z"
    completed = decide({}, succeeding.status, GONE, NOW)
    assert state(completed) == "COMPLETED" and "errorMessage" not in completed.status["applicationState"]
    assert decide({}, completed.status, GONE, NOW + timedelta(days=1)) == Decision(completed.status)


def test_a_failed_run_is_retried_on_failure_with_linear_backoff_then_fails():
    status = decide(ON_FAILURE, submitted({}, "a", ON_FAILURE, NOW, "s"), exited(3), NOW).status
    assert status["applicationState"] == {"state": "FAILING",
                                          "errorMessage": "driver container failed with ExitCode: 3, Reason: Error"}
    waiting = decide(ON_FAILURE, status, GONE, NOW + timedelta(seconds=4))
    assert (state(waiting), waiting.requeue_after) == ("FAILING", 6.0)  # 10 s x 1 attempt after the last one
    rerun = decide(ON_FAILURE, status, GONE, NOW + timedelta(seconds=10))
    assert state(rerun) == "PENDING_RERUN"
    assert "terminationTime" not in rerun.status and rerun.status["driverInfo"] == {}
    assert decide(ON_FAILURE, rerun.status, GONE, NOW).action == "submit"
    second = submitted(rerun.status, "a", ON_FAILURE, NOW, "s2")
    assert (second["submissionAttempts"], second["executionAttempts"]) == (2, 2)
    final = decide(ON_FAILURE, decide(ON_FAILURE, second, exited(1), NOW).status, GONE, NOW + timedelta(hours=1))
    assert state(final) == "FAILED"  # executionAttempts 2 > onFailureRetries 1


def test_never_means_one_attempt_and_a_missing_interval_means_no_retry_like_the_real_one():
    failing = decide({}, submitted({}, "a", {}, NOW, "s"), exited(1), NOW).status
    assert state(decide({}, failing, GONE, NOW)) == "FAILED"
    no_interval = {"restartPolicy": {"type": "OnFailure", "onFailureRetries": 3}}
    stuck = decide(no_interval, failing, GONE, NOW + timedelta(hours=1))
    assert (state(stuck), stuck.action) == ("FAILING", "none")


def test_submission_failures_retry_by_resubmitting():
    failed = submitted({}, "a", ON_FAILURE, NOW, "s", error="boom")
    assert decide(ON_FAILURE, failed, GONE, NOW + timedelta(seconds=5)).action == "submit"
    again = submitted(failed, "a", ON_FAILURE, NOW, "s", error="boom")
    final = decide(ON_FAILURE, again, GONE, NOW + timedelta(hours=1))
    assert state(final) == "FAILED" and final.status["terminationTime"]


def test_a_lost_driver_fails_the_run():
    lost = decide({}, submitted({}, "a", {}, NOW, "s"), GONE, NOW)
    assert lost.status["applicationState"] == {"state": "FAILING", "errorMessage": "driver pod not found"}


def test_suspend_kills_and_resume_resubmits():
    running = decide({}, submitted({}, "a", {}, NOW, "s"), RUNNING_PROCESS, NOW).status
    suspending = decide({"suspend": True}, running, RUNNING_PROCESS, NOW)
    assert (state(suspending), suspending.action) == ("SUSPENDING", "kill")
    suspended = decide({"suspend": True}, suspending.status, GONE, NOW)
    assert state(suspended) == "SUSPENDED"
    assert state(decide({"suspend": True}, suspended.status, GONE, NOW)) == "SUSPENDED"
    resuming = decide({"suspend": False}, suspended.status, GONE, NOW)
    assert state(resuming) == "RESUMING"
    assert decide({}, resuming.status, GONE, NOW).action == "submit"


def test_time_to_live_deletes_a_finished_application():
    done = {"applicationState": {"state": "COMPLETED"}, "terminationTime": "2026-01-01T12:00:00Z"}
    assert decide({"timeToLiveSeconds": 60}, done, GONE, NOW + timedelta(seconds=30)).requeue_after == 30
    assert decide({"timeToLiveSeconds": 60}, done, GONE, NOW + timedelta(seconds=61)).action == "delete"


def test_image_paths_map_to_the_checkout_longest_prefix_first():
    path_map = {"/opt/reprise": "/repo", "/opt/reprise/conf": "/tmp/mounts/conf"}
    assert map_path("local:///opt/reprise/spark_app/main.py", path_map) == "/repo/spark_app/main.py"
    assert map_path("/opt/reprise/conf/schema.json", path_map) == "/tmp/mounts/conf/schema.json"
    assert map_path("local:///elsewhere/x.py", path_map) == "/elsewhere/x.py"
    assert map_path("s3a://bucket/x", path_map) == "s3a://bucket/x"
    assert map_path("--topic", path_map) == "--topic"


def app(**spec):
    base = {"type": "Python", "mode": "cluster", "mainApplicationFile": "local:///opt/reprise/spark_app/main.py",
            "sparkVersion": "4.1.4", "driver": {"memory": "512m"}, "executor": {"instances": 2}}
    return {"metadata": {"name": "lr-1-spark", "namespace": "ns"}, "spec": {**base, **spec}}


def test_spark_submit_runs_the_same_file_arguments_and_conf_locally(tmp_path):
    (tmp_path / "spark_app").mkdir()
    (tmp_path / "spark_app" / "main.py").write_text("")
    plan = submission(
        app(arguments=["--source", "file:///lake", "--latest-schema", "/opt/reprise/conf/schema.json"],
            sparkConf={"spark.master": "k8s://x", "spark.sql.shuffle.partitions": "4",
                       "spark.jars": "local:///opt/reprise/extra.jar"},
            hadoopConf={"fs.s3a.endpoint": "http://minio:9000"}, deps={"pyFiles": ["local:///opt/reprise/lib.zip"]}),
        spark_submit="/venv/spark-submit", path_map={"/opt/reprise": str(tmp_path), "/opt/reprise/conf": "/m/conf"},
        extra_conf={"spark.jars": "/cache/kafka.jar", "spark.ui.enabled": "false"}, python="/venv/python")
    assert plan.argv == [
        "/venv/spark-submit", "--master", "local[2]", "--deploy-mode", "client", "--name", "lr-1-spark",
        "--driver-memory", "512m", "--jars", f"{tmp_path}/extra.jar,/cache/kafka.jar",
        "--py-files", f"{tmp_path}/lib.zip",
        "--conf", "spark.hadoop.fs.s3a.endpoint=http://minio:9000", "--conf", "spark.sql.shuffle.partitions=4",
        "--conf", "spark.ui.enabled=false",
        f"{tmp_path}/spark_app/main.py", "--source", "file:///lake", "--latest-schema", "/m/conf/schema.json",
    ]
    assert plan.env["PYSPARK_PYTHON"] == "/venv/python"


def test_what_cannot_run_here_is_a_submission_error(tmp_path):
    with pytest.raises(SubmissionError, match="Python applications only"):
        submission(app(type="Scala"), spark_submit="s", path_map={})
    with pytest.raises(SubmissionError, match="does not exist"):
        submission(app(), spark_submit="s", path_map={"/opt/reprise": str(tmp_path)})
