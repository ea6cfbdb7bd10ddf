"""The chart on a real API server: `helm install` works, the operator it runs completes a Reconsume with only
the chart's RBAC (so the RBAC is enough), refused verbs really are refused (so it is not too much), every
pod is admitted under the `restricted` Pod Security Standard, and a Secret's value never shows up in logs,
Events, status or metrics."""

from __future__ import annotations

import json
import re
import secrets
import urllib.request
from pathlib import Path

import pytest
import yaml

from reprise_operator.workloads import restricted_pod
from tests.fixtures.kube import wait_for
from tests.integration.operator.scenario import (
    KeepProducing,
    Ledger,
    live_deployment,
    produce,
    wait_caught_up,
    wait_phase,
)

from .conftest import CHART, Installed, helm_install, restricted_namespace

pytestmark = pytest.mark.integration

PARTITIONS = 3
HISTORY = 1500


def apply(kube, namespace: str, obj: dict) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(obj))


# ------------------------------------------------------------------------------------------ install


def test_helm_install_deployed_the_operator_and_the_crds(installed: Installed) -> None:
    kube = installed.kube
    status = json.loads(kube.helm("status", installed.release, "-n", installed.namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    deployment = json.loads(kube.kubectl("get", "deployment", installed.release, "-n", installed.namespace, "-o", "json").stdout)
    assert deployment["status"].get("readyReplicas") == 1
    kube.kubectl("wait", "--for=condition=Established", "--timeout=30s",
                 "crd/reconsumes.reprise.io", "crd/backfills.reprise.io", "crd/lakereplays.reprise.io")
    # Leader election ran under the chart's Role: the operator holds the Lease in its own namespace.
    lease = json.loads(kube.kubectl("get", "lease", "reprise-operator", "-n", installed.namespace, "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"]
    # The operator process serves /healthz and /metrics on the port the chart gave it.
    with urllib.request.urlopen(f"http://127.0.0.1:{installed.metrics_port}/healthz", timeout=10) as answer:
        assert answer.status == 200


def test_the_operator_pod_was_admitted_in_a_restricted_namespace(installed: Installed) -> None:
    kube = installed.kube
    labels = json.loads(kube.kubectl("get", "namespace", installed.namespace, "-o", "json").stdout)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = json.loads(kube.kubectl("get", "pod", installed.operator_pod(), "-n", installed.namespace, "-o", "json").stdout)
    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["serviceAccountName"] == installed.service_account


# ------------------------------------------------------------------------------------------ RBAC


# `kubectl auth can-i` arguments: verb, resource[/name], and --subresource where there is one.
ALLOWED = [
    "get secrets", "create deployments.apps", "delete deployments.apps", "get deployments.apps",
    "patch deployments.apps --subresource=scale", "create jobs.batch", "patch jobs.batch", "list pods",
    "create configmaps", "create events", "watch reconsumes.reprise.io", "patch backfills.reprise.io",
    "patch reconsumes.reprise.io --subresource=status", "delete lakereplays.reprise.io",
    "create sparkapplications.sparkoperator.k8s.io",
]
REFUSED = [
    "list secrets", "watch secrets", "create secrets", "delete secrets", "update deployments.apps",
    "patch deployments.apps", "update deployments.apps --subresource=scale", "create pods", "delete pods",
    "create pods --subresource=exec", "get pods --subresource=log", "update configmaps", "create backfills.reprise.io",
    "update reconsumes.reprise.io", "create serviceaccounts --subresource=token",
    "create rolebindings.rbac.authorization.k8s.io", "impersonate serviceaccounts", "create daemonsets.apps",
    "create services", "patch events",
]


def test_the_service_account_may_do_what_the_operator_does(installed: Installed) -> None:
    for question in ALLOWED:
        assert installed.can_i(*question.split(), "-n", installed.apps), f"{question} must be allowed"
    assert installed.can_i("create", "leases.coordination.k8s.io", "-n", installed.namespace)
    assert installed.can_i("update", "leases.coordination.k8s.io/reprise-operator", "-n", installed.namespace)
    assert installed.can_i("watch", "customresourcedefinitions.apiextensions.k8s.io")


def test_a_forbidden_verb_is_refused(installed: Installed) -> None:
    for question in REFUSED:
        assert not installed.can_i(*question.split(), "-n", installed.apps), f"{question} must be refused"
    assert not installed.can_i("update", "leases.coordination.k8s.io/someone-elses", "-n", installed.namespace)
    assert not installed.can_i("get", "leases.coordination.k8s.io/reprise-operator", "-n", installed.apps)
    assert not installed.can_i("delete", "customresourcedefinitions.apiextensions.k8s.io")
    assert not installed.can_i("get", "nodes")
    # And a real request, not only the authorizer's answer: listing Secrets as the operator is Forbidden.
    proc = installed.kube.kubectl("get", "secrets", "-n", installed.apps, f"--as={installed.subject}", check=False)
    assert proc.returncode != 0 and "forbidden" in proc.stderr.lower(), proc.stderr


def test_watch_namespaces_confines_the_operator_to_roles_in_those_namespaces(installed: Installed, tmp_path) -> None:
    """A second release (no pods: replicas 0) watching only the apps namespace gets Roles there and nothing elsewhere."""
    kube = installed.kube
    other = restricted_namespace(kube, "reprise-other")
    release = "reprise-scoped"
    values = {"watchNamespaces": [installed.apps], "operator": {"replicas": 0}, "rbac": {"aggregateToDefaultRoles": False}}
    helm_install(kube, release, installed.namespace, values, tmp_path)
    try:
        scoped = Installed(kube, installed.namespace, installed.apps, release, 0, release)
        assert scoped.can_i("get", "secrets", "-n", installed.apps)
        assert scoped.can_i("create", "deployments.apps", "-n", installed.apps)
        assert scoped.can_i("watch", "reconsumes.reprise.io", "-n", installed.apps)
        assert not scoped.can_i("get", "secrets", "-n", other)
        assert not scoped.can_i("create", "deployments.apps", "-n", other)
        assert not scoped.can_i("watch", "reconsumes.reprise.io", "--all-namespaces")
        roles = json.loads(kube.kubectl("get", "roles", "-A", "-l", f"app.kubernetes.io/instance={release}", "-o", "json").stdout)
        assert sorted((r["metadata"]["namespace"], r["metadata"]["name"]) for r in roles["items"]) == sorted(
            [(installed.apps, release), (installed.namespace, f"{release}-leader-election")])
    finally:
        kube.helm("uninstall", release, "-n", installed.namespace, "--wait", check=False)
        kube.kubectl("delete", "namespace", other, "--wait=false", check=False)


# ------------------------------------------------------------------------------------------ a Reconsume


def reconsume(name: str, bootstrap: str, topic: str, sink: str, secret: str, worker_port: int) -> dict:
    return {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Reconsume",
        "metadata": {"name": name},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap, "configFrom": {"secretRef": {"name": secret}}},
            "topics": [topic],
            "consumerGroup": "accounts-group",
            "mode": "Parallel",
            "start": {"earliest": True},
            "completion": {"drainedFor": "2s"},
            "consumer": {
                "deploymentRef": {"name": "accounts"},
                "replicas": 1,
                "env": [
                    {"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"},
                    {"name": "REPRISE_TEST_SINK_DIR", "value": sink},
                    {"name": "REPRISE_BATCH_SIZE", "value": "100"},
                    {"name": "REPRISE_METRICS_PORT", "value": str(worker_port)},
                ],
            },
        },
    }


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            return answer.read().decode()
    except OSError:
        return ""


def container_logs(kube, namespace: str) -> dict[str, str]:
    """Every log the node agent kept for the namespace's pods, deleted pods included (never their volumes)."""
    logs = {}
    for path in sorted((kube.agent.workdir / "pods").glob(f"{namespace}_*/logs/*.log")):
        logs[str(path.relative_to(kube.agent.workdir))] = path.read_text(errors="replace")
    return logs


def test_a_reconsume_completes_under_the_chart_rbac_and_its_secret_never_leaks(installed: Installed, kafka, topic_name, tmp_path) -> None:
    from local_platform.processes import free_port

    kube, apps = installed.kube, installed.apps
    password = f"sasl-pw-{secrets.token_hex(12)}"
    apply(kube, apps, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "accounts-kafka-client"},
        "stringData": {"sasl.username": "reprise-test", "sasl.password": password},
    })
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, HISTORY)
    sink = tmp_path / "processed"
    sink.mkdir()
    live = live_deployment("accounts", kafka.bootstrap, "accounts-group", topic_name, sink)
    # The namespace enforces `restricted`: the live service must comply too (the replay clones it).
    live["spec"]["template"]["spec"] = restricted_pod(live["spec"]["template"]["spec"])
    apply(kube, apps, live)
    wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)

    worker_port = free_port()
    scrapes: list[str] = []
    phases: list[str] = []

    def complete() -> dict | None:
        scrapes.append(scrape(installed.metrics_port))
        scrapes.append(scrape(worker_port))
        out = json.loads(kube.kubectl("get", "reconsume", "replay-accounts", "-n", apps, "-o", "json").stdout)
        phase = (out.get("status") or {}).get("phase")
        if phase and (not phases or phases[-1] != phase):
            phases.append(phase)
        assert phase != "Failed", json.dumps(out.get("status"), indent=1)
        return out if phase == "Complete" else None

    with KeepProducing(kafka.bootstrap, topic_name):
        apply(kube, apps, reconsume("replay-accounts", kafka.bootstrap, topic_name, str(sink), "accounts-kafka-client", worker_port))
        try:
            done = wait_for(complete, 240, "the Reconsume to complete under the chart's operator", interval=0.5)
        except AssertionError:
            raise AssertionError(f"phases seen: {phases}\noperator log:\n{installed.operator_log()[-6000:]}") from None

    # The replay really ran in the restricted namespace: its pods were admitted and processed history.
    ledger = Ledger.read(sink, topic_name)
    assert sum(sum(c.values()) for c in ledger.replay.values()) >= HISTORY
    assert "Running" in phases and phases[-1] == "Complete"
    conditions = {c["type"]: c["status"] for c in done["status"]["conditions"]}
    assert conditions["Complete"] == "True"

    # Everything the operator did was allowed: no refusal anywhere in its log.
    operator_log = installed.operator_log()
    assert not re.search(r"\b403\b|[Ff]orbidden", operator_log), [l for l in operator_log.splitlines() if "403" in l or "orbidden" in l][:5]

    # The Secret's value is nowhere: operator log, every container log (live service and replay pods),
    # Events of the whole cluster, the resource with its status, and the metrics of operator and worker.
    events = kube.kubectl("get", "events", "-A", "-o", "yaml").stdout
    resource = kube.kubectl("get", "reconsume", "replay-accounts", "-n", apps, "-o", "yaml").stdout
    replica_sets = kube.kubectl("get", "replicasets,deployments,jobs", "-n", apps, "-o", "yaml").stdout
    places = {"operator log": operator_log, "events": events, "reconsume": resource, "workloads": replica_sets,
              "metrics": "\n".join(scrapes), **container_logs(kube, apps)}
    assert any("reprise_worker" in s for s in scrapes), "the worker's metrics were scraped at least once"
    assert any("reprise_replay_lag_records" in s for s in scrapes), "the operator's metrics were scraped"
    assert len(container_logs(kube, apps)) >= 2, "logs of the live service and of the replay pod"
    leaked = [where for where, text in places.items() if password in text]
    assert leaked == [], f"the Secret value appears in: {leaked}"
    # The check itself can fail: the value is in the Secret, where it belongs.
    secret = json.loads(kube.kubectl("get", "secret", "accounts-kafka-client", "-n", apps, "-o", "json").stdout)
    import base64

    assert base64.b64decode(secret["data"]["sasl.password"]).decode() == password
