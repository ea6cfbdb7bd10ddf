"""The standby Deployment a Reconsume makes from the service's pod template, on the real platform: the
service container named by `consumer.container` is the one that gets the resources and whose handler is used,
and what stops Reprise from making its children (a name taken by someone else's object, a container name the
template does not have) reaches the resource's status with a reason, instead of only the operator's log."""

from __future__ import annotations

import json

import pytest

from .scenario import (
    LIVE_IMAGE,
    PARTITIONS,
    HISTORY,
    Ledger,
    apply,
    live_deployment,
    produce,
    reconsume,
    wait_caught_up,
    wait_phase,
)
from tests.fixtures.kube import wait_for

pytestmark = pytest.mark.integration

RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "768Mi"}}


def condition(kube, namespace: str, name: str, type_: str) -> dict | None:
    out = kube.kubectl("get", "reconsume", name, "-n", namespace, "-o", "json", check=False)
    if out.returncode != 0:
        return None
    for found in (json.loads(out.stdout).get("status") or {}).get("conditions") or []:
        if found["type"] == type_:
            return found
    return None


def test_a_service_container_listed_second_gets_the_resources_and_its_handler_is_used(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, HISTORY)
    sink = tmp_path / "processed"
    sink.mkdir()
    live = live_deployment("accounts", kafka.bootstrap, "accounts-group", topic_name, sink)
    pod_spec = live["spec"]["template"]["spec"]
    service = pod_spec["containers"][0]
    # The handler is the service's own setting, on its container; `spec.consumer.env` does not repeat it.
    service["env"] += [
        {"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"},
        {"name": "REPRISE_BATCH_SIZE", "value": "100"},
    ]
    # A sidecar first, as a mesh injects it: not the service, no handler of its own.
    pod_spec["containers"] = [
        {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "args": ["--config", "/etc/envoy"]},
        service,
    ]
    apply(kube, namespace, live)
    wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)

    body = reconsume("second", kafka.bootstrap, topic_name, "Parallel", "accounts", str(sink))
    body["spec"]["consumer"] = {
        "deploymentRef": {"name": "accounts"},
        "container": "app",
        "replicas": 1,
        "resources": RESOURCES,
    }
    apply(kube, namespace, body)
    wait_phase(kube, namespace, "reconsume", "second", "Running", 90, operator)
    deployment = json.loads(kube.kubectl("get", "deployment", "second-replay", "-n", namespace, "-o", "json").stdout)
    proxy, worker = deployment["spec"]["template"]["spec"]["containers"]
    assert (proxy["name"], worker["name"]) == ("proxy", "app")
    assert worker["resources"] == RESOURCES
    assert not proxy.get("resources"), "the sidecar keeps what it had"
    assert worker["command"] == ["python", "-m", "replay_worker"] and "command" not in proxy
    env = {e["name"]: e.get("value") for e in worker["env"]}
    assert env["REPRISE_HANDLER"] == "tests.integration.replay_worker.sink:record"

    done = wait_phase(kube, namespace, "reconsume", "second", "Complete", 240, operator)
    ledger = Ledger.read(sink, topic_name)
    for part in done["status"]["progress"]["partitions"]:
        replay = ledger.replay.get(part["partition"], {})
        assert all(replay.get(o, 0) >= 1 for o in range(part["handoverOffset"])), (
            f"partition {part['partition']}: the service container's handler did not replay every record"
        )


def template(sink: str) -> dict:
    return {
        "metadata": {"labels": {"app": "template"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": LIVE_IMAGE,
                    "command": ["python", "-c", "pass"],
                    "env": [
                        {"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"},
                        {"name": "REPRISE_TEST_SINK_DIR", "value": sink},
                    ],
                }
            ]
        },
    }


def test_a_child_name_taken_by_another_object_waits_in_status_and_continues_once_freed(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, PARTITIONS)
    theirs = live_deployment("taken-replay", kafka.bootstrap, "unrelated", topic_name, tmp_path)
    theirs["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example.com/theirs:1"
    apply(kube, namespace, theirs)
    body = reconsume("taken", kafka.bootstrap, topic_name, "Parallel", "unused", str(tmp_path))
    body["spec"]["consumer"] = {"template": template(str(tmp_path)), "replicas": 1}
    apply(kube, namespace, body)
    waiting = wait_for(
        lambda: (c := condition(kube, namespace, "taken", "Waiting")) and c["status"] == "True" and c,
        60,
        "the Waiting condition",
    )
    assert waiting["reason"] == "NameTaken", waiting
    assert f"Deployment {namespace}/taken-replay exists and is not owned by this resource" in waiting["message"]
    assert (
        json.loads(kube.kubectl("get", "reconsume", "taken", "-n", namespace, "-o", "json").stdout)["status"]["phase"]
        == "PlanReady"
    )
    kube.kubectl("delete", "deployment", "taken-replay", "-n", namespace, "--wait=true")
    wait_phase(kube, namespace, "reconsume", "taken", "Running", 90, operator)
    assert condition(kube, namespace, "taken", "Waiting")["status"] == "False"


def test_a_container_name_the_template_lacks_waits_in_status_with_the_field_named(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, PARTITIONS)
    body = reconsume("nameless", kafka.bootstrap, topic_name, "Parallel", "unused", str(tmp_path))
    body["spec"]["consumer"] = {"template": template(str(tmp_path)), "container": "service", "replicas": 1}
    apply(kube, namespace, body)
    waiting = wait_for(
        lambda: (c := condition(kube, namespace, "nameless", "Waiting")) and c["status"] == "True" and c,
        60,
        "the Waiting condition",
    )
    assert waiting["reason"] == "ContainerNotFound", waiting
    assert "spec.consumer.container 'service' is not in the pod template (it has: app)" in waiting["message"]
