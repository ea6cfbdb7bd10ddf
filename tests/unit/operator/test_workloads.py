"""The replay Deployment and Job builders: clone the service, never its labels or credentials."""

import pytest

from reprise_operator.shared.constants import child_labels
from reprise_operator.rules.workloads import (
    IMAGE_USER,
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
        owner=OWNER,
        name="bf-emit",
        namespace="ns",
        labels={"reprise.io/replay": "bf"},
        image="reprise:dev",
        args=["backfill-topic"],
        worker_env={"REPRISE_TOPIC": "users"},
        kafka_secret=None,
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 3
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
    assert "volumes" not in pod


def test_entrypoint_service_keeps_the_service_command_and_passes_only_reprise_env():
    template = {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry/accounts-jvm:2.0",
                    "command": ["java", "-cp", "/app/lib/*", "io.reprise.examples.accounts.Main"],
                    "args": ["--topic", "users"],
                    "env": [
                        {"name": "JAVA_TOOL_OPTIONS", "value": "-Xmx256m"},
                        {"name": "REPRISE_FORWARD_TOPIC", "value": "left.over"},
                    ],
                    "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9000}],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                }
            ]
        }
    }
    worker_env = {"REPRISE_ROLE": "replay", "REPRISE_HANDLER": "service:own-handler", "REPRISE_TOPICS": "users"}
    worker = build(pod_template=template, worker_env=worker_env, user_env=[], keep_command=True)["spec"]["template"][
        "spec"
    ]["containers"][0]
    assert worker["command"] == ["java", "-cp", "/app/lib/*", "io.reprise.examples.accounts.Main"]
    assert worker["args"] == ["--topic", "users"]
    env = {e["name"]: e["value"] for e in worker["env"]}
    # The service's handler is in its code: no delivery variable reaches it, not even one from its template.
    assert env == {
        "JAVA_TOOL_OPTIONS": "-Xmx256m",
        "REPRISE_ROLE": "replay",
        "REPRISE_TOPICS": "users",
        "REPRISE_METRICS_PORT": "9400",
    }
    # Its own ports stay; its `metrics` port gives way to the replay role's, which the liveness probe checks.
    assert worker["ports"] == [
        {"name": "http", "containerPort": 8080},
        {"name": "metrics", "containerPort": 9400, "protocol": "TCP"},
    ]
    assert "readinessProbe" not in worker
    assert worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_entrypoint_replay_worker_replaces_the_command():
    worker = build(keep_command=False)["spec"]["template"]["spec"]["containers"][0]
    assert worker["command"] == ["python", "-m", "replay_worker"] and worker["args"] == []


def test_delivery_is_required_only_for_the_python_worker():
    from reprise_operator.api import Consumer
    from reprise_operator.core.lifecycle import Failure
    from reprise_operator.core.standby import SERVICE_DELIVERY, consumer_delivery

    service = Consumer.model_validate({"deploymentRef": {"name": "accounts"}, "entrypoint": "Service"})
    assert consumer_delivery(service, LIVE_TEMPLATE) == SERVICE_DELIVERY
    worker = Consumer.model_validate({"deploymentRef": {"name": "accounts"}})
    assert worker.entrypoint.value == "ReplayWorker", "the documented default"
    with pytest.raises(Failure) as refused:
        consumer_delivery(worker, LIVE_TEMPLATE)
    assert refused.value.reason == "NoDelivery" and "REPRISE_HANDLER" in refused.value.message
    handled = Consumer.model_validate(
        {"deploymentRef": {"name": "accounts"}, "env": [{"name": "REPRISE_HANDLER", "value": "accounts.replay:handle"}]}
    )
    assert consumer_delivery(handled, LIVE_TEMPLATE) == {"REPRISE_HANDLER": "accounts.replay:handle"}


def test_replay_role_message_says_what_the_service_must_do():
    from reprise_operator.core.standby import replay_role_message

    message = replay_role_message("accounts-replay", 3, 3, "ns/accounts/1234abcd", "reprise.handover", 125)
    assert "Deployment accounts-replay (3/3 pods ready)" in message
    assert "replay ns/accounts/1234abcd is not bootstrapped in handover topic reprise.handover after 2m5s" in message
    assert "when REPRISE_REPLAY_ID is set" in message and "io.reprise.kafka.replay" in message
    assert "entrypoint: ReplayWorker" in message


def test_the_replay_role_clock_runs_while_followed_and_restarts_after_a_pause():
    import asyncio
    from datetime import datetime, timedelta, timezone

    from reprise_operator.api import Consumer
    from reprise_operator.core.lifecycle import ObjectMemory, Waiting
    from reprise_operator.core.standby import require_replay_role

    class AsyncKube:
        async def get_deployment(self, namespace, name):
            return {"status": {"readyReplicas": 2}}

    class Kube:
        aio = AsyncKube()

    class Rt:
        kube = Kube()

    class FakeResource:
        namespace, status, rt = "ns", {"children": {"deployment": "svc-replay"}}, Rt()

        def __init__(self):
            self.at = datetime(2026, 11, 23, tzinfo=timezone.utc)

        def now(self):
            return self.at

    service = Consumer.model_validate({"deploymentRef": {"name": "svc"}, "entrypoint": "Service", "replicas": 3})
    resource, memory = FakeResource(), ObjectMemory()

    def check(bootstrapped=False):
        asyncio.run(require_replay_role(resource, memory, service, bootstrapped, "ns/x/1", "reprise.handover", 120))

    for _ in range(12):  # followed every 10 s for 110 s: still within the bound
        check()
        resource.at += timedelta(seconds=10)
    with pytest.raises(Waiting) as waiting:
        check()  # 120 s
    assert waiting.value.reason == "ReplayRoleNotStarted" and "(2/3 pods ready)" in waiting.value.message
    resource.at += timedelta(minutes=10)  # suspended meanwhile: not followed
    check()  # the clock starts again
    check(bootstrapped=True)  # a replica bootstrapped: nothing to say
    worker = Consumer.model_validate({"deploymentRef": {"name": "svc"}})
    resource.at += timedelta(hours=1)
    asyncio.run(require_replay_role(resource, memory, worker, False, "ns/x/1", "reprise.handover", 120))


# The kubelet fills in only runAsUser from a numeric image USER; containerd then finds no /etc/passwd entry for it
# and runs the process with gid 0 (seen on a real kubelet + containerd, issue 29). So a pod never leaves its group
# to the runtime when it can name it.


def test_worker_job_runs_as_the_image_user_and_group_not_group_0():
    job = worker_job_manifest(
        owner=OWNER,
        name="bf-emit",
        namespace="ns",
        labels={"reprise.io/replay": "bf"},
        image="reprise:dev",
        args=["backfill-topic"],
        worker_env={},
    )
    pod = job["spec"]["template"]["spec"]["securityContext"]
    assert (pod["runAsUser"], pod["runAsGroup"], pod["fsGroup"]) == (65532, 65532, 65532)


def test_image_user_is_the_dockerfiles_user():
    from pathlib import Path

    dockerfile = Path(__file__).resolve().parents[3] / "Dockerfile"
    users = [line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("USER ")]
    assert users == [f"{IMAGE_USER}:{IMAGE_USER}"]


def test_replay_pod_that_names_its_user_gets_that_group_not_group_0():
    template = {"spec": {"securityContext": {"runAsUser": 1000}, "containers": [{"name": "app"}]}}
    spec = build(pod_template=template)["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsGroup"] == 1000


def test_replay_container_that_names_its_user_gets_that_group_not_group_0():
    template = {"spec": {"containers": [{"name": "app", "securityContext": {"runAsUser": 2000}}]}}
    spec = build(pod_template=template)["spec"]["template"]["spec"]
    assert spec["containers"][0]["securityContext"]["runAsGroup"] == 2000


def test_a_group_the_service_names_is_kept():
    template = {
        "spec": {
            "securityContext": {"runAsUser": 1000, "runAsGroup": 3000},
            "containers": [{"name": "app", "securityContext": {"runAsUser": 2000}}],
        }
    }
    spec = build(pod_template=template)["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsGroup"] == 3000
    assert "runAsGroup" not in spec["containers"][0]["securityContext"], "the pod's group applies to it"


def test_the_kafka_secret_is_readable_by_the_pods_group():
    """The Secret's files are 0440, owned by root and the pod's fsGroup: a pod that runs as 65532:65532 with no
    fsGroup could not read its Kafka settings (a real kubelet showed it: PermissionError on client.rack)."""
    template = {"spec": {"securityContext": {"runAsUser": 65532}, "containers": [{"name": "app"}]}}
    spec = build(pod_template=template)["spec"]["template"]["spec"]
    assert spec["securityContext"]["fsGroup"] == 65532


def test_the_kafka_secret_is_readable_by_the_worker_containers_group():
    template = {"spec": {"containers": [{"name": "app", "securityContext": {"runAsUser": 2000}}]}}
    spec = build(pod_template=template)["spec"]["template"]["spec"]
    assert spec["securityContext"]["fsGroup"] == 2000


def test_an_fs_group_the_service_names_is_kept_and_none_is_added_without_a_secret():
    template = {"spec": {"securityContext": {"runAsUser": 1000, "fsGroup": 4000}, "containers": [{"name": "app"}]}}
    assert build(pod_template=template)["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 4000
    plain = {"spec": {"securityContext": {"runAsUser": 1000}, "containers": [{"name": "app"}]}}
    spec = build(pod_template=plain, kafka_secret=None)["spec"]["template"]["spec"]
    assert "fsGroup" not in spec["securityContext"]
