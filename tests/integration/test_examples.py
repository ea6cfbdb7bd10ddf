"""Every manifest in examples/, applied unchanged to the local platform, reaches at least PlanReady, or stops
for the reason declared for it in `NOT_PLAN_READY`, asserted.

The test iterates over the folder, so a new example is covered the day it is added. What a manifest refers to
and a cluster would already hold (its topics, the Kafka client Secret, the keys or schema ConfigMap, the
Deployment it clones or scales) is made from the manifest itself (`prerequisites`); the manifest is applied as
the file is (`kubectl apply -f examples/<file>`). Its Kafka address (`kafka-bootstrap.kafka:9092`) reaches the
test broker as on `make run`: the operator maps every `*.kafka:*` name to it (REPRISE_KAFKA_BOOTSTRAP_ALIASES,
set by the `operator` fixture).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.fixtures.kube import wait_for

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KINDS = {"Backfill": "backfill", "Reconsume": "reconsume", "LakeReplay": "lakereplay"}
#: Partitions of every topic the test makes (LakeReplay's backfillTopic.partitions may ask for more: its own).
PARTITIONS = 3

#: Examples that cannot reach PlanReady on the local platform, and why: file -> (condition type, reason) the
#: resource must show instead. An example not listed must reach PlanReady.
NOT_PLAN_READY: dict[str, tuple[str, str]] = {}


@dataclass
class Prerequisites:
    """What a cluster would hold before the manifest is applied."""

    topics: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    deployments: set[str] = field(default_factory=set)


def prerequisites(manifest: dict) -> Prerequisites:
    """The topics, Secrets, ConfigMaps and Deployments `manifest` names (pure: from the manifest alone)."""
    spec = manifest.get("spec") or {}
    found = Prerequisites()
    secret = ((spec.get("kafka") or {}).get("configFrom") or {}).get("secretRef") or {}
    if secret.get("name"):
        found.secrets.add(secret["name"])
    source = spec.get("source") or {}
    found.topics.update(spec.get("topics") or [])
    if spec.get("topic"):
        found.topics.add(spec["topic"])
    if (source.get("topic") or {}).get("name"):
        found.topics.add(source["topic"]["name"])
    debezium = source.get("debezium") or {}
    found.topics.update(t for t in (debezium.get("signalTopic"), debezium.get("notificationTopic")) if t)
    reconsume = (spec.get("then") or {}).get("reconsume") or {}
    found.topics.update(reconsume.get("topics") or [])
    keys = (spec.get("keysFrom") or {}).get("configMapRef") or {}
    if keys:
        found.configmaps[keys["name"]] = {keys.get("key", "keys"): "k-1\nk-2\nk-3\n"}
    schema = (source.get("schema") or {}).get("configMapRef") or {}
    if schema:
        from spark_app.lakegen import LATEST_SCHEMA

        found.configmaps[schema["name"]] = {schema["key"]: json.dumps(LATEST_SCHEMA)}
    for ref in (
        (spec.get("consumer") or {}).get("deploymentRef"),
        spec.get("liveDeployment"),
        (reconsume.get("consumer") or {}).get("deploymentRef"),
    ):
        if ref and ref.get("name"):
            found.deployments.add(ref["name"])
    return found


def deployment(name: str) -> dict:
    """A Deployment of an image the node agent does not run (it only reports its pod Running)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": f"registry.example.com/{name}:1"}]},
            },
        },
    }


def make(kube, kafka, namespace: str, needs: Prerequisites) -> None:
    existing = kafka.admin().list_topics(timeout=10).topics  # examples share topic names across namespaces
    for topic in sorted(needs.topics):
        if topic not in existing:
            kafka.create_topic(topic, PARTITIONS)
    objects = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": s, "labels": {"reprise.io/kafka-client": "true"}},
            "stringData": {"client.rack": "examples"},
        }
        for s in sorted(needs.secrets)
    ]
    objects += [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": d}
        for n, d in needs.configmaps.items()
    ]
    objects += [deployment(d) for d in sorted(needs.deployments)]
    for obj in objects:
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def example_files() -> list[str]:
    return sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def replay_of(filename: str) -> dict:
    """The file's Reprise resource (a file may also hold what it needs, such as a Deployment: applied with it)."""
    documents = [d for d in yaml.safe_load_all((EXAMPLES / filename).read_text()) if d]
    replays = [d for d in documents if d.get("kind") in KINDS]
    assert len(replays) == 1, f"{filename}: {len(replays)} Reprise resources; an example holds one"
    return replays[0]


def test_the_examples_folder_holds_one_manifest_per_kind_at_least():
    kinds = {replay_of(f)["kind"] for f in example_files()}
    assert set(KINDS) <= kinds
    assert set(NOT_PLAN_READY) <= set(example_files()), "NOT_PLAN_READY names a file examples/ no longer has"


@pytest.mark.parametrize("filename", example_files())
def test_example_applied_unchanged_reaches_plan_ready_or_its_declared_reason(
    filename, kube, kafka, operator, namespace
):
    path = EXAMPLES / filename
    manifest = replay_of(filename)
    make(kube, kafka, namespace, prerequisites(manifest))
    kube.kubectl("apply", "-n", namespace, "-f", str(path))
    kind, name = KINDS[manifest["kind"]], manifest["metadata"]["name"]

    def conditions() -> dict[str, dict]:
        body = json.loads(kube.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)
        return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}

    expected = NOT_PLAN_READY.get(filename)
    if expected is None:
        seen = wait_for(
            lambda: (c := conditions()).get("PlanReady", {}).get("status") == "True" and c,
            120,
            f"{filename} to reach PlanReady",
            interval=1,
        )
        assert "Failed" not in seen or seen["Failed"]["status"] != "True", seen.get("Failed")
    else:
        type_, reason = expected
        seen = wait_for(
            lambda: (c := conditions()).get(type_, {}).get("reason") == reason and c,
            120,
            f"{filename} to show {type_} {reason}",
            interval=1,
        )
        assert seen.get("PlanReady", {}).get("status") != "True"
