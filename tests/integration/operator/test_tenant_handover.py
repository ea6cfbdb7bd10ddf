"""Team A attacks while team B replays exactly (issue 27; security review C2 attack 1, M1), on the multi-tenant
platform.

Team B runs a Handover replay of its live service. Meanwhile team A tries C2 attack 1 through the API (a Handover
Reconsume in its own namespace naming team B's group, on the shared topic) and M1 (rewind, join, delete team B's
group) through the API and with its own Kafka principal. Each attempt is refused at admission or by an ACL, and
team B's replay completes exactly: its ledger holds every record once from where the guard began to skip,
nothing lost.

It once stalled (one full `make test` run in four, session 11): team B's worker planned 2 of the 3 partitions and
left partition 2 to the live group at its assignment, while the operator's plan held 3. The worker's bootstrap
read of the handover topic had applied a consume batch that ended inside a later bootstrap transaction (records
after the end it read to): tests/integration/replay_worker/test_handover_read_end.py.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from local_platform.kafka_tenants import CLIENT_SECRET, SHARED_TOPIC
from tests.fixtures.kube import wait_for
from tests.integration.operator.scenario import (
    HANDOVER_TOPIC_ENV,
    PARTITIONS,
    KeepProducing,
    Ledger,
    apply,
    produce,
    wait_caught_up,
    wait_phase,
)
from reprise_operator.shared.constants import replay_group_name
from tests.integration.operator.test_tenant_isolation import LIVE_IMAGE, create, policy, reconsume, refusal

#: The module fixture of the admission suite, reused: the chart's policy bound to the test's namespaces.
__all__ = ["policy"]


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
            *HANDOVER_TOPIC_ENV,
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
