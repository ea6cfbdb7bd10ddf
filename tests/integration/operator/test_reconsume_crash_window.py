"""The crash window between creating a replay and recording it (issue 14): the plan is stored before the
Deployment is made, so an operator killed right after making it does not plan again.

A Reconsume with a `duration` start and `approval: Automatic` runs while producers keep writing, so a plan
made a few seconds later starts at other offsets. An admission policy (a real ValidatingAdmissionPolicy on the
local platform's API server) refuses the status write that would record phase Running, which holds the
operator exactly between "Deployment created" and "status says so"; there it is killed with SIGKILL, the
policy is removed, the workers publish their start records S, and the operator starts again. Then
`status.plan`'s start offsets are the S records in the handover topic, and the replay completes once, with
every record from the boundary processed exactly once.
"""

from __future__ import annotations

import json

import pytest
import yaml

from replay_worker.topic.handover_topic import HandoverTopic
from reprise_operator.shared.constants import replay_deployment_name, replay_id

from .scenario import (
    PARTITIONS,
    KeepProducing,
    Ledger,
    apply,
    handover_topic_of,
    reconsume,
    wait_caught_up,
    wait_phase,
)
from tests.fixtures.kube import wait_for

pytestmark = pytest.mark.integration

NAME = "crash"


def hold_before_running(namespace: str) -> list[dict]:
    """A policy and its binding refusing, in `namespace`, any Reconsume status write that says Running."""
    policy = f"reprise-test-hold-{namespace}"[:63]
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["reprise.io"],
                            "apiVersions": ["*"],
                            "operations": ["UPDATE"],
                            "resources": ["reconsumes/status"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "!has(object.status) || !has(object.status.phase) || object.status.phase != 'Running'",
                        "message": "held by the crash-window test: no status write says Running",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
            },
        },
    ]


def status_of(kube, namespace: str, name: str) -> dict:
    out = kube.kubectl("get", "reconsume", name, "-n", namespace, "-o", "json", check=False)
    return (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def running_is_refused(kube, namespace: str, name: str) -> bool:
    """Whether the API server refuses a status write saying Running (dry run: nothing is stored)."""
    out = kube.kubectl(
        "patch",
        "reconsume",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Running"}}),
        "--dry-run=server",
        check=False,
    )
    return out.returncode != 0 and "held by the crash-window test" in out.stderr


def plan_starts(status: dict) -> dict[int, int]:
    return {p["partition"]: p["startOffset"] for p in (status.get("plan") or {}).get("partitions") or []}


def test_an_operator_killed_after_creating_the_deployment_keeps_the_plan_the_workers_started_from(
    kube, kafka, operator, namespace, topic_name, live_service
):
    hold = hold_before_running(namespace)
    policy_yaml = yaml.safe_dump_all(hold)
    kube.kubectl("apply", "-f", "-", input=policy_yaml)
    try:
        with KeepProducing(kafka.bootstrap, topic_name) as producer:
            # The policy is in force once it refuses a write (admission policies load asynchronously).
            probe = reconsume(
                "probe", kafka.bootstrap, topic_name, "Handover", "accounts", str(live_service), approval="Manual"
            )
            apply(kube, namespace, probe)
            wait_for(lambda: status_of(kube, namespace, "probe").get("phase") == "PlanReady", 90, "the probe's plan")
            wait_for(lambda: running_is_refused(kube, namespace, "probe"), 60, "the admission policy in force")
            kube.kubectl("delete", "reconsume", "probe", "-n", namespace, "--timeout=90s")
            # Ten seconds of live traffic, so a `5s` start falls among records still being written and a plan
            # made later starts later.
            wait_for(lambda: producer.written >= producer.rate * 10, 60, "ten seconds of live traffic")

            body = reconsume(
                NAME,
                kafka.bootstrap,
                topic_name,
                "Handover",
                "accounts",
                str(live_service),
                start={"duration": "5s"},
                approval="Automatic",
            )
            apply(kube, namespace, body)
            deployment = replay_deployment_name(NAME)
            wait_for(
                lambda: kube.kubectl("get", "deployment", deployment, "-n", namespace, check=False).returncode == 0,
                90,
                f"Deployment {deployment}",
            )
            operator.kill()
            stored_before_restart = status_of(kube, namespace, NAME)
            kube.kubectl("delete", "-f", "-", "--ignore-not-found", input=policy_yaml)

            uid = json.loads(kube.kubectl("get", "reconsume", NAME, "-n", namespace, "-o", "json").stdout)["metadata"][
                "uid"
            ]
            rid = replay_id(namespace, NAME, uid)
            handover = HandoverTopic(kafka.bootstrap, handover_topic_of(namespace))

            def published_starts() -> dict[int, int] | None:
                found = handover.read_replay(rid).start_offsets()
                return {p: o for (_, p), o in found.items()} if len(found) == PARTITIONS else None

            try:
                s_records = wait_for(published_starts, 120, "the workers' start records S in the handover topic")
            finally:
                handover.close()
            # A plan made now would start later than the one the workers started from.
            wait_for(lambda: producer.written >= producer.rate * 13, 60, "live traffic after the start records")
            operator.start()
            started = wait_for(
                lambda: (
                    status_of(kube, namespace, NAME).get("phase") in ("Running", "Draining", "Complete")
                    and status_of(kube, namespace, NAME)
                ),
                300,  # a bound: a full suite on two cores has taken the restarted operator past 120 s
                "the restarted operator to record the start",
            )
            assert plan_starts(started) == s_records, (
                f"status.plan starts {plan_starts(started)} differ from the workers' S records {s_records}"
            )
            done = wait_phase(kube, namespace, "reconsume", NAME, "Complete", 240, operator)
        # Before the kill the plan was already stored, and it is the one the workers started from.
        assert stored_before_restart.get("phase") == "PlanReady", stored_before_restart
        assert plan_starts(stored_before_restart) == s_records
        assert min(s_records.values()) > 0, "a 5s start must fall after the history, or the test proves nothing"
        status = done["status"]
        assert plan_starts(status) == s_records
        events = json.loads(
            kube.kubectl(
                "get",
                "events",
                "-n",
                namespace,
                "-o",
                "json",
                "--field-selector",
                f"involvedObject.name={NAME},reason=Completed",
            ).stdout
        )
        assert sum(int(e.get("count") or 1) for e in events["items"]) == 1, "the replay must complete exactly once"
        ends = wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
        ledger = Ledger.read(live_service, topic_name)
        handover_offsets = {part["partition"]: part["handoverOffset"] for part in status["progress"]["partitions"]}
        for p in range(PARTITIONS):
            first_skipped = ledger.first_skipped(p, ends[p])
            replay, live = ledger.replay.get(p, {}), ledger.live.get(p, {})
            for offset in range(first_skipped, ends[p]):
                total = live.get(offset, 0) + replay.get(offset, 0)
                assert total == 1, f"partition {p} offset {offset}: processed {total} times"
            below = min(first_skipped, handover_offsets[p])
            assert all(replay.get(o, 0) >= 1 for o in range(s_records[p], below)), (
                f"partition {p}: the replay missed records between S={s_records[p]} and {below}"
            )
            assert all(replay.get(o, 0) == 0 for o in range(0, s_records[p])), (
                f"partition {p}: the replay processed records before its start S={s_records[p]}"
            )
    finally:
        kube.kubectl("delete", "-f", "-", "--ignore-not-found", input=policy_yaml, check=False)
        if operator.popen is None or operator.popen.poll() is not None:
            operator.start()  # the session's operator runs on for the next test, also when this one failed
