"""Failing child pods into status: the root cause from the termination message and the command for the log."""

from __future__ import annotations

import json

from reprise_operator.rules.pod_failures import failing_containers, pod_failure_message, root_cause

HANDLER_ERROR = "REPRISE_HANDLER accounts.replay:handle: cannot import accounts.replay (No module named 'accounts')"


def pod(name: str, *statuses: dict, init: tuple[dict, ...] = ()) -> dict:
    return {
        "metadata": {"name": name},
        "status": {"containerStatuses": list(statuses), "initContainerStatuses": list(init)},
    }


def crash_looping(container: str, message: str, restarts: int = 5) -> dict:
    return {
        "name": container,
        "restartCount": restarts,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
        "lastState": {"terminated": {"exitCode": 2, "reason": "Error", "message": message}},
    }


def test_a_crash_looping_worker_is_named_with_its_root_cause_and_its_previous_log():
    log_tail = "\n".join(
        [
            json.dumps({"level": "info", "msg": "starting"}),
            json.dumps({"level": "error", "msg": HANDLER_ERROR}),
        ]
    )
    failures = failing_containers([pod("journey-replay-7c9-abcde", crash_looping("worker", log_tail))])
    assert len(failures) == 1
    message = pod_failure_message("shop", failures)
    assert message == (
        f"pod journey-replay-7c9-abcde container worker is CrashLoopBackOff (5 restarts): {HANDLER_ERROR}; "
        "its log: kubectl logs -n shop journey-replay-7c9-abcde -c worker --previous"
    )


def test_running_ready_and_succeeded_containers_are_not_failures():
    running = {"name": "worker", "restartCount": 1, "state": {"running": {}}, "lastState": {}}
    done = {"name": "worker", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    starting = {"name": "worker", "state": {"waiting": {"reason": "ContainerCreating"}}}
    assert failing_containers([pod("a", running), pod("b", done), pod("c", starting)]) == []


def test_a_failed_driver_gives_the_jvm_root_cause_and_its_log_without_previous():
    trace = "\n".join(
        [
            "Traceback (most recent call last):",
            "py4j.protocol.Py4JJavaError: An error occurred while calling o55.parquet.",
            ": java.lang.RuntimeException: java.lang.ClassNotFoundException: Class "
            "org.apache.hadoop.fs.s3a.S3AFileSystem not found",
            "\tat org.apache.hadoop.conf.Configuration.getClass(Configuration.java:2737)",
            "Caused by: java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found",
            "\tat org.apache.hadoop.conf.Configuration.getClassByName(Configuration.java:2641)",
        ]
    )
    driver = {
        "name": "spark-kubernetes-driver",
        "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": trace}},
    }
    [failure] = failing_containers([pod("lake-spark-driver", driver)])
    assert failure.cause == "java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found"
    assert pod_failure_message("shop", [failure]).endswith(
        "its log: kubectl logs -n shop lake-spark-driver -c spark-kubernetes-driver"
    )


def test_an_image_that_cannot_be_pulled_says_the_kubelets_message():
    waiting = {
        "name": "app",
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image x"}},
    }
    [failure] = failing_containers([pod("p", init=(waiting,))])
    assert (failure.reason, failure.cause, failure.previous) == ("ImagePullBackOff", "Back-off pulling image x", False)


def test_no_message_is_said_and_many_failures_are_counted():
    failures = failing_containers([pod(f"p{i}", crash_looping("worker", "", restarts=1)) for i in range(5)])
    message = pod_failure_message("ns", failures)
    assert "container worker is CrashLoopBackOff (1 restart) (it wrote no termination message)" in message
    assert message.endswith("and 2 more failing container(s)")


def test_root_cause_is_bounded_and_prefers_the_last_line():
    assert root_cause("x" * 5000).endswith("...") and len(root_cause("x" * 5000)) == 600
    assert root_cause("starting\nFileNotFoundError: /etc/reprise/kafka/x") == "FileNotFoundError: /etc/reprise/kafka/x"
    assert root_cause("  \n") == ""
