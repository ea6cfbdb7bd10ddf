"""Verify before cutover, end to end on the real platform (issue 20): a Parallel Reconsume whose verify Job
counts the rows of the replay's sink against the topic (`row_count_check`), run by the node agent as a real
Job's pod. It passes and completes; with a planted bug in the replay's handler it ends Failed with
VerifyFailed and the Job's message, keeps its children, and passes after a fix by hand and a re-run; and a
shadow hold keeps following live traffic, verifies, waits for the cutover's approval and tears down."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from reprise_operator.shared.constants import replay_group_name

from .scenario import (
    PARTITIONS,
    KeepProducing,
    Ledger,
    apply,
    assert_children_gone,
    committed,
    conditions,
    end_offsets,
    get,
    reconsume,
    wait_phase,
)
from tests.fixtures.kube import wait_for

pytestmark = pytest.mark.integration

CHECK_IMAGE = "reprise-test/row-count:dev"


def verify_spec(sink: str) -> dict:
    return {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "rows",
                        "image": CHECK_IMAGE,
                        "command": ["python", "-m", "tests.integration.operator.row_count_check"],
                        "env": [
                            {"name": "REPRISE_TEST_SINK_DIR", "value": sink},
                            {"name": "REPRISE_TERMINATION_LOG", "value": "/dev/termination-log"},
                        ],
                    }
                ]
            }
        },
        "timeout": "3m",
    }


def verification(kube, namespace: str, name: str) -> dict:
    return ((get(kube, namespace, "reconsume", name) or {}).get("status") or {}).get("verification") or {}


def keep(body: dict, name: str) -> dict:
    """With REPRISE_CAPTURE_STATUSES=<folder>, record the object for the Argo CD health tests (tests/unit/argocd)."""
    folder = os.environ.get("REPRISE_CAPTURE_STATUSES")
    if folder:
        body = json.loads(json.dumps(body))
        body["metadata"].pop("managedFields", None)
        Path(folder, f"reconsume-{name}.json").write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    return body


def test_a_passing_check_lets_the_parallel_replay_complete(kube, kafka, operator, namespace, topic_name, live_service):
    with KeepProducing(kafka.bootstrap, topic_name):
        body = reconsume(
            "checked",
            kafka.bootstrap,
            topic_name,
            "Parallel",
            "accounts",
            str(live_service),
            verify=verify_spec(str(live_service)),
        )
        apply(kube, namespace, body)
        done = wait_phase(kube, namespace, "reconsume", "checked", "Complete", timeout=300, operator=operator)
    status = done["status"]
    assert status["verification"]["state"] == "Passed" and status["verification"]["run"] == 1
    verified = conditions(done)["Verified"]
    assert (verified["status"], verified["reason"]) == ("True", "VerifyPassed")
    assert "checked-verify-1" in verified["message"]
    assert get(kube, namespace, "job", "checked-verify-1") is None, "a completed replay removes its check's Job"
    assert_children_gone(kube, kafka, namespace, "checked", replay_group_name(namespace, "checked"), topic_name)


def test_a_planted_mismatch_fails_with_the_jobs_message_keeps_the_children_and_a_rerun_passes_after_a_fix(
    kube, kafka, operator, namespace, topic_name, live_service
):
    group = replay_group_name(namespace, "lossy")
    body = reconsume(
        "lossy",
        kafka.bootstrap,
        topic_name,
        "Parallel",
        "accounts",
        str(live_service),
        verify=verify_spec(str(live_service)),
    )
    env = body["spec"]["consumer"]["env"]
    env[0] = {"name": "REPRISE_HANDLER", "value": "tests.integration.operator.lossy_sink:record"}
    env.append({"name": "REPRISE_TEST_DROP_KEY", "value": "user-13"})
    apply(kube, namespace, body)

    def verifying():
        found = get(kube, namespace, "reconsume", "lossy") or {}
        verified = conditions(found).get("Verified") or {}
        return found if verified.get("reason") == "VerifyRunning" or verified.get("status") == "False" else None

    running = wait_for(verifying, 300, "the check to start", interval=0.5)
    if conditions(running)["Verified"]["reason"] == "VerifyRunning":
        keep(running, "verify-00-running")
    failed = keep(
        wait_phase(kube, namespace, "reconsume", "lossy", "Failed", timeout=300, operator=operator), "verify-01-failed"
    )
    reason = conditions(failed)["Failed"]
    assert reason["reason"] == "VerifyFailed", reason
    # The Job's own termination message, through the node agent's termination-log file, reaches the condition.
    assert "lossy-verify-1" in reason["message"] and "row count mismatch" in reason["message"], reason
    assert "rows in the sink for" in reason["message"]
    assert conditions(failed)["Verified"]["status"] == "False"
    assert failed["status"]["verification"]["state"] == "Failed"
    # Kept for inspection: the standby Deployment, the replay group's offsets and the check's Job.
    assert get(kube, namespace, "deployment", "lossy-replay") is not None
    assert committed(kafka.bootstrap, group, topic_name, PARTITIONS), "the replay group must be kept"
    assert get(kube, namespace, "job", "lossy-verify-1") is not None

    # A fix by hand: the lost rows written to the sink; then the check runs again, without replaying.
    positions = committed(kafka.bootstrap, group, topic_name, PARTITIONS)
    ledger = Ledger.read(live_service, topic_name)
    fix = "".join(
        f"R {topic_name} {p} {o}\n"
        for p, stop in positions.items()
        for o in range(stop)
        if ledger.replay.get(p, {}).get(o, 0) == 0
    )
    assert fix, "the planted bug lost no record"
    (live_service / "replay-fix-by-hand.log").write_text(fix)
    kube.kubectl("annotate", "reconsume", "lossy", "-n", namespace, "reprise.io/reverify=after-fix")

    # The phase stays Failed until the operator takes the annotation; only then may Failed mean a failed rerun.
    def rerun_taken():
        found = get(kube, namespace, "reconsume", "lossy") or {}
        return found if ((found.get("status") or {}).get("verification") or {}).get("rerun") == "after-fix" else None

    wait_for(rerun_taken, 120, "the operator to take the reverify annotation", interval=0.5)
    done = wait_phase(kube, namespace, "reconsume", "lossy", "Complete", timeout=300, operator=operator)
    status = done["status"]
    assert status["verification"]["run"] == 2 and status["verification"]["rerun"] == "after-fix"
    assert status["verification"]["state"] == "Passed"
    assert conditions(done)["Failed"]["status"] == "False"
    assert_children_gone(kube, kafka, namespace, "lossy", group, topic_name)


def test_a_shadow_hold_follows_live_traffic_verifies_and_tears_down_on_approval(
    kube, kafka, operator, namespace, topic_name, live_service
):
    group = replay_group_name(namespace, "shadow")
    with KeepProducing(kafka.bootstrap, topic_name) as producer:
        body = reconsume(
            "shadow",
            kafka.bootstrap,
            topic_name,
            "Parallel",
            "accounts",
            str(live_service),
            verify=verify_spec(str(live_service)),
            approval="Manual",
        )
        body["spec"]["completion"]["hold"] = "UntilCutover"
        body["metadata"]["annotations"] = {"reprise.io/approve": "true"}  # the plan's approval, not the cutover's
        apply(kube, namespace, body)

        def awaiting():
            found = get(kube, namespace, "reconsume", "shadow") or {}
            if (found.get("status") or {}).get("phase") == "Failed":
                raise AssertionError(json.dumps(found["status"], indent=1))
            cutover = conditions(found).get("CutoverApproved")
            return found if cutover and cutover["reason"] == "AwaitingCutover" else None

        held = keep(
            wait_for(awaiting, 300, "the shadow to verify and wait for the cutover", interval=1.0),
            "shadow-hold-00-running",
        )
        assert held["status"]["phase"] == "Running"
        assert conditions(held)["Verified"]["status"] == "True"
        ends_at_verify = end_offsets(kafka.bootstrap, topic_name, PARTITIONS)
        written_at_verify = producer.written
        # While it holds, it follows the live topic: the replay group keeps moving and its lag stays bounded.
        lags = []
        for _ in range(6):
            time.sleep(2)
            at = committed(kafka.bootstrap, group, topic_name, PARTITIONS)  # first: the ends can only grow since
            ends = end_offsets(kafka.bootstrap, topic_name, PARTITIONS)
            lags.append(sum(ends[p] - at.get(p, 0) for p in ends))
            assert (get(kube, namespace, "reconsume", "shadow") or {})["status"]["phase"] == "Running"
        assert producer.written > written_at_verify, "live traffic must flow during the hold"
        at = committed(kafka.bootstrap, group, topic_name, PARTITIONS)
        assert any(at[p] > ends_at_verify[p] for p in ends_at_verify), "the shadow stopped following the live topic"
        # 40 records/s of live traffic; a following shadow stays within a few seconds of it, not minutes.
        print(f"shadow hold: lag behind the live topic at 2 s samples: {lags}")
        assert max(lags) < 600, lags
        kube.kubectl("annotate", "reconsume", "shadow", "-n", namespace, "reprise.io/approve-cutover=true")
        done = keep(
            wait_phase(kube, namespace, "reconsume", "shadow", "Complete", timeout=240, operator=operator),
            "shadow-hold-01-complete",
        )
    assert (conditions(done)["CutoverApproved"]["status"], done["status"]["verification"]["state"]) == (
        "True",
        "Passed",
    )
    ledger = Ledger.read(live_service, topic_name)
    assert any(max(ledger.replay.get(p, {0: 0})) >= ends_at_verify[p] for p in range(PARTITIONS)), (
        "the shadow processed live records written after it was verified"
    )
    assert_children_gone(kube, kafka, namespace, "shadow", group, topic_name)


def test_deleting_a_replay_that_failed_its_check_removes_what_it_kept(
    kube, kafka, operator, namespace, topic_name, live_service
):
    group = replay_group_name(namespace, "kept")
    body = reconsume(
        "kept",
        kafka.bootstrap,
        topic_name,
        "Parallel",
        "accounts",
        str(live_service),
        verify=verify_spec(str(live_service)),
    )
    env = body["spec"]["consumer"]["env"]
    env[0] = {"name": "REPRISE_HANDLER", "value": "tests.integration.operator.lossy_sink:record"}
    env.append({"name": "REPRISE_TEST_DROP_KEY", "value": "user-7"})
    apply(kube, namespace, body)
    failed = wait_phase(kube, namespace, "reconsume", "kept", "Failed", timeout=300, operator=operator)
    assert conditions(failed)["Failed"]["reason"] == "VerifyFailed"
    assert get(kube, namespace, "deployment", "kept-replay") is not None
    kube.kubectl("delete", "reconsume", "kept", "-n", namespace, "--timeout=180s")
    assert get(kube, namespace, "reconsume", "kept") is None
    assert_children_gone(kube, kafka, namespace, "kept", group, topic_name)
