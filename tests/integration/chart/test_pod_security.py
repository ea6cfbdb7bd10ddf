"""Every pod template Reprise ships or builds is admitted by the real API server under the `restricted`
Pod Security Standard (a namespace labelled `pod-security.kubernetes.io/enforce=restricted`).

Pod Security admission enforces on Pods only (for Deployments and Jobs it only warns), so each template
is submitted as the Pod its controller would create, with `--dry-run=server`: the API server runs every
admission plugin and stores nothing. A plain pod is refused in the same namespace, so the namespace
really enforces. The replay Deployment's pods were also admitted for real in test_chart_install.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from reprise_operator.api import BackfillSpec
from reprise_operator.shared.constants import child_labels
from reprise_operator.rules.workloads import Owner, job_manifest, replay_deployment_manifest, worker_job_manifest
from tests.integration.operator.scenario import live_deployment

from .conftest import CHART, REPO, restricted_namespace

pytestmark = pytest.mark.integration

OWNER = Owner("reprise.io/v1alpha1", "Reconsume", "accounts-replay", "00000000-0000-0000-0000-000000000001")
PLAIN_SERVICE = {  # a service's pod template that says nothing about security, as most do
    "metadata": {"labels": {"app": "accounts"}},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "registry.example.com/accounts:1.4.2",
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
            }
        ]
    },
}


def as_pod(name: str, template: dict[str, Any]) -> dict[str, Any]:
    """The Pod a controller makes from a pod template (the ServiceAccount is `default`, which exists)."""
    spec = copy.deepcopy(template["spec"])
    spec["serviceAccountName"] = "default"
    labels = (template.get("metadata") or {}).get("labels") or {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def admitted(kube, namespace: str, pod: dict[str, Any]) -> tuple[bool, str]:
    proc = kube.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-", input=json.dumps(pod), check=False
    )
    return proc.returncode == 0, proc.stderr.strip()


def operator_pod(kube) -> dict[str, Any]:
    # The operator pod's template does not depend on the NetworkPolicy, which the chart renders only with its peers.
    rendered = kube.helm(
        "template", "reprise", str(CHART), "--namespace", "reprise-system", "--set", "networkPolicy.enabled=false"
    ).stdout
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    return as_pod("operator", deployment["spec"]["template"])


def replay_pods() -> dict[str, dict[str, Any]]:
    worker_env = {"REPRISE_REPLAY_ID": "ns/accounts-replay/00000000"}
    plain = replay_deployment_manifest(
        owner=OWNER,
        name="accounts-replay-replay",
        namespace="x",
        labels=child_labels("Reconsume", "accounts-replay", "replay-consumer"),
        pod_template=PLAIN_SERVICE,
        replicas=2,
        worker_env=worker_env,
        kafka_secret="accounts-kafka-client",
    )
    scenario = replay_deployment_manifest(
        owner=OWNER,
        name="accounts-replay-replay",
        namespace="x",
        labels=child_labels("Reconsume", "accounts-replay", "replay-consumer"),
        pod_template=live_deployment("accounts", "127.0.0.1:9092", "g", "t", Path("/tmp"))["spec"]["template"],
        replicas=1,
        worker_env=worker_env,
    )
    return {"replay-plain-service": plain["spec"]["template"], "replay-test-service": scenario["spec"]["template"]}


def job_pods() -> dict[str, dict[str, Any]]:
    from reprise_operator.kinds.backfill.rules import upstream_job, worker_job

    worker = worker_job_manifest(
        owner=OWNER,
        name="w",
        namespace="x",
        labels=child_labels("Backfill", "b", "backfill-worker"),
        image="ghcr.io/reprise-io/reprise:0.1.0",
        args=[],
        worker_env={},
        kafka_secret="kafka-client",
    )
    plain_job = job_manifest(
        owner=OWNER, name="j", namespace="x", labels={}, pod_spec=copy.deepcopy(PLAIN_SERVICE["spec"])
    )
    owner = Owner("reprise.io/v1alpha1", "Backfill", "b", "00000000-0000-0000-0000-000000000002")
    topic_spec = BackfillSpec.model_validate(
        yaml.safe_load((REPO / "examples/backfill-topic.yaml").read_text())["spec"]
    )
    job_spec = BackfillSpec.model_validate(yaml.safe_load((REPO / "examples/backfill-job.yaml").read_text())["spec"])
    return {
        "worker-job": worker["spec"]["template"],
        "plain-job": plain_job["spec"]["template"],
        "backfill-topic-source": worker_job(
            owner, "x", topic_spec, "x/b/1", "ghcr.io/reprise-io/reprise:0.1.0", "reprise.handover"
        )["spec"]["template"],
        "backfill-job-source": upstream_job(owner, "x", job_spec, ["k1", "k2"])["spec"]["template"],
    }


def spark_pods() -> dict[str, dict[str, Any]]:
    """Driver and executor pods as the Spark operator makes them from the SparkApplication Reprise builds
    (`reprise_operator.kinds.lakereplay.rules.spark_application`): spec.driver / spec.executor `podSecurityContext` on the
    pod, `securityContext` on the container, `secrets` and `configMaps` as volumes, `envFrom` as is, plus the
    emptyDir Spark uses for its local directories (kubeflow/spark-operator's pod mutation, spark-submit)."""
    from reprise_operator.api import LakeReplaySpec
    from reprise_operator.kinds.lakereplay.rules import spark_application

    spec = LakeReplaySpec.model_validate(yaml.safe_load((REPO / "examples/lakereplay.yaml").read_text())["spec"])
    owner = Owner("reprise.io/v1alpha1", "LakeReplay", "accounts-2025h1", "00000000-0000-0000-0000-000000000003")
    app = spark_application(owner=owner, namespace="x", spec=spec)
    pods = {}
    for role in ("driver", "executor"):
        side = app["spec"][role]
        volumes = [{"name": "spark-local-dir-1", "emptyDir": {}}]
        mounts = [{"name": "spark-local-dir-1", "mountPath": "/var/data/spark-local-dir-1"}]
        for index, item in enumerate(side.get("secrets") or []):
            volumes.append({"name": f"secret-{index}", "secret": {"secretName": item["name"]}})
            mounts.append({"name": f"secret-{index}", "mountPath": item["path"]})
        for index, item in enumerate(side.get("configMaps") or []):
            volumes.append({"name": f"configmap-{index}", "configMap": {"name": item["name"]}})
            mounts.append({"name": f"configmap-{index}", "mountPath": item["path"]})
        container = {
            "name": f"spark-kubernetes-{role}",
            "image": side.get("image") or app["spec"]["image"],
            "args": [role],
            "securityContext": side.get("securityContext") or {},
            "volumeMounts": mounts,
        }
        if side.get("envFrom"):
            container["envFrom"] = side["envFrom"]
        pods[f"spark-{role}"] = {
            "metadata": {"labels": side.get("labels") or {}},
            "spec": {
                "securityContext": side.get("podSecurityContext") or {},
                "containers": [container],
                "volumes": volumes,
            },
        }
    return pods


@pytest.fixture(scope="module")
def restricted(kube) -> str:
    name = restricted_namespace(kube, "reprise-restricted")
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_the_namespace_really_enforces_restricted(kube, restricted) -> None:
    ok, why = admitted(kube, restricted, as_pod("plain", PLAIN_SERVICE))
    assert not ok and "violates PodSecurity" in why and "restricted" in why, why


def test_the_operator_pod_of_the_chart_is_admitted(kube, restricted) -> None:
    ok, why = admitted(kube, restricted, operator_pod(kube))
    assert ok, why


@pytest.mark.parametrize("which", ["replay-plain-service", "replay-test-service"])
def test_replay_deployment_pods_are_admitted(kube, restricted, which) -> None:
    ok, why = admitted(kube, restricted, as_pod(which, replay_pods()[which]))
    assert ok, why


@pytest.mark.parametrize("which", ["worker-job", "plain-job", "backfill-topic-source", "backfill-job-source"])
def test_job_pods_are_admitted(kube, restricted, which) -> None:
    ok, why = admitted(kube, restricted, as_pod(which, job_pods()[which]))
    assert ok, why


@pytest.mark.parametrize("role", ["spark-driver", "spark-executor"])
def test_spark_driver_and_executor_pods_are_admitted(kube, restricted, role) -> None:
    ok, why = admitted(kube, restricted, as_pod(role, spark_pods()[role]))
    assert ok, why


def test_a_template_that_asks_for_root_keeps_its_choice_and_is_refused(kube, restricted) -> None:
    # Reprise fills in what a template leaves out and never overrides what it says: a template that runs
    # as root is the user's decision, and the namespace's policy refuses it, as it would the live service.
    rooted = copy.deepcopy(PLAIN_SERVICE)
    rooted["spec"]["containers"][0]["securityContext"] = {"runAsUser": 0}
    manifest = replay_deployment_manifest(
        owner=OWNER,
        name="r",
        namespace="x",
        labels=child_labels("Reconsume", "r", "replay-consumer"),
        pod_template=rooted,
        replicas=1,
        worker_env={},
    )
    ok, why = admitted(kube, restricted, as_pod("rooted", manifest["spec"]["template"]))
    assert not ok and "runAsUser=0" in why, why
