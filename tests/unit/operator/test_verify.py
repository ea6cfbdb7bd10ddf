"""Verify before cutover's pure rules: the gate, the approvals, the re-run, the check's Job and its message."""

import json
from datetime import timedelta

import pytest

from reprise_operator.api import ReconsumeSpec
from reprise_operator.api.verify import Verify
from reprise_operator.rules.progress import PartitionView
from reprise_operator.rules.verify import (
    MESSAGE_LIMIT,
    cutover_approved,
    failure_message,
    next_gate,
    rerun_requested,
    shadow_caught_up,
    termination_message,
    verify_env,
    verify_job,
    verify_job_name,
)
from reprise_operator.rules.workloads import Owner

OWNER = Owner("reprise.io/v1alpha1", "Reconsume", "orders-v2", "0b1c2d3e-aaaa")


@pytest.mark.parametrize(
    "caught_up, has_verify, hold, state, approved, expected",
    [
        (False, True, False, None, True, "follow"),
        (False, True, False, "Waiting", True, "follow"),
        (True, True, False, "Waiting", True, "verify"),
        (True, True, False, None, True, "verify"),
        # once the Job runs, lag coming back (live traffic during a hold) does not stop it
        (False, True, True, "Running", False, "verify"),
        (True, True, False, "Passed", True, "cutover"),
        (False, True, False, "Passed", True, "cutover"),
        (True, True, True, "Passed", False, "await-cutover"),
        (True, True, True, "Passed", True, "cutover"),
        (True, True, False, "Failed", True, "failed"),
        (False, True, False, "Failed", True, "failed"),
        # a hold without a check waits for the approval only
        (True, False, True, None, False, "await-cutover"),
        (True, False, True, None, True, "cutover"),
        (False, False, True, None, True, "follow"),
    ],
)
def test_next_gate(caught_up, has_verify, hold, state, approved, expected):
    assert (
        next_gate(caught_up=caught_up, has_verify=has_verify, hold=hold, state=state, cutover_approved=approved)
        == expected
    )


def test_cutover_approval():
    assert cutover_approved("Automatic", {})
    assert not cutover_approved("Manual", {})
    # the plan's approval is not the cutover's
    assert not cutover_approved("Manual", {"reprise.io/approve": "true"})
    assert cutover_approved("Manual", {"reprise.io/approve-cutover": "true"})
    assert not cutover_approved("Manual", {"reprise.io/approve-cutover": "false"})


def test_rerun_only_for_a_new_value():
    assert rerun_requested({}, None) is None
    assert rerun_requested({"reprise.io/reverify": "1"}, None) == "1"
    assert rerun_requested({"reprise.io/reverify": "1"}, "1") is None
    assert rerun_requested({"reprise.io/reverify": "2"}, "1") == "2"
    assert rerun_requested({"reprise.io/reverify": ""}, None) is None


def test_job_names_are_per_run_and_bounded():
    assert verify_job_name("orders-v2", 1) == "orders-v2-verify-1"
    assert verify_job_name("orders-v2", 2) != verify_job_name("orders-v2", 1)
    long = verify_job_name("x" * 63, 12)
    assert len(long) <= 63


def _verify(**extra) -> Verify:
    return Verify.model_validate(
        {
            "template": {
                "metadata": {"labels": {"team": "orders"}},
                "spec": {
                    "containers": [
                        {
                            "name": "check",
                            "image": "reprise/check:1",
                            "command": ["python", "-m", "checks.rows"],
                            "env": [
                                {"name": "SINK", "value": "orders-v2"},
                                {"name": "REPRISE_MODE", "value": "overridden"},
                            ],
                        }
                    ]
                },
            },
            **extra,
        }
    )


def test_env_tells_the_check_the_replay():
    env = verify_env(
        rid="ns/orders-v2/0b1c2d3e",
        name="orders-v2",
        mode="Parallel",
        topics=["orders", "refunds"],
        replay_group="reprise-ns-orders-v2",
        live_group="orders",
        bootstrap_servers="kafka:9092",
        plan={("orders", 1): (5, 9), ("orders", 0): (0, 3)},
    )
    assert env["REPRISE_REPLAY_ID"] == "ns/orders-v2/0b1c2d3e"
    assert env["REPRISE_TOPICS"] == "orders,refunds"
    assert env["REPRISE_REPLAY_GROUP"] == "reprise-ns-orders-v2"
    assert env["REPRISE_LIVE_GROUP"] == "orders"
    assert json.loads(env["REPRISE_PLAN"]) == [
        {"topic": "orders", "partition": 0, "startOffset": 0, "endOffset": 3},
        {"topic": "orders", "partition": 1, "startOffset": 5, "endOffset": 9},
    ]
    assert "REPRISE_REPLAY_GROUP" not in verify_env(
        rid="r",
        name="n",
        mode="Rewind",
        topics=["t"],
        replay_group=None,
        live_group="g",
        bootstrap_servers="k:1",
        plan={},
    )


def test_job_from_the_template():
    env = {"REPRISE_MODE": "Parallel", "REPRISE_REPLAY_NAME": "orders-v2"}
    job = verify_job(
        owner=OWNER, namespace="shop", kind="Reconsume", run=3, verify=_verify(retries=2, timeout="90s"), env=env
    )
    assert job["kind"] == "Job" and job["metadata"]["name"] == "orders-v2-verify-3"
    assert job["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    labels = job["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "verify" and labels["reprise.io/replay"] == "orders-v2"
    assert labels["reprise.io/verify-run"] == "3"
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["activeDeadlineSeconds"] == 90
    pod = job["spec"]["template"]
    assert (
        pod["metadata"]["labels"]["team"] == "orders" and pod["metadata"]["labels"]["reprise.io/replay"] == "orders-v2"
    )
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    got = {e["name"]: e["value"] for e in container["env"]}
    assert got["SINK"] == "orders-v2"
    assert got["REPRISE_MODE"] == "Parallel"  # Reprise's facts win over the template's
    assert container["command"] == ["python", "-m", "checks.rows"]


def test_job_keeps_a_termination_policy_the_user_chose():
    verify = _verify()
    verify.template["spec"]["containers"][0]["terminationMessagePolicy"] = "File"
    job = verify_job(owner=OWNER, namespace="shop", kind="Reconsume", run=1, verify=verify, env={})
    assert job["spec"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"] == "File"
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 600


def test_job_without_containers_names_the_field():
    with pytest.raises(ValueError, match="spec.verify.template.spec.containers"):
        verify_job(
            owner=OWNER,
            namespace="shop",
            kind="Reconsume",
            run=1,
            verify=Verify.model_validate({"template": {"spec": {}}}),
            env={},
        )


def _pod(finished: str, code: int, message: str = "") -> dict:
    terminated = {"exitCode": code, "finishedAt": finished, **({"message": message} if message else {})}
    return {"status": {"containerStatuses": [{"name": "check", "state": {"terminated": terminated}}]}}


def test_termination_message_of_the_newest_failed_pod():
    pods = [
        _pod("2026-01-01T00:00:01Z", 1, "rows differ: 3 of 100"),
        _pod("2026-01-01T00:00:09Z", 1, "rows differ: 2 of 100\n"),
        _pod("2026-01-01T00:00:10Z", 0, "ok"),
    ]
    assert termination_message(pods) == "rows differ: 2 of 100"
    assert termination_message([_pod("2026-01-01T00:00:01Z", 1)]) == ""
    assert termination_message([{"status": {}}]) == ""
    long = termination_message([_pod("t", 2, "x" * (MESSAGE_LIMIT + 50))])
    assert long.startswith("...") and len(long) == MESSAGE_LIMIT + 3


def test_failure_message_names_the_job():
    assert (
        failure_message("v-1", "BackoffLimitExceeded", "rows differ")
        == "verification Job v-1 failed (BackoffLimitExceeded): rows differ"
    )
    assert "wrote no termination message" in failure_message("v-1", "", "")


def _view(partition: int, position):
    return PartitionView("orders", partition, start=0, end=100, position=position)


def test_shadow_caught_up_at_the_live_group():
    live = {("orders", 0): 50, ("orders", 1): 70}
    assert shadow_caught_up([_view(0, 50), _view(1, 71)], live)
    assert not shadow_caught_up([_view(0, 49), _view(1, 71)], live)
    assert not shadow_caught_up([_view(0, None), _view(1, 71)], live)
    # a partition the live group never committed on: any position counts
    assert shadow_caught_up([_view(2, 0)], live)


PARALLEL = {
    "kafka": {"bootstrapServers": "kafka:9092"},
    "topics": ["orders"],
    "consumerGroup": "orders",
    "mode": "Parallel",
    "start": {"earliest": True},
    "consumer": {"deploymentRef": {"name": "orders"}},
}


def test_spec_accepts_verify_and_hold_on_parallel():
    spec = ReconsumeSpec.model_validate(
        {**PARALLEL, "verify": {"template": {"spec": {}}, "timeout": "2m"}, "completion": {"hold": "UntilCutover"}}
    )
    assert spec.verify is not None and spec.verify.timeout == timedelta(minutes=2)
    assert spec.completion.hold is not None and spec.completion.hold.value == "UntilCutover"


def test_spec_refuses_hold_on_handover_and_verify_on_rewind():
    with pytest.raises(ValueError, match="spec.completion.hold"):
        ReconsumeSpec.model_validate({**PARALLEL, "mode": "Handover", "completion": {"hold": "UntilCutover"}})
    rewind = {k: v for k, v in PARALLEL.items() if k != "consumer"}
    with pytest.raises(ValueError, match="spec.verify"):
        ReconsumeSpec.model_validate(
            {**rewind, "mode": "Rewind", "liveDeployment": {"name": "orders"}, "verify": {"template": {"spec": {}}}}
        )


def test_live_history_answers_with_a_sample_old_enough():
    from datetime import datetime, timezone

    from reprise_operator.rules.verify import LiveHistory

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    history = LiveHistory()
    history.add(t0, {("orders", 0): 10})
    assert history.as_of(t0 + timedelta(seconds=1)) is None
    history.add(t0 + timedelta(seconds=5), {("orders", 0): 60})
    assert history.as_of(t0 + timedelta(seconds=6)) == {("orders", 0): 10}
    assert history.as_of(t0 + timedelta(seconds=9)) == {("orders", 0): 60}


def test_a_failed_check_keeps_children_until_the_deletion():
    from reprise_operator.core.cutover import keeps_children

    from reprise_operator.core.lifecycle import Resource

    def resource(phase: str, reason: str | None) -> Resource:
        at = "2026-01-01T00:00:00Z"
        conditions = (
            [{"type": "Failed", "status": "True", "reason": reason, "lastTransitionTime": at}] if reason else []
        )
        return Resource("Reconsume", "reconsumes", {}, {"phase": phase, "conditions": conditions}, rt=None)  # type: ignore[arg-type]

    assert keeps_children(resource("Failed", "VerifyFailed"))
    assert not keeps_children(resource("Failed", "TopicNotFound"))
    assert not keeps_children(resource("Complete", None))


def test_a_lake_replays_check_is_told_the_backfill_topic_the_drain_group_and_the_live_topics():
    from pathlib import Path

    import yaml

    from reprise_operator.api import LakeReplaySpec
    from reprise_operator.kinds.lakereplay.steps import _verify_env
    from reprise_operator.core.lifecycle import Resource

    examples = Path(__file__).resolve().parents[3] / "examples"
    document = yaml.safe_load((examples / "lakereplay-then-reconsume.yaml").read_text())
    spec = LakeReplaySpec.model_validate(document["spec"])
    body = {"metadata": {"namespace": "accounts", "name": "lake", "uid": "0b1c2d3e-ffff"}, "spec": document["spec"]}
    status = {
        "children": {"backfillTopic": "reprise.backfill.lake", "replayGroup": "accounts-lake"},
        "plan": {"partitions": [{"topic": "users", "partition": 0, "startOffset": 7, "endOffset": 9, "records": 2}]},
    }
    env = _verify_env(Resource("LakeReplay", "lakereplays", body, status, rt=None), spec)  # type: ignore[arg-type]
    assert env["REPRISE_TOPICS"].split(",")[0] == "reprise.backfill.lake"
    assert "users" in env["REPRISE_TOPICS"].split(",")
    assert env["REPRISE_REPLAY_GROUP"] == "accounts-lake"
    assert env["REPRISE_MODE"] == f"Lake+{spec.then.reconsume.mode.value}"
    assert env["REPRISE_LIVE_GROUP"] == spec.then.reconsume.consumer_group
    assert json.loads(env["REPRISE_PLAN"]) == [{"topic": "users", "partition": 0, "startOffset": 7, "endOffset": 9}]
