"""Two teams on one Kafka cluster and one Reprise (issue 27; security review C2 attack 1, M1, M2).

The platform is the multi-tenant one (`tests.fixtures.tenants`): namespaces `team-a` and `team-b`, each with its
SASL principal, the prefixed ACLs of docs/security.md and the group and topic prefixes annotated on the
namespace; both may read `shared.orders`. The chart's ValidatingAdmissionPolicy (`kafka-prefixes`, rendered with
`helm template`, bound here to the test's namespaces only) runs in the real API server.

- Every field that names a Kafka group or a written topic is refused, naming the field, outside the
  namespace's prefixes; a namespace without annotations gets the chart's default prefixes.
- The suite: team B runs a Handover replay of its live service. Meanwhile team A tries C2 attack 1 through the
  API (a Handover Reconsume in its own namespace naming team B's group, on the shared topic) and M1 (rewind,
  join, delete team B's group) through the API and with its own Kafka principal. Each attempt is refused at
  admission or by an ACL, and team B's replay completes exactly: its ledger holds every record once from where
  the guard began to skip, nothing lost.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from local_platform.kafka_tenants import CLIENT_SECRET, SHARED_TOPIC, MultiTenant
from reprise_operator.shared.constants import replay_group_name
from tests.fixtures.kube import Kube, wait_for

from .scenario import PARTITIONS, KeepProducing, Ledger, apply, produce, wait_caught_up, wait_phase

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


def team_b_live_service(bootstrap: str, group: str, topic: str, out_dir: Path) -> dict:
    """Team B's guarded live service, connected as team B's principal (the password from its Secret)."""

    def from_secret(key: str) -> dict:
        return {"secretKeyRef": {"name": CLIENT_SECRET, "key": key}}

    command = ["python", "-m", "tests.integration.replay_worker.live_service", bootstrap, group, topic, str(out_dir)]
    container = {
        "name": "app",
        "image": LIVE_IMAGE,
        "command": command,
        "env": [
            {"name": "REPRISE_TEST_SINK_DIR", "value": str(out_dir)},
            {"name": "LIVE_SASL_USERNAME", "valueFrom": from_secret("sasl.username")},
            {"name": "LIVE_SASL_PASSWORD", "valueFrom": from_secret("sasl.password")},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "accounts"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "accounts"}},
            "template": {
                "metadata": {"labels": {"app": "accounts"}},
                "spec": {"terminationGracePeriodSeconds": 10, "containers": [container]},
            },
        },
    }


def refusal(action) -> str | None:
    """The Kafka error an action by team A's principal got, or None when Kafka let it through."""
    try:
        action()
    except KafkaException as exc:
        return exc.args[0].name()
    return None


def test_team_a_cannot_touch_team_b_while_team_b_replays_exactly(kube, kafka, operator, tenants, policy, tmp_path):
    team_a = tenants.tenant("team-a")
    topic, group, name = "team-b.accounts", "team-b.accounts", "add-locale"
    sasl = kafka.sasl_bootstrap
    out = tmp_path / "processed"
    out.mkdir()
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka.bootstrap, topic, 2000)  # the platform's producer; what is tested is who may consume
    apply(kube, "team-b", team_b_live_service(sasl, group, topic, out))
    wait_caught_up(kafka.bootstrap, group, topic, PARTITIONS)

    try:
        check_isolation(kube, kafka, operator, team_a, sasl, topic, group, name, out)
    finally:
        kube.kubectl("delete", "reconsume", "--all", "-n", "team-a", "--ignore-not-found", "--wait=false", check=False)
        kube.kubectl("delete", "reconsume", name, "-n", "team-b", "--ignore-not-found", "--wait=false", check=False)
        kube.kubectl("delete", "deployment", "accounts", "-n", "team-b", "--ignore-not-found", check=False)


def check_isolation(kube, kafka, operator, team_a, sasl: str, topic: str, group: str, name: str, out: Path) -> None:
    outcomes: dict[str, str] = {}
    a_settings = {"bootstrap.servers": sasl, **team_a.client_settings()}
    with KeepProducing(kafka.bootstrap, topic) as producer:
        replay = reconsume(name, sasl, group, topics=[topic], completion={"drainedFor": "2s"})
        replay["spec"]["consumer"]["env"] += [
            {"name": "REPRISE_TEST_SINK_DIR", "value": str(out)},
            {"name": "REPRISE_BATCH_SIZE", "value": "100"},
            # Slow enough that the guard is skipping while team A attacks.
            {"name": "REPRISE_MAX_RECORDS_PER_SECOND", "value": "300"},
        ]
        apply(kube, "team-b", replay)
        wait_phase(kube, "team-b", "reconsume", name, "Running", 120, operator)

        # C2 attack 1 and M1 through Reprise's API, in team A's namespace, on the topic both may read.
        for what, body in [
            ("C2.1 Handover naming team B's group", reconsume("steal", sasl, group)),
            ("M1 Rewind of team B's group", reconsume("rewind", sasl, group, "Rewind")),
            ("M1 join/delete as replay group", reconsume("join", sasl, "team-a.x", "Parallel", replayGroup=group)),
        ]:
            made = create(kube, "team-a", body, dry_run=False)
            if made.returncode == 0:  # admitted: the attack got in (before the policy); take it out again
                outcomes[what] = "ADMITTED"
                kube.kubectl("delete", "reconsume", body["metadata"]["name"], "-n", "team-a", "--wait=false")
            else:
                outcomes[what] = "refused at admission: " + made.stderr.strip().splitlines()[-1][-160:]

        # M1 with team A's own principal, straight to Kafka: rewind, join, delete team B's group.
        def rewind() -> None:
            admin = AdminClient(a_settings)
            from confluent_kafka import ConsumerGroupTopicPartitions

            request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])
            admin.alter_consumer_group_offsets([request], request_timeout=15)[group].result(timeout=30)

        def join() -> None:
            # Joining is what a member does first; the coordinator answers with the group's authorization.
            member = Consumer({**a_settings, "group.id": group, "enable.auto.commit": False})
            try:
                member.subscribe([SHARED_TOPIC])
                answer = wait_for(lambda: member.poll(1.0), 60, "an answer to team A's join of team B's group")
                if answer.error() is not None:
                    raise KafkaException(answer.error())
            finally:
                member.close()

        def delete() -> None:
            admin = AdminClient(a_settings)
            admin.delete_consumer_groups([group], request_timeout=15)[group].result(timeout=30)

        for what, action in [("M1 rewind by ACL", rewind), ("M1 join by ACL", join), ("M1 delete by ACL", delete)]:
            error = refusal(action)
            outcomes[what] = f"refused by ACL: {error}" if error else "SUCCEEDED"

        # The shared topic stays readable by team A: the ACLs refuse only what is team B's.
        reader = Consumer({**a_settings, "group.id": "team-a.orders", "auto.offset.reset": "earliest"})
        try:
            listed = reader.list_topics(SHARED_TOPIC, timeout=15).topics[SHARED_TOPIC]
            outcomes["team A reads the shared topic"] = "ok" if listed.error is None else str(listed.error)
        finally:
            reader.close()

        done = wait_phase(kube, "team-b", "reconsume", name, "Complete", 300, operator)
    print("\n".join(f"{what}: {outcome}" for what, outcome in outcomes.items()))
    assert producer.written > 0

    # Team B's replay is exact: from the first offset its guard skipped, every record once, nothing lost.
    ends = wait_caught_up(kafka.bootstrap, group, topic, PARTITIONS)
    ledger = Ledger.read(out, topic)
    skipped = [p for p in range(PARTITIONS) if ledger.first_skipped(p, ends[p]) < ends[p]]
    assert skipped, "team B's guard never skipped: nothing was handed over"
    checked = 0
    for p in range(PARTITIONS):
        live, replayed = ledger.live.get(p, {}), ledger.replay.get(p, {})
        for offset in range(ledger.first_skipped(p, ends[p]), ends[p]):
            total = live.get(offset, 0) + replayed.get(offset, 0)
            assert total == 1, f"partition {p} offset {offset}: processed {total} times"
            checked += 1
    print(
        f"team B: {checked} offsets from the guard's first skip to the end, each processed once; live "
        f"{sum(map(sum, (c.values() for c in ledger.live.values())))} replay "
        f"{sum(map(sum, (c.values() for c in ledger.replay.values())))} records; ends {ends}"
    )
    assert all(part["state"] == "HandedOver" for part in done["status"]["progress"]["partitions"])
    assert done["status"]["children"]["replayGroup"] == replay_group_name("team-b", name) == f"reprise.team-b.{name}"

    attacks = {what: outcome for what, outcome in outcomes.items() if what.startswith(("C2", "M1"))}
    succeeded = {what: outcome for what, outcome in attacks.items() if not outcome.startswith("refused")}
    assert not succeeded, f"attacks of team A that got through: {succeeded}"
    by_acl = {what: outcome for what, outcome in attacks.items() if "by ACL" in what}
    assert set(by_acl.values()) == {"refused by ACL: GROUP_AUTHORIZATION_FAILED"}, by_acl
    assert outcomes["team A reads the shared topic"] == "ok"


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
