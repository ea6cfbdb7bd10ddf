"""The replay Deployment and Job builders: clone the service, never its labels or credentials."""

import pytest

from reprise_operator.constants import child_labels
from reprise_operator.workloads import (
    KAFKA_CONFIG_DIR,
    Owner,
    merge_env,
    replay_deployment_manifest,
    worker_job_manifest,
)

OWNER = Owner("reprise.io/v1alpha1", "Reconsume", "add-locale", "uid-1")
LIVE_TEMPLATE = {
    "metadata": {"labels": {"app": "accounts"}, "annotations": {"team": "core"}},
    "spec": {
        "serviceAccountName": "accounts",
        "containers": [
            {
                "name": "app",
                "image": "registry/accounts:1.4",
                "env": [{"name": "DB_URL", "value": "postgres://db"}, {"name": "REPRISE_ROLE", "value": "live"}],
                "ports": [{"containerPort": 8000}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8000}},
            },
            {"name": "sidecar", "image": "envoy"},
        ],
    },
}


def build(**overrides):
    args = dict(
        owner=OWNER,
        name="add-locale-replay",
        namespace="accounts",
        labels=child_labels("Reconsume", "add-locale", "replay-consumer"),
        pod_template=LIVE_TEMPLATE,
        replicas=3,
        worker_env={"REPRISE_REPLAY_GROUP": "reprise-accounts-add-locale", "REPRISE_ROLE": "replay"},
        user_env=[{"name": "REPRISE_HANDLER", "value": "accounts.replay:handle"}],
        kafka_secret="accounts-kafka-client",
    )
    args.update(overrides)
    return replay_deployment_manifest(**args)


def test_clone_keeps_service_identity_but_not_its_labels():
    deployment = build()
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"]["reprise.io/replay"] == "add-locale"
    assert "app" not in template["metadata"]["labels"], "a Service selecting app=accounts must not reach replay pods"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert template["spec"]["serviceAccountName"] == "accounts"
    assert template["metadata"]["annotations"] == {"team": "core"}
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert deployment["spec"]["replicas"] == 3


def test_worker_container_runs_the_replay_worker_with_merged_env():
    worker = build()["spec"]["template"]["spec"]["containers"][0]
    assert worker["command"] == ["python", "-m", "replay_worker"]
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env == {
        "DB_URL": "postgres://db",
        "REPRISE_ROLE": "replay",
        "REPRISE_REPLAY_GROUP": "reprise-accounts-add-locale",
        "REPRISE_HANDLER": "accounts.replay:handle",
        "REPRISE_METRICS_PORT": "9400",
    }
    assert worker["ports"] == [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]
    assert "readinessProbe" not in worker
    assert worker["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_credentials_only_by_secret_volume():
    spec = build()["spec"]["template"]["spec"]
    worker = spec["containers"][0]
    assert {"name": "reprise-kafka-config", "mountPath": KAFKA_CONFIG_DIR, "readOnly": True} in worker["volumeMounts"]
    assert spec["volumes"][-1]["secret"]["secretName"] == "accounts-kafka-client"
    assert all("sasl" not in e["name"].lower() for e in worker["env"])


def test_every_container_is_restricted_unless_it_says_otherwise():
    template = {"spec": {"containers": [{"name": "a", "securityContext": {"runAsNonRoot": False}}]}}
    spec = build(pod_template=template)["spec"]["template"]["spec"]
    security = spec["containers"][0]["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security["runAsNonRoot"] is False, "an explicit user setting is kept"
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_named_container_and_unknown_name():
    spec = build(container_name="sidecar")["spec"]["template"]["spec"]
    assert spec["containers"][1]["command"] == ["python", "-m", "replay_worker"]
    assert "command" not in spec["containers"][0]
    with pytest.raises(ValueError, match="spec.consumer.container 'nope' is not in the pod template"):
        build(container_name="nope")


def test_builder_does_not_modify_the_live_template():
    build()
    assert LIVE_TEMPLATE["spec"]["containers"][0].get("command") is None
    assert LIVE_TEMPLATE["metadata"]["labels"] == {"app": "accounts"}


def test_merge_env_later_wins_and_keeps_order():
    merged = merge_env([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], [{"name": "A", "value": "3"}])
    assert merged == [{"name": "A", "value": "3"}, {"name": "B", "value": "2"}]


def test_worker_job_never_restarts_forever():
    job = worker_job_manifest(
        owner=OWNER, name="bf-emit", namespace="ns", labels={"reprise.io/replay": "bf"}, image="reprise:dev",
        args=["backfill-topic"], worker_env={"REPRISE_TOPIC": "users"}, kafka_secret=None,
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 3
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
    assert "volumes" not in pod
