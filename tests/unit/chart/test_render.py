"""What the chart renders for the main value combinations (`helm template`), and `helm lint`."""

from __future__ import annotations

import yaml
import pytest

from reprise_operator.api import KINDS
from reprise_operator.shared.settings import OperatorSettings

from .conftest import CHART, NAMESPACE, RELEASE, SITE, RenderError, find, one, run_helm
from .pod_security import restricted_violations

FULLNAME = f"{RELEASE}-reprise"


def operator_container(docs: list[dict]) -> dict:
    deployment = one(docs, "Deployment", FULLNAME)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def settings_of(container: dict) -> OperatorSettings:
    """The operator's settings as the pod would read them (downward-API values filled in)."""
    env = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace":
            env[item["name"]] = NAMESPACE
    return OperatorSettings.from_env(env)


# ------------------------------------------------------------------------------------------ defaults


def test_defaults_render_the_operator_and_nothing_optional(render) -> None:
    docs = render()
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == sorted(
        [
            ("ClusterRole", FULLNAME),
            ("ClusterRole", f"{FULLNAME}-crd-discovery"),
            ("ClusterRole", f"{FULLNAME}-edit"),
            ("ClusterRole", f"{FULLNAME}-view"),
            ("ClusterRole", f"{FULLNAME}-approver"),
            ("ClusterRole", f"{FULLNAME}-admission"),
            ("ClusterRoleBinding", FULLNAME),
            ("ClusterRoleBinding", f"{FULLNAME}-crd-discovery"),
            ("ClusterRoleBinding", f"{FULLNAME}-admission"),
            ("Deployment", FULLNAME),
            ("NetworkPolicy", FULLNAME),
            ("Role", f"{FULLNAME}-leader-election"),
            ("RoleBinding", f"{FULLNAME}-leader-election"),
            ("Secret", f"{FULLNAME}-webhook-tls"),
            ("Service", f"{FULLNAME}-metrics"),
            ("Service", f"{FULLNAME}-webhook"),
            ("ServiceAccount", FULLNAME),
            ("ValidatingWebhookConfiguration", FULLNAME),
            ("ValidatingAdmissionPolicy", f"{FULLNAME}-kafka-prefixes"),
            ("ValidatingAdmissionPolicyBinding", f"{FULLNAME}-kafka-prefixes"),
        ]
    )
    cluster_scoped = (
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    for doc in docs:
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"]["namespace"] == NAMESPACE


def test_the_operator_container_runs_the_image_entrypoint_with_settings_the_operator_accepts(render) -> None:
    docs = render()
    container = operator_container(docs)
    assert "command" not in container, "the image's ENTRYPOINT is `python -m reprise_operator`"
    assert "args" not in container
    assert container["image"] == "ghcr.io/reprise-io/reprise:0.1.0"
    settings = settings_of(container)
    assert settings.namespaces == ()
    assert settings.leader_election is True
    assert settings.lease_namespace == NAMESPACE
    assert settings.worker_image == container["image"]
    assert settings.metrics_port == container["ports"][0]["containerPort"] == 8080
    assert settings.handover_topic == OperatorSettings.handover_topic
    assert settings.poll_interval == OperatorSettings.poll_interval


def test_probes_hit_healthz_on_the_metrics_port(render) -> None:
    container = operator_container(render({"operator": {"metricsPort": 9101}}))
    assert container["ports"][0] == {"name": "metrics", "containerPort": 9101, "protocol": "TCP"}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert settings_of(container).metrics_port == 9101


def test_the_operator_pod_is_restricted_with_a_read_only_root(render) -> None:
    deployment = one(render(), "Deployment", FULLNAME)
    pod = deployment["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsUser"] == 65532, "the Dockerfile's USER"
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert pod["serviceAccountName"] == FULLNAME


def test_the_restricted_check_itself_catches_a_weakened_pod(render) -> None:
    # null removes a default key in Helm (an empty map would merge with the defaults and change nothing).
    weakened = {
        "operator": {
            "securityContext": {"allowPrivilegeEscalation": True, "runAsNonRoot": None, "seccompProfile": None},
            "podSecurityContext": {"runAsNonRoot": None, "seccompProfile": None},
        }
    }
    pod = one(render(weakened), "Deployment", FULLNAME)["spec"]["template"]["spec"]
    problems = restricted_violations(pod)
    assert any("allowPrivilegeEscalation" in p for p in problems)
    assert any("runAsNonRoot" in p for p in problems)
    assert any("seccompProfile" in p for p in problems)


def test_image_digest_wins_and_the_worker_image_follows_it(render) -> None:
    digest = "sha256:" + "a" * 64
    container = operator_container(
        render({"image": {"repository": "registry.local/reprise", "tag": "1.2.3", "digest": digest}})
    )
    assert container["image"] == f"registry.local/reprise@{digest}"
    assert settings_of(container).worker_image == container["image"]
    container = operator_container(render({"image": {"tag": "1.2.3"}, "operator": {"workerImage": "other/reprise:9"}}))
    assert container["image"].endswith(":1.2.3")
    assert settings_of(container).worker_image == "other/reprise:9"


def test_verbose_and_extra_env_reach_the_container(render) -> None:
    container = operator_container(
        render({"operator": {"verbose": True, "extraEnv": [{"name": "REPRISE_EXTRA", "value": "1"}]}})
    )
    assert container["args"] == ["--verbose"]
    assert {"name": "REPRISE_EXTRA", "value": "1"} in container["env"]


# ------------------------------------------------------------------------------------------ replicas


def test_two_replicas_get_a_pdb_and_leader_election(render) -> None:
    docs = render({"operator": {"replicas": 2}})
    deployment = one(docs, "Deployment", FULLNAME)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    pdb = one(docs, "PodDisruptionBudget", FULLNAME)
    assert pdb["spec"]["minAvailable"] == 1
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert settings_of(operator_container(docs)).leader_election is True
    assert not find(
        render({"operator": {"replicas": 2}, "podDisruptionBudget": {"enabled": False}}), "PodDisruptionBudget"
    )


def test_one_replica_has_no_pdb(render) -> None:
    assert not find(render(), "PodDisruptionBudget")


def test_two_replicas_without_leader_election_are_refused(render) -> None:
    with pytest.raises(RenderError, match="leaderElection"):
        render({"operator": {"replicas": 2, "leaderElection": False}})


def test_without_leader_election_the_old_pod_goes_first_and_no_lease_access(render) -> None:
    docs = render({"operator": {"leaderElection": False}})
    assert one(docs, "Deployment", FULLNAME)["spec"]["strategy"] == {"type": "Recreate"}
    assert settings_of(operator_container(docs)).leader_election is False
    assert not [d for d in docs if "leader-election" in d["metadata"]["name"]]


# ------------------------------------------------------------------------------------------ namespaces


def test_watch_namespaces_use_roles_in_each_namespace_with_the_cluster_rules(render) -> None:
    cluster_rules = one(render(), "ClusterRole", FULLNAME)["rules"]
    docs = render({"watchNamespaces": ["team-a", "team-b"]})
    assert not find(docs, "ClusterRole", FULLNAME) and not find(docs, "ClusterRoleBinding", FULLNAME)
    for namespace in ("team-a", "team-b"):
        role = one(docs, "Role", FULLNAME, namespace)
        assert role["rules"] == cluster_rules
        binding = one(docs, "RoleBinding", FULLNAME, namespace)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": FULLNAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    assert settings_of(operator_container(docs)).namespaces == ("team-a", "team-b")
    # CRD discovery is cluster-scoped by nature and stays a (read-only) ClusterRole.
    assert one(docs, "ClusterRole", f"{FULLNAME}-crd-discovery")["rules"] == [
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]}
    ]


def test_watch_namespaces_must_be_namespace_names(render) -> None:
    with pytest.raises(RenderError, match="watchNamespaces"):
        render({"watchNamespaces": ["Not A Namespace"]})


# ------------------------------------------------------------------------------------------ CRDs


def crds_in_folder() -> dict[str, dict]:
    return {
        d["metadata"]["name"]: d
        for path in sorted((CHART / "crds").glob("*.yaml"))
        for d in [yaml.safe_load(path.read_text())]
    }


def test_crds_folder_is_what_helm_installs_by_default(render) -> None:
    expected = {kind.crd_name for kind in KINDS}
    assert set(crds_in_folder()) == expected
    assert not find(render(), "CustomResourceDefinition"), "templates stay off by default: no double install"
    with_crds = find(render({}, "--include-crds"), "CustomResourceDefinition")
    assert {d["metadata"]["name"] for d in with_crds} == expected


def test_crd_templates_are_the_same_crds_kept_on_uninstall(render) -> None:
    folder = crds_in_folder()
    kept = find(render({"crds": {"enabled": True}}), "CustomResourceDefinition")
    assert len(kept) == 3
    for crd in kept:
        assert crd["metadata"].pop("annotations") == {"helm.sh/resource-policy": "keep"}
        assert crd == folder[crd["metadata"]["name"]]
    dropped = find(render({"crds": {"enabled": True, "keep": False}}), "CustomResourceDefinition")
    assert all("annotations" not in crd["metadata"] for crd in dropped)


# ------------------------------------------------------------------------------------------ schema


@pytest.mark.parametrize(
    "values, complaint",
    [
        ({"replicas": 2}, "replicas"),
        ({"operator": {"replica": 2}}, "replica"),
        ({"rbac": {"secrets": {"enable": True}}}, "enable"),
        ({"metrics": {"serviceMonitor": {"enabled": True, "intervall": "1m"}}}, "intervall"),
        ({"operator": {"replicas": "two"}}, "replicas"),
        ({"operator": {"pollInterval": 0}}, "pollInterval"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"image": {"digest": "latest"}}, "digest"),
        ({"metrics": {"prometheusRule": {"stalledFor": "fifteen minutes"}}}, "stalledFor"),
        ({"networkPolicy": {"kafkaPorts": [70000]}}, "kafkaPorts"),
    ],
)
def test_the_schema_rejects_unknown_keys_and_bad_values(render, values, complaint) -> None:
    with pytest.raises(RenderError, match=complaint):
        render(values)


def test_every_values_key_is_in_the_schema_and_the_schema_is_strict() -> None:
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(node: dict, value: object, path: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, f"{path or '.'}: additionalProperties must be false"
            assert isinstance(value, dict)
            assert set(value) <= set(node["properties"]), f"{path}: values.yaml has keys the schema lacks"
            for key in value:
                walk(node["properties"][key], value[key], f"{path}.{key}" if path else key)

    walk(schema, values, "")


# ------------------------------------------------------------------------------------------ network


def test_network_policy_lets_in_only_scrapes_and_out_only_dns_api_and_kafka(render) -> None:
    policy = one(render(), "NetworkPolicy", FULLNAME)["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    # L3: the metrics name every tenant's replays; by default only pods of the release namespace may scrape.
    assert policy["ingress"] == [
        {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": [{"podSelector": {}}]},
        {"ports": [{"port": "webhook", "protocol": "TCP"}]},
    ]
    ports = [sorted((p["port"], p["protocol"]) for p in rule["ports"]) for rule in policy["egress"]]
    assert ports == [
        [(53, "TCP"), (53, "UDP")],
        [(443, "TCP"), (6443, "TCP")],
        [(9092, "TCP"), (9093, "TCP"), (9094, "TCP")],
    ]
    # M5: the API server and Kafka rules name their peers; no rule but DNS admits any address.
    assert policy["egress"][1]["to"] == SITE["networkPolicy"]["apiServerPeers"]
    assert policy["egress"][2]["to"] == SITE["networkPolicy"]["kafkaPeers"]
    assert all(rule.get("to") for rule in policy["egress"][1:])
    narrowed = one(
        render(
            {
                "networkPolicy": {
                    "kafkaPeers": [{"ipBlock": {"cidr": "10.1.0.0/16"}}],
                    "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
                }
            }
        ),
        "NetworkPolicy",
        FULLNAME,
    )["spec"]
    assert narrowed["egress"][2]["to"] == [{"ipBlock": {"cidr": "10.1.0.0/16"}}]
    assert narrowed["ingress"][0]["from"] == [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    assert not find(render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")


@pytest.mark.parametrize("missing", ["apiServerPeers", "kafkaPeers"])
def test_network_policy_without_its_peers_fails_naming_the_value(render, missing) -> None:
    with pytest.raises(RenderError, match=f"networkPolicy.{missing} is empty"):
        render({"networkPolicy": {missing: []}})
    assert not find(render({"networkPolicy": {missing: [], "enabled": False}}), "NetworkPolicy")


def test_limits_reach_the_operator_settings(render) -> None:
    defaults = settings_of(operator_container(render()))
    assert (defaults.max_active_per_namespace, defaults.max_active, defaults.max_backfill_partitions) == (20, 200, 256)
    assert (defaults.kafka_threads, defaults.kafka_threads_per_namespace, defaults.kafka_connections) == (16, 4, 32)
    values = {
        "maxActivePerNamespace": 3,
        "maxActive": 7,
        "maxBackfillPartitions": 12,
        "kafkaConnections": 5,
        "handoverReaders": 2,
        "offsetReaders": 9,
        "kafkaIdleSeconds": 60,
        "kafkaThreads": 6,
        "kafkaThreadsPerNamespace": 2,
    }
    given = settings_of(operator_container(render({"limits": values})))
    assert (given.max_active_per_namespace, given.max_active, given.max_backfill_partitions) == (3, 7, 12)
    assert (given.kafka_connections, given.handover_readers, given.offset_readers) == (5, 2, 9)
    assert (given.kafka_idle_seconds, given.kafka_threads, given.kafka_threads_per_namespace) == (60.0, 6, 2)
    with pytest.raises(RenderError, match="kafkaThreads"):
        render({"limits": {"kafkaThreads": 0}})


def test_network_policy_selects_the_operator_pod(render) -> None:
    docs = render()
    selector = one(docs, "NetworkPolicy", FULLNAME)["spec"]["podSelector"]["matchLabels"]
    labels = one(docs, "Deployment", FULLNAME)["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


# ------------------------------------------------------------------------------------------ lint


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "operator": {"replicas": 2},
            "watchNamespaces": ["a", "b"],
            "crds": {"enabled": True},
            "metrics": {
                "serviceMonitor": {"enabled": True},
                "podMonitor": {"enabled": True},
                "prometheusRule": {"enabled": True},
                "dashboard": {"enabled": True},
            },
        },
    ],
    ids=["defaults", "everything-on"],
)
def test_helm_lint_is_clean(helm, tmp_path, values) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({**SITE, **values}))
    proc = run_helm(helm, "lint", str(CHART), "--strict", "--namespace", NAMESPACE, "--values", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout and "[INFO]" not in proc.stdout, proc.stdout


def test_lakereplay_defaults_reach_the_operator_settings(render) -> None:
    defaults = settings_of(operator_container(render()))
    assert defaults.spark_image == OperatorSettings.spark_image, "unset values leave the operator's defaults"
    container = operator_container(
        render(
            {
                "operator": {
                    "spark": {
                        "image": "registry.local/reprise-spark:4.1.4",
                        "version": "4.1.4",
                        "driverServiceAccount": "spark",
                        "jars": ["local:///opt/spark/jars/a.jar", "local:///opt/spark/jars/b.jar"],
                        "progressUri": "s3a://lake/_reprise",
                    }
                }
            }
        )
    )
    settings = settings_of(container)
    assert settings.spark_image == "registry.local/reprise-spark:4.1.4"
    assert settings.spark_version == "4.1.4"
    assert settings.spark_service_account == "spark"
    assert settings.spark_jars == ("local:///opt/spark/jars/a.jar", "local:///opt/spark/jars/b.jar")
    assert settings.spark_progress_uri == "s3a://lake/_reprise"


def test_the_oauth_token_endpoints_reach_the_operator_settings(render) -> None:
    """The only URLs a tenant's Secret may make the operator call (issue 26, C1): none by default."""
    assert settings_of(operator_container(render())).oauth_token_endpoints == ()
    endpoints = ["https://idp.example/oauth2/token", "https://login.example/t"]
    settings = settings_of(operator_container(render({"kafka": {"oauthTokenEndpoints": endpoints}})))
    assert settings.oauth_token_endpoints == tuple(endpoints)
    with pytest.raises(RenderError, match="oauthTokenEndpoints"):
        render({"kafka": {"oauthTokenEndpoints": ["/var/run/secrets/kubernetes.io/serviceaccount/token"]}})


def test_the_spark_image_and_driver_account_are_pinned_only_when_the_platform_says_so(render) -> None:
    defaults = settings_of(operator_container(render()))
    assert (defaults.spark_allow_image_override, defaults.spark_allow_service_account_override) == (True, True)
    pinned = settings_of(
        operator_container(
            render({"operator": {"spark": {"allowImageOverride": False, "allowServiceAccountOverride": False}}})
        )
    )
    assert (pinned.spark_allow_image_override, pinned.spark_allow_service_account_override) == (False, False)


def _prefix_policy(docs: list[dict]) -> tuple[dict | None, dict | None]:
    found = {d["kind"]: d for d in docs if d["metadata"]["name"].endswith("-kafka-prefixes")}
    return found.get("ValidatingAdmissionPolicy"), found.get("ValidatingAdmissionPolicyBinding")


def test_the_kafka_prefix_policy_follows_its_values(render) -> None:
    policy, binding = _prefix_policy(render())
    assert policy is not None and binding is not None
    messages = " ".join(v["messageExpression"] for v in policy["spec"]["validations"])
    for field in ("spec.kafka.configFrom", "spec.consumerGroup", "spec.replayGroup", "spec.topic", "spec.drainGroup"):
        assert field in messages, field
    assert '["{namespace}.","reprise.{namespace}."]' in policy["spec"]["variables"][2]["expression"]
    assert "matchResources" not in binding["spec"]
    # Anonymous allowed: the configFrom rule goes, the prefix rules stay.
    policy, _ = _prefix_policy(render({"kafka": {"allowAnonymous": True}}))
    assert policy is not None
    assert "spec.kafka.configFrom" not in " ".join(v["messageExpression"] for v in policy["spec"]["validations"])
    # Neither: no policy at all.
    assert _prefix_policy(render({"kafka": {"allowAnonymous": True, "prefixes": {"enabled": False}}})) == (None, None)
    # A release that watches namespaces binds those only.
    _, binding = _prefix_policy(render({"watchNamespaces": ["team-a", "team-b"]}))
    assert binding is not None
    selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
    assert selector == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
