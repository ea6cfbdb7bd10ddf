"""Two teams on one Kafka cluster and one Reprise (issue 27; security review C2 attack 1, M1, M2).

The platform is the multi-tenant one (`tests.fixtures.tenants`): namespaces `team-a` and `team-b`, each with its
SASL principal, the prefixed ACLs of docs/security.md and the group and topic prefixes annotated on the
namespace; both may read `shared.orders`. The chart's ValidatingAdmissionPolicy (`kafka-prefixes`, rendered with
`helm template`, bound here to the test's namespaces only) runs in the real API server.

- Every field that names a Kafka group or a written topic is refused, naming the field, outside the
  namespace's prefixes; a namespace without annotations gets the chart's default prefixes.
- Each team reads the shared topic and its own, and nothing of the other team's.
- The whole suite, team A attacking while team B replays exactly, is `test_tenant_handover.py`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException

from local_platform.kafka_tenants import CLIENT_SECRET, SHARED_TOPIC, MultiTenant
from tests.fixtures.kube import Kube, wait_for


pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "reprise"
EXAMPLES = REPO / "examples"
LIVE_IMAGE = "reprise-test/accounts:dev"


def kafka_prefix_policy(kube: Kube) -> list[dict]:
    """The chart's policy and binding as `helm install` makes them (default values)."""
    rendered = kube.helm(
        "template",
        "reprise",
        str(CHART),
        "--set",
        "networkPolicy.enabled=false",
        "--show-only",
        "templates/admission/kafka-prefixes.yaml",
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def create(kube: Kube, namespace: str, body: dict, *, dry_run: bool = True):
    argv = ["create", "-n", namespace, "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    return kube.kubectl(*argv, input=json.dumps(body), check=False)


@pytest.fixture(scope="module")
def policy(kube: Kube, tenants: MultiTenant, reprise_crds) -> Iterator[list[str]]:
    """The chart's policy in the API server, its binding limited to the namespaces given by `bind` (the teams and
    the test's own), so that other tests of this process are not bound by it; deleted afterwards."""
    docs = kafka_prefix_policy(kube)
    assert [d["kind"] for d in docs] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    bound: list[str] = [t.name for t in tenants.tenants]

    def bind() -> None:
        binding = copy.deepcopy(docs[1])
        binding["spec"]["matchResources"] = {
            "namespaceSelector": {
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": bound}]
            }
        }
        kube.kubectl(
            "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [docs[0], binding]})
        )
        # The API server compiles a new policy and binding in the background: wait until it refuses.
        probe = reconsume("probe", "127.0.0.1:9092", "nobody.probe")
        wait_for(
            lambda: all(create(kube, ns, probe).returncode != 0 for ns in bound),
            60,
            "the kafka-prefixes policy to be enforced",
        )

    bind()
    try:
        yield bound
    finally:
        for doc in reversed(docs):
            kube.kubectl("delete", doc["kind"], doc["metadata"]["name"], "--ignore-not-found", check=False)


# ---------------------------------------------------------------------------------------------- resources


def reconsume(name: str, bootstrap: str, group: str, mode: str = "Handover", **spec: object) -> dict:
    body: dict = {
        "kafka": {"bootstrapServers": bootstrap, "configFrom": {"secretRef": {"name": CLIENT_SECRET}}},
        "topics": [SHARED_TOPIC],
        "consumerGroup": group,
        "mode": mode,
        "start": {"earliest": True},
    }
    if mode == "Rewind":
        body["liveDeployment"] = {"name": "accounts"}
    else:
        body["consumer"] = {
            "deploymentRef": {"name": "accounts"},
            "env": [{"name": "REPRISE_HANDLER", "value": "tests.integration.replay_worker.sink:record"}],
        }
    body.update(spec)
    return {"apiVersion": "reprise.io/v1alpha1", "kind": "Reconsume", "metadata": {"name": name}, "spec": body}


def backfill(ns: str, **spec: object) -> dict:
    body = yaml.safe_load((EXAMPLES / "backfill-topic.yaml").read_text())
    body["spec"]["kafka"]["configFrom"]["secretRef"]["name"] = CLIENT_SECRET
    body["spec"].update({"topic": f"{ns}.users", "downstreamGroups": [f"{ns}.billing"], **spec})
    return body


def lakereplay(ns: str, **spec: object) -> dict:
    body = yaml.safe_load((EXAMPLES / "lakereplay-then-reconsume.yaml").read_text())
    body["spec"]["kafka"]["configFrom"]["secretRef"]["name"] = CLIENT_SECRET
    body["spec"]["drainGroup"] = f"{ns}.lake"
    body["spec"]["backfillTopic"] = {"name": f"{ns}.users.backfill"}
    body["spec"]["then"]["reconsume"]["consumerGroup"] = f"{ns}.accounts"
    body["spec"].update(spec)
    return body


def with_then(body: dict, **then: object) -> dict:
    body = copy.deepcopy(body)
    body["spec"]["then"]["reconsume"].update(then)
    return body


def without_config_from(body: dict) -> dict:
    body = copy.deepcopy(body)
    del body["spec"]["kafka"]["configFrom"]
    return body


B = "127.0.0.1:9092"  # admission never connects: any address does
FORWARD = [
    {"name": "REPRISE_FORWARD_TOPIC", "value": "team-b.accounts"},
]
#: (what, resource in team-a, the field the refusal must name)
REFUSED = [
    ("Handover on team B's group", reconsume("r", B, "team-b.accounts"), "spec.consumerGroup: team-b.accounts"),
    ("Rewind of team B's group", reconsume("r", B, "team-b.accounts", "Rewind"), "spec.consumerGroup: team-b.accounts"),
    (
        "Parallel joining team B's group as its replay group",
        reconsume("r", B, "team-a.accounts", "Parallel", replayGroup="team-b.accounts"),
        "spec.replayGroup: team-b.accounts",
    ),
    (
        "a forward into team B's topic",
        reconsume(
            "r", B, "team-a.accounts", "Parallel", consumer={"deploymentRef": {"name": "accounts"}, "env": FORWARD}
        ),
        "REPRISE_FORWARD_TOPIC: team-b.accounts",
    ),
    ("a Backfill into team B's topic", backfill("team-a", topic="team-b.users"), "spec.topic: team-b.users"),
    (
        "a Backfill barrier reading team B's group",
        backfill("team-a", downstreamGroups=["team-a.billing", "team-b.billing"]),
        "spec.downstreamGroups: team-b.billing",
    ),
    (
        "a LakeReplay writing team B's topic",
        lakereplay("team-a", backfillTopic={"name": "team-b.users"}),
        "spec.backfillTopic.name: team-b.users",
    ),
    ("a LakeReplay draining as team B", lakereplay("team-a", drainGroup="team-b.lake"), "spec.drainGroup: team-b.lake"),
    (
        "a LakeReplay continuing on team B's group",
        with_then(lakereplay("team-a"), consumerGroup="team-b.accounts"),
        "spec.then.reconsume.consumerGroup: team-b.accounts",
    ),
    (
        "a LakeReplay continuing with team B's group as replay group",
        with_then(lakereplay("team-a"), mode="Parallel", replayGroup="team-b.accounts"),
        "spec.then.reconsume.replayGroup: team-b.accounts",
    ),
    (
        "a LakeReplay continuation forwarding into team B's topic",
        with_then(lakereplay("team-a"), mode="Parallel", consumer={"deploymentRef": {"name": "a"}, "env": FORWARD}),
        "consumer.env REPRISE_FORWARD_TOPIC: team-b.accounts",
    ),
    ("no credentials (anonymous)", without_config_from(reconsume("r", B, "team-a.accounts")), "spec.kafka.configFrom"),
]


@pytest.mark.parametrize("what, body, field", REFUSED, ids=[case[0] for case in REFUSED])
def test_a_field_outside_the_namespace_prefixes_is_refused_naming_it(kube, policy, what, body, field) -> None:
    refused = create(kube, "team-a", body)
    assert refused.returncode != 0, f"{what}: admitted"
    assert field in refused.stderr and "ValidatingAdmissionPolicy" in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    "body",
    [
        reconsume("r", B, "team-a.accounts"),  # the default replay group reprise.team-a.r is under the prefixes
        reconsume("r", B, "team-a.accounts", "Rewind"),
        reconsume("r", B, "team-a.accounts", "Parallel", replayGroup="reprise.team-a.mine"),
        backfill("team-a"),
        lakereplay("team-a"),
    ],
    ids=["handover", "rewind", "parallel", "backfill", "lakereplay"],
)
def test_the_same_resources_under_the_namespace_prefixes_are_admitted(kube, policy, body) -> None:
    admitted = create(kube, "team-a", body)
    assert admitted.returncode == 0, admitted.stderr


def test_a_namespace_without_annotations_gets_the_chart_default_prefixes(kube, policy, namespace) -> None:
    policy.append(namespace)  # bind the policy to this namespace too (unannotated)
    try:
        binding = kafka_prefix_policy(kube)[1]
        binding["spec"]["matchResources"] = {
            "namespaceSelector": {
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": policy}]
            }
        }
        kube.kubectl("apply", "-f", "-", input=json.dumps(binding))
        wait_for(
            lambda: create(kube, namespace, reconsume("r", B, "accounts")).returncode != 0,
            60,
            "the binding to reach the new namespace",
        )
        refused = create(kube, namespace, reconsume("r", B, "accounts"))
        assert (
            f"spec.consumerGroup: accounts belongs to another team (reprise.io/kafka-group-prefixes of namespace {namespace}: {namespace}., reprise.{namespace}.)"
            in refused.stderr
        ), refused.stderr
        admitted = create(kube, namespace, reconsume("r", B, f"{namespace}.accounts"))
        assert admitted.returncode == 0, admitted.stderr
    finally:
        policy.remove(namespace)


# ---------------------------------------------------------------------------------------------- the suite


def refusal(action) -> str | None:
    """The Kafka error an action by team A's principal got, or None when Kafka let it through."""
    try:
        action()
    except KafkaException as exc:
        return exc.args[0].name()
    return None


def read_one(settings: dict, topic: str, group: str) -> bytes:
    """The first record of `topic`, read in `group`; a refusal raises KafkaException (a subscription hears it, an
    assignment only logs it)."""
    reader = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        reader.subscribe([topic])
        message = wait_for(lambda: reader.poll(1.0), 60, f"an answer from {topic}")
        if message.error() is not None:
            raise KafkaException(message.error())
        return message.value()
    finally:
        reader.close()


def test_each_team_reads_the_shared_topic_and_nothing_of_the_other_team(kafka, tenants) -> None:
    from confluent_kafka import Producer

    team_a, team_b = tenants.tenant("team-a"), tenants.tenant("team-b")
    kafka.create_topic("team-b.private", 1)  # the platform's topics; ACLs are what is tested
    platform = Producer({"bootstrap.servers": kafka.bootstrap})
    for topic in (SHARED_TOPIC, "team-b.private"):
        platform.produce(topic, b"v", partition=0)
    platform.flush(30)
    a = {"bootstrap.servers": kafka.sasl_bootstrap, **team_a.client_settings()}
    b = {"bootstrap.servers": kafka.sasl_bootstrap, **team_b.client_settings()}
    assert read_one(a, SHARED_TOPIC, "team-a.reader") == b"v"
    assert read_one(b, SHARED_TOPIC, "team-b.reader") == b"v"
    assert read_one(b, "team-b.private", "team-b.reader") == b"v"
    assert refusal(lambda: read_one(a, "team-b.private", "team-a.reader")) == "TOPIC_AUTHORIZATION_FAILED"

    def write(topic: str) -> None:
        producer = Producer({**a, "message.timeout.ms": 30000})
        failures: list = []
        producer.produce(topic, b"x", on_delivery=lambda err, _msg: failures.append(err) if err else None)
        producer.flush(60)
        if failures:
            raise KafkaException(failures[0])

    assert refusal(lambda: write("team-b.private")) == "TOPIC_AUTHORIZATION_FAILED"
    assert refusal(lambda: write(SHARED_TOPIC)) == "TOPIC_AUTHORIZATION_FAILED"  # shared means read, not write
    kafka.create_topic("team-a.own", 1)
    assert refusal(lambda: write("team-a.own")) is None  # its own prefix: allowed


def test_team_a_cannot_forge_a_record_in_the_handover_topic_team_b_reads(kafka, tenants) -> None:
    """C2 attack 2 (review C2.1): team A writes a forged `handover` record for a replay of team B, so that team B's
    guard would hand a partition back at an offset team A chose. With one handover topic per cluster every team
    could write it; now team B's guard reads its namespace's topic, on which team A has no ACL."""
    from confluent_kafka import Producer

    from replay_worker.protocol.wire import HandoverInfo, encode
    from replay_worker.topic.handover_topic import HandoverTopic
    from reprise_operator.shared.settings import OperatorSettings

    settings = OperatorSettings.from_env({})
    b_topic, a_topic = settings.handover_topic_for("team-b"), settings.handover_topic_for("team-a")
    assert b_topic != a_topic
    team_a, team_b = tenants.tenant("team-a"), tenants.tenant("team-b")
    a = {"bootstrap.servers": kafka.sasl_bootstrap, **team_a.client_settings()}
    forged = encode(HandoverInfo("team-b/accounts-replay/1", "team-b.accounts", 0, 10**9, "drained", "team-a", 1))

    def write(topic: str) -> None:
        producer = Producer({**a, "message.timeout.ms": 30000})
        failures: list = []
        producer.produce(topic, forged[1], key=forged[0], on_delivery=lambda e, _m: failures.append(e) if e else None)
        producer.flush(60)
        if failures:
            raise KafkaException(failures[0])

    attack = refusal(lambda: write(b_topic))
    print(f"team A writes a forged handover record to {b_topic}: {attack or 'WRITTEN'}")
    assert attack == "TOPIC_AUTHORIZATION_FAILED"
    assert refusal(lambda: read_one(a, b_topic, "team-a.reader")) == "TOPIC_AUTHORIZATION_FAILED"
    # Team B's guard and replay pods use their topic as before: it is readable, and holds nothing of team A's.
    view = HandoverTopic(kafka.sasl_bootstrap, b_topic, team_b.client_settings()).read()
    assert "team-b/accounts-replay/1" not in view.replays
    assert refusal(lambda: write(a_topic)) is None  # team A's own topic: its forgery harms only itself
