"""The admission webhook on the real API server (findings H2 and L2 of the security review).

H2: a user who may create Reconsumes but not Deployments, or not read a Secret, must not get them through
Reprise, which creates its children with the operator's rights. L2: approving a plan or a cutover is its own
verb (`approve`), which the chart's `reprise-approver` role grants and `reprise-edit` does not.

The people are impersonated (`kubectl --as=alice`); the roles are the chart's own ClusterRoles, rendered with
`helm template` and given a per-test name, bound in the test's namespace only.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.fixtures.kube import Kube

pytestmark = pytest.mark.integration

CHART = Path(__file__).resolve().parents[3] / "charts" / "reprise"


def chart_roles(kube: Kube) -> dict[str, dict]:
    """The chart's user ClusterRoles (reprise-edit, reprise-approver, ...) by name, as `helm install` makes them."""
    # The NetworkPolicy needs its peers to render at all; only the roles are read here.
    rendered = kube.helm(
        "template",
        "reprise",
        str(CHART),
        "--set",
        "networkPolicy.enabled=false",
        "--show-only",
        "templates/rbac/user-roles.yaml",
    ).stdout
    return {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(rendered) if doc}


@pytest.fixture
def roles(kube: Kube) -> Iterator[dict[str, str]]:
    """The chart's reprise-edit and reprise-approver ClusterRoles under per-test names (their aggregation labels
    dropped: the built-in roles stay as they were); deleted afterwards."""
    suffix = uuid.uuid4().hex[:6]
    made = {}
    for name, role in chart_roles(kube).items():
        if name not in ("reprise-edit", "reprise-approver"):
            continue
        role = dict(role, metadata={"name": f"{name}-{suffix}"})
        kube.kubectl("apply", "-f", "-", input=json.dumps(role))
        made[name] = role["metadata"]["name"]
    assert sorted(made) == ["reprise-approver", "reprise-edit"], f"the chart has no such roles: {sorted(made)}"
    try:
        yield made
    finally:
        kube.kubectl("delete", "clusterrole", *made.values(), "--ignore-not-found", check=False)


def bind(kube: Kube, namespace: str, user: str, clusterrole: str) -> None:
    kube.kubectl(
        "create",
        "rolebinding",
        f"{user}-{clusterrole}",
        "-n",
        namespace,
        f"--clusterrole={clusterrole}",
        f"--user={user}",
    )


def grant(kube: Kube, namespace: str, user: str, verb: str, resource: str) -> None:
    role = f"{user}-{verb}-{resource.replace('.', '-')}"
    kube.kubectl("create", "role", role, "-n", namespace, f"--verb={verb}", f"--resource={resource}")
    kube.kubectl("create", "rolebinding", role, "-n", namespace, f"--role={role}", f"--user={user}")


def can_i(kube: Kube, namespace: str, user: str, *question: str) -> bool:
    answer = kube.kubectl("auth", "can-i", *question, "-n", namespace, f"--as={user}", check=False).stdout.strip()
    assert answer in ("yes", "no"), answer
    return answer == "yes"


def reconsume(name: str, *, secret: str | None = None, approval: str = "Manual") -> dict:
    """A Parallel Reconsume whose replay consumers come from a pod template; Manual, so nothing runs."""
    kafka: dict = {"bootstrapServers": "kafka-bootstrap.kafka:9092"}
    if secret:
        kafka["configFrom"] = {"secretRef": {"name": secret}}
    return {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Reconsume",
        "metadata": {"name": name},
        "spec": {
            "kafka": kafka,
            "topics": ["orders"],
            "consumerGroup": "orders-service",
            "mode": "Parallel",
            "start": {"earliest": True},
            "approval": approval,
            "consumer": {
                "template": {
                    "spec": {
                        # What the user could not create directly: any ServiceAccount, any Secret of the namespace.
                        "serviceAccountName": "orders-admin",
                        "containers": [{"name": "worker", "image": "reprise:dev"}],
                    }
                }
            },
        },
    }


def create_as(kube: Kube, namespace: str, user: str, body: dict):
    return kube.kubectl("create", "-n", namespace, f"--as={user}", "-f", "-", input=json.dumps(body), check=False)


def exists(kube: Kube, namespace: str, name: str) -> bool:
    return kube.kubectl("get", "reconsume", name, "-n", namespace, check=False).returncode == 0


# ------------------------------------------------------------------------------------------ H2


def test_a_reprise_editor_who_may_not_create_deployments_is_refused_a_template(kube, operator, namespace, roles):
    bind(kube, namespace, "alice", roles["reprise-edit"])
    assert can_i(kube, namespace, "alice", "create", "reconsumes.reprise.io")
    assert not can_i(kube, namespace, "alice", "create", "deployments.apps")

    refused = create_as(kube, namespace, "alice", reconsume("by-alice"))

    assert refused.returncode != 0, "the Reconsume was admitted: alice got a Deployment she may not create"
    assert (
        f'spec.consumer.template needs "create deployments.apps" in namespace {namespace}, which user alice may not do'
    ) in refused.stderr, refused.stderr
    assert not exists(kube, namespace, "by-alice")


def test_a_reprise_editor_who_may_not_read_a_secret_is_refused_a_reconsume_that_mounts_it(
    kube, operator, namespace, roles
):
    bind(kube, namespace, "alice", roles["reprise-edit"])
    grant(kube, namespace, "alice", "create", "deployments.apps")
    kube.kubectl("create", "secret", "generic", "payments-kafka", "-n", namespace, "--from-literal=sasl.password=x")
    assert can_i(kube, namespace, "alice", "create", "deployments.apps")
    assert not can_i(kube, namespace, "alice", "get", "secrets/payments-kafka")

    refused = create_as(kube, namespace, "alice", reconsume("by-alice", secret="payments-kafka"))

    assert refused.returncode != 0, (
        "the Reconsume was admitted: alice's replay pods would mount a Secret she may not read"
    )
    assert (
        f'spec.kafka.configFrom.secretRef needs "get secrets/payments-kafka" in namespace {namespace}, '
        "which user alice may not do"
    ) in refused.stderr, refused.stderr
    assert "create deployments" not in refused.stderr, "a right alice holds is not named"
    assert not exists(kube, namespace, "by-alice")


def test_a_reprise_editor_who_may_not_read_a_secret_is_refused_it_as_the_schema_registrys_credentials(
    kube, operator, namespace, roles
):
    # Its username and password keys would reach alice's replay pods as environment (docs/schemas.md).
    bind(kube, namespace, "alice", roles["reprise-edit"])
    grant(kube, namespace, "alice", "create", "deployments.apps")
    kube.kubectl("create", "secret", "generic", "payments-registry", "-n", namespace, "--from-literal=password=x")
    assert not can_i(kube, namespace, "alice", "get", "secrets/payments-registry")
    body = reconsume("by-alice")
    body["spec"]["format"] = {"value": "avro"}
    body["spec"]["schemaRegistry"] = {
        "url": "http://registry.kafka:8081",
        "credentialsSecret": {"name": "payments-registry"},
    }

    refused = create_as(kube, namespace, "alice", body)

    assert refused.returncode != 0, (
        "the Reconsume was admitted: alice's replay pods would get a Secret she may not read"
    )
    assert (
        f'spec.schemaRegistry.credentialsSecret needs "get secrets/payments-registry" in namespace {namespace}, '
        "which user alice may not do"
    ) in refused.stderr, refused.stderr
    assert not exists(kube, namespace, "by-alice")


def test_a_user_who_holds_both_rights_is_admitted(kube, operator, namespace, roles):
    bind(kube, namespace, "bob", roles["reprise-edit"])
    grant(kube, namespace, "bob", "create", "deployments.apps")
    grant(kube, namespace, "bob", "get", "secrets")
    kube.kubectl("create", "secret", "generic", "payments-kafka", "-n", namespace, "--from-literal=sasl.password=x")

    admitted = create_as(kube, namespace, "bob", reconsume("by-bob", secret="payments-kafka"))

    assert admitted.returncode == 0, admitted.stderr
    assert exists(kube, namespace, "by-bob")


# ------------------------------------------------------------------------------------------ L2


def annotate_as(kube: Kube, namespace: str, user: str, name: str, annotation: str):
    return kube.kubectl("annotate", "reconsume", name, "-n", namespace, f"--as={user}", annotation, check=False)


def test_approving_needs_the_approve_verb_of_the_reprise_approver_role(kube, operator, namespace, roles):
    # The plan was made by someone allowed to (the admin); carol may edit Reconsumes but not approve them.
    kube.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(reconsume("plan")))
    bind(kube, namespace, "carol", roles["reprise-edit"])
    assert can_i(kube, namespace, "carol", "patch", "reconsumes.reprise.io/plan")
    assert not can_i(kube, namespace, "carol", "approve", "reconsumes.reprise.io/plan")

    refused = annotate_as(kube, namespace, "carol", "plan", "reprise.io/approve=true")
    assert refused.returncode != 0, "carol approved the plan with edit rights only"
    assert 'needs "approve reconsumes.reprise.io/plan"' in refused.stderr, refused.stderr
    assert "ClusterRole reprise-approver" in refused.stderr, refused.stderr
    # Nor by turning the Manual plan Automatic, nor by approving its cutover.
    patched = kube.kubectl(
        "patch",
        "reconsume",
        "plan",
        "-n",
        namespace,
        "--as=carol",
        "--type=merge",
        "-p",
        '{"spec":{"approval":"Automatic"}}',
        check=False,
    )
    assert patched.returncode != 0 and "spec.approval needs" in patched.stderr, patched.stderr
    cutover = annotate_as(kube, namespace, "carol", "plan", "reprise.io/approve-cutover=true")
    assert cutover.returncode != 0 and "reprise.io/approve-cutover" in cutover.stderr, cutover.stderr
    # What is not an approval stays carol's to do.
    assert annotate_as(kube, namespace, "carol", "plan", "team=orders").returncode == 0

    bind(kube, namespace, "carol", roles["reprise-approver"])
    approved = annotate_as(kube, namespace, "carol", "plan", "reprise.io/approve=true")
    assert approved.returncode == 0, approved.stderr
    annotations = json.loads(kube.kubectl("get", "reconsume", "plan", "-n", namespace, "-o", "json").stdout)[
        "metadata"
    ]["annotations"]
    assert annotations["reprise.io/approve"] == "true"
