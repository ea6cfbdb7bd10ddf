"""The chart on a real API server: `helm install` works, the operator it runs completes a Reconsume with only
the chart's RBAC (so the RBAC is enough), refused verbs really are refused (so it is not too much), every
pod is admitted under the `restricted` Pod Security Standard, and a Secret's value never shows up in logs,
Events, status or metrics."""

from __future__ import annotations

import base64
import json
import re
import secrets
import urllib.request

import pytest
import yaml

from reprise_operator.rules.workloads import restricted_pod
from tests.fixtures.kube import wait_for
from tests.integration.operator.scenario import (
    KeepProducing,
    Ledger,
    live_deployment,
    produce,
    wait_caught_up,
    wait_phase,
)

from .conftest import Installed, helm_install, restricted_namespace

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
    notes = kube.helm("get", "notes", installed.release, "-n", installed.namespace).stdout
    assert f"installed in namespace {installed.namespace}" in notes and "all namespaces" in notes
    deployment = json.loads(
        kube.kubectl("get", "deployment", installed.release, "-n", installed.namespace, "-o", "json").stdout
    )
    assert deployment["status"].get("readyReplicas") == 1
    kube.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/reconsumes.reprise.io",
        "crd/backfills.reprise.io",
        "crd/lakereplays.reprise.io",
    )
    # Leader election ran under the chart's Role: the operator holds the Lease in its own namespace.
    lease = json.loads(kube.kubectl("get", "lease", "reprise-operator", "-n", installed.namespace, "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"]
    # The operator process serves /healthz and /metrics on the port the chart gave it.
    with urllib.request.urlopen(f"http://127.0.0.1:{installed.metrics_port}/healthz", timeout=10) as answer:
        assert answer.status == 200


def test_the_operator_pod_was_admitted_in_a_restricted_namespace(installed: Installed) -> None:
    kube = installed.kube
    labels = json.loads(kube.kubectl("get", "namespace", installed.namespace, "-o", "json").stdout)["metadata"][
        "labels"
    ]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = json.loads(
        kube.kubectl("get", "pod", installed.operator_pod(), "-n", installed.namespace, "-o", "json").stdout
    )
    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["serviceAccountName"] == installed.service_account


# ------------------------------------------------------------------------------------------ RBAC


# `kubectl auth can-i` arguments: verb, resource[/name], and --subresource where there is one.
ALLOWED = [
    "get secrets",
    "create deployments.apps",
    "delete deployments.apps",
    "get deployments.apps",
    "patch deployments.apps --subresource=scale",
    "create jobs.batch",
    "patch jobs.batch",
    "list pods",
    "create configmaps",
    "create events",
    "watch reconsumes.reprise.io",
    "patch backfills.reprise.io",
    "patch reconsumes.reprise.io --subresource=status",
    "delete lakereplays.reprise.io",
    "create sparkapplications.sparkoperator.k8s.io",
]
REFUSED = [
    "list secrets",
    "watch secrets",
    "create secrets",
    "delete secrets",
    "update deployments.apps",
    "patch deployments.apps",
    "update deployments.apps --subresource=scale",
    "create pods",
    "delete pods",
    "create pods --subresource=exec",
    "get pods --subresource=log",
    "update configmaps",
    "create backfills.reprise.io",
    "update reconsumes.reprise.io",
    "create serviceaccounts --subresource=token",
    "create rolebindings.rbac.authorization.k8s.io",
    "impersonate serviceaccounts",
    "create daemonsets.apps",
    "create services",
    "patch events",
]


def test_the_service_account_may_do_what_the_operator_does(installed: Installed) -> None:
    for question in ALLOWED:
        assert installed.can_i(*question.split(), "-n", installed.apps), f"{question} must be allowed"
    assert installed.can_i("create", "leases.coordination.k8s.io", "-n", installed.namespace)
    assert installed.can_i("update", "leases.coordination.k8s.io/reprise-operator", "-n", installed.namespace)
    assert installed.can_i("watch", "customresourcedefinitions.apiextensions.k8s.io")
    assert installed.can_i("create", "subjectaccessreviews.authorization.k8s.io"), "the admission webhook asks them"


def test_the_charts_webhook_refuses_what_a_reprise_editor_may_not_do_and_an_approval_without_the_role(
    installed: Installed, kafka, topic_name
) -> None:
    """The chart's own roles (reprise-edit, reprise-approver), its webhook, its certificate and its operator's
    SubjectAccessReview rights: the same refusals as tests/integration/operator/test_admission.py."""
    kube, apps = installed.kube, installed.apps
    body = {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Reconsume",
        "metadata": {"name": "dana-replay"},
        "spec": {
            # A topic that does not exist: the plan waits for it, so nothing runs after the approval.
            "kafka": {"bootstrapServers": kafka.bootstrap},
            "topics": [topic_name],
            "consumerGroup": "orders-service",
            "mode": "Parallel",
            "start": {"earliest": True},
            "approval": "Manual",
            "consumer": {"template": {"spec": {"containers": [{"name": "worker", "image": "reprise:dev"}]}}},
        },
    }
    kube.kubectl("create", "rolebinding", "dana-edit", "-n", apps, "--clusterrole=reprise-edit", "--user=dana")
    try:
        refused = kube.kubectl("create", "-n", apps, "--as=dana", "-f", "-", input=json.dumps(body), check=False)
        assert refused.returncode != 0, "the chart's webhook admitted a Deployment dana may not create"
        assert (
            f'spec.consumer.template needs "create deployments.apps" in namespace {apps}, which user dana may not do'
        ) in refused.stderr, refused.stderr
        kube.kubectl("create", "-n", apps, "-f", "-", input=json.dumps(body))  # the admin may
        approve = ["annotate", "reconsume", "dana-replay", "-n", apps, "--as=dana", "reprise.io/approve=true"]
        refused = kube.kubectl(*approve, check=False)
        assert refused.returncode != 0 and "ClusterRole reprise-approver" in refused.stderr, refused.stderr
        kube.kubectl(
            "create", "rolebinding", "dana-approver", "-n", apps, "--clusterrole=reprise-approver", "--user=dana"
        )
        kube.kubectl(*approve)
    finally:
        kube.kubectl(
            "delete", "reconsume", "dana-replay", "-n", apps, "--ignore-not-found", "--timeout=60s", check=False
        )
        kube.kubectl(
            "delete", "rolebinding", "dana-edit", "dana-approver", "-n", apps, "--ignore-not-found", check=False
        )


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
    values = {
        "watchNamespaces": [installed.apps],
        "operator": {"replicas": 0},
        "rbac": {"aggregateToDefaultRoles": False},
    }
    helm_install(kube, release, installed.namespace, values, tmp_path)
    try:
        scoped = Installed(kube, installed.namespace, installed.apps, release, 0, release)
        assert scoped.can_i("get", "secrets", "-n", installed.apps)
        assert scoped.can_i("create", "deployments.apps", "-n", installed.apps)
        assert scoped.can_i("watch", "reconsumes.reprise.io", "-n", installed.apps)
        assert not scoped.can_i("get", "secrets", "-n", other)
        assert not scoped.can_i("create", "deployments.apps", "-n", other)
        assert not scoped.can_i("watch", "reconsumes.reprise.io", "--all-namespaces")
        roles = json.loads(
            kube.kubectl("get", "roles", "-A", "-l", f"app.kubernetes.io/instance={release}", "-o", "json").stdout
        )
        assert sorted((r["metadata"]["namespace"], r["metadata"]["name"]) for r in roles["items"]) == sorted(
            [(installed.apps, release), (installed.namespace, f"{release}-leader-election")]
        )
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


@pytest.fixture(scope="module")
def kafka_secret(installed: Installed) -> str:
    """A Secret of librdkafka settings whose sasl.password is a value found nowhere else."""
    password = f"sasl-pw-{secrets.token_hex(12)}"
    apply(
        installed.kube,
        installed.apps,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "accounts-kafka-client", "labels": {"reprise.io/kafka-client": "true"}},
            "stringData": {"sasl.username": "reprise-test", "sasl.password": password},
        },
    )
    return password


def assert_nowhere(installed: Installed, password: str, extra: dict[str, str]) -> None:
    """The Secret's value is in none of: the operator log, every container log of the workloads' namespace,
    the Events of the whole cluster, the replays with their status, the workloads, and `extra`."""
    kube, apps = installed.kube, installed.apps
    operator_log = installed.operator_log()
    # Everything the operator did was allowed: no refusal anywhere in its log.
    refusals = [
        line
        for line in operator_log.splitlines()
        if re.search(r"[Ff]orbidden|(?:[Cc]ode|status):? ?403\b|\(403\)", line)
    ]
    assert refusals == [], refusals[:5]
    logs = container_logs(kube, apps)
    places = {
        "operator log": operator_log,
        "events": kube.kubectl("get", "events", "-A", "-o", "yaml").stdout,
        "replays": kube.kubectl("get", "reconsumes,backfills,lakereplays", "-n", apps, "-o", "yaml").stdout,
        "workloads": kube.kubectl("get", "replicasets,deployments,jobs,configmaps", "-n", apps, "-o", "yaml").stdout,
        **logs,
        **extra,
    }
    leaked = [where for where, text in places.items() if password in text]
    assert leaked == [], f"the Secret value appears in: {leaked}"
    # The check itself can fail: the value is in the Secret, where it belongs.
    secret = json.loads(kube.kubectl("get", "secret", "accounts-kafka-client", "-n", apps, "-o", "json").stdout)
    assert base64.b64decode(secret["data"]["sasl.password"]).decode() == password


def test_a_reconsume_completes_under_the_chart_rbac_and_its_secret_never_leaks(
    installed: Installed, kafka, kafka_secret, topic_name, tmp_path
) -> None:
    from local_platform.processes import free_port

    kube, apps = installed.kube, installed.apps
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
        apply(
            kube,
            apps,
            reconsume("replay-accounts", kafka.bootstrap, topic_name, str(sink), "accounts-kafka-client", worker_port),
        )
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

    assert any("reprise_worker" in s for s in scrapes), "the worker's metrics were scraped at least once"
    assert any("reprise_replay_lag_records" in s for s in scrapes), "the operator's metrics were scraped"
    assert len(container_logs(kube, apps)) >= 2, "logs of the live service and of the replay pod"
    assert_nowhere(installed, kafka_secret, {"metrics": "\n".join(scrapes)})


def test_a_backfill_completes_under_the_chart_rbac_and_its_secret_never_leaks(
    installed: Installed, kafka, kafka_secret, topic_name
) -> None:
    """The topic source: the operator runs Reprise's worker as a Job (the chart's image) with the Secret mounted."""
    from tests.integration.operator.backfill_scenario import produce_keyed

    kube, apps = installed.kube, installed.apps
    state, target = f"{topic_name}-state", topic_name
    kafka.create_topic(state, 2)
    kafka.create_topic(target, 2)
    produce_keyed(kafka.bootstrap, state, [(f"user-{i}", json.dumps({"v": i})) for i in range(50)])
    apply(
        kube,
        apps,
        {
            "apiVersion": "reprise.io/v1alpha1",
            "kind": "Backfill",
            "metadata": {"name": "users-fix"},
            "spec": {
                "kafka": {
                    "bootstrapServers": kafka.bootstrap,
                    "configFrom": {"secretRef": {"name": "accounts-kafka-client"}},
                },
                "topic": target,
                "keys": [f"user-{i}" for i in range(0, 50, 5)],
                "source": {"topic": {"name": state}},
            },
        },
    )
    try:
        done = wait_phase(kube, apps, "backfill", "users-fix", "Complete", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{installed.operator_log()[-6000:]}") from None
    assert done["status"]["keysProduced"] == 10
    jobs = json.loads(
        kube.kubectl("get", "jobs", "-n", apps, "-l", "reprise.io/replay=users-fix", "-o", "json").stdout
    )["items"]
    for job in jobs:  # the Job ran the chart's image, and its pod was admitted under `restricted`
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "reprise:dev"
        assert job["status"].get("succeeded") == 1
    assert_nowhere(installed, kafka_secret, {})
