"""The operator's RBAC as rendered: only what its code uses (the integration tests prove it is enough)."""

from __future__ import annotations

from reprise_operator.api import KINDS

from .conftest import NAMESPACE, RELEASE, find, one

FULLNAME = f"{RELEASE}-reprise"
OWN = [kind.plural for kind in KINDS]  # the one list of kinds


def grants(rules: list[dict]) -> set[tuple[str, str, str, str]]:
    """(apiGroup, resource, verb, resourceName or '') for every combination a rule list allows."""
    out = set()
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    for name in rule.get("resourceNames") or [""]:
                        out.add((group, resource, verb, name))
    return out


def operator_rules(docs: list[dict]) -> set[tuple[str, str, str, str]]:
    rules: list[dict] = []
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "Role") and not doc["metadata"]["name"].endswith(
            ("-edit", "-view", "-approver")
        ):
            rules += doc["rules"]
    return grants(rules)


def test_the_operator_gets_exactly_what_its_code_uses(render) -> None:
    allowed = operator_rules(render())
    expected = set()
    for plural in OWN:
        expected |= {("reprise.io", plural, v, "") for v in ("get", "list", "watch", "patch", "delete")}
        expected |= {("reprise.io", f"{plural}/status", v, "") for v in ("get", "patch")}
    expected |= {("reprise.io", "reconsumes", "create", "")}
    expected |= {("apps", "deployments", v, "") for v in ("get", "create", "delete")}
    expected |= {("apps", "deployments/scale", "patch", "")}
    expected |= {("batch", "jobs", v, "") for v in ("get", "create", "patch", "delete")}
    expected |= {("", "pods", "list", "")}
    expected |= {("", "configmaps", v, "") for v in ("get", "create", "delete")}
    expected |= {("", "events", "create", "")}
    expected |= {("", "secrets", "get", "")}
    expected |= {("sparkoperator.k8s.io", "sparkapplications", v, "") for v in ("get", "create", "patch", "delete")}
    expected |= {("coordination.k8s.io", "leases", "create", "")}
    expected |= {("coordination.k8s.io", "leases", v, "reprise-operator") for v in ("get", "update")}
    expected |= {("apiextensions.k8s.io", "customresourcedefinitions", v, "") for v in ("list", "watch")}
    # The admission webhook asks whether the requesting user may do what a replay implies.
    expected |= {("authorization.k8s.io", "subjectaccessreviews", "create", "")}
    assert allowed == expected, f"more: {sorted(allowed - expected)}; less: {sorted(expected - allowed)}"


def test_no_wildcards_and_no_dangerous_verbs_anywhere(render) -> None:
    docs = render({"watchNamespaces": ["a"], "operator": {"replicas": 2}})
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for group, resource, verb, _ in grants(doc["rules"]):
            assert "*" not in (group, resource, verb), f"{doc['metadata']['name']}: wildcard"
            assert verb not in ("escalate", "bind", "impersonate"), f"{doc['metadata']['name']}: {verb}"
            assert resource not in (
                "pods/exec",
                "pods/attach",
                "serviceaccounts/token",
                "nodes",
                "clusterroles",
                "roles",
            )


def test_secrets_are_get_only_and_can_be_pinned_by_name_or_dropped(render) -> None:
    secrets = {g for g in operator_rules(render()) if g[1] == "secrets"}
    assert secrets == {("", "secrets", "get", "")}, "get by name: never list or watch, so nothing is enumerated"
    pinned = {
        g for g in operator_rules(render({"rbac": {"secrets": {"names": ["kafka-client"]}}})) if g[1] == "secrets"
    }
    assert pinned == {("", "secrets", "get", "kafka-client")}
    assert not {g for g in operator_rules(render({"rbac": {"secrets": {"enabled": False}}})) if g[1] == "secrets"}


def test_spark_and_crd_discovery_can_be_dropped(render) -> None:
    allowed = operator_rules(render({"rbac": {"sparkApplications": False, "crdDiscovery": False}}))
    assert not {g for g in allowed if g[0] in ("sparkoperator.k8s.io", "apiextensions.k8s.io")}


def test_the_lease_is_only_in_the_release_namespace(render) -> None:
    docs = render({"watchNamespaces": ["a", "b"]})
    lease_roles = [d for d in find(docs, "Role") if any("leases" in r["resources"] for r in d["rules"])]
    assert [d["metadata"]["namespace"] for d in lease_roles] == [NAMESPACE]
    assert all("leases" not in r["resources"] for d in find(docs, "Role", FULLNAME) for r in d["rules"])


def test_bindings_point_at_the_chart_service_account(render) -> None:
    docs = render({"serviceAccount": {"name": "custom-sa"}})
    assert one(docs, "ServiceAccount")["metadata"]["name"] == "custom-sa"
    for doc in find(docs, "ClusterRoleBinding") + find(docs, "RoleBinding"):
        assert doc["subjects"] == [{"kind": "ServiceAccount", "name": "custom-sa", "namespace": NAMESPACE}]
    deployment = one(docs, "Deployment", FULLNAME)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "custom-sa"


def test_rbac_create_false_renders_no_rbac(render) -> None:
    docs = render({"rbac": {"create": False}})
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")]


def test_people_get_replays_through_the_built_in_roles(render) -> None:
    docs = render()
    edit = one(docs, "ClusterRole", f"{FULLNAME}-edit")
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert {r for _, r, _, _ in grants(edit["rules"])} == set(OWN), "people never write status"
    view = one(docs, "ClusterRole", f"{FULLNAME}-view")
    assert {v for _, _, v, _ in grants(view["rules"])} == {"get", "list", "watch"}


def test_approving_is_a_verb_of_its_own_role_never_of_edit(render) -> None:
    docs = render()
    approver = one(docs, "ClusterRole", f"{FULLNAME}-approver")
    assert {(r, v) for _, r, v, _ in grants(approver["rules"]) if v == "approve"} == {(p, "approve") for p in OWN}
    assert "rbac.authorization.k8s.io/aggregate-to-admin" not in approver["metadata"]["labels"]
    assert not [label for label in approver["metadata"]["labels"] if label.endswith("aggregate-to-edit")]
    edit = one(docs, "ClusterRole", f"{FULLNAME}-edit")
    assert "approve" not in {v for _, _, v, _ in grants(edit["rules"])}
    admin = one(render({"rbac": {"approverAggregateToAdmin": True}}), "ClusterRole", f"{FULLNAME}-approver")
    assert admin["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"


def test_the_webhook_can_be_turned_off_with_its_access_reviews(render) -> None:
    docs = render({"admission": {"enabled": False}})
    assert ("authorization.k8s.io", "subjectaccessreviews", "create", "") not in operator_rules(docs)
    assert not find(docs, "ValidatingWebhookConfiguration")
