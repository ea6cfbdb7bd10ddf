"""Backfill end to end, one source per test: the operator as a process, the real API server and controller
manager, Jobs whose pods really run (Reprise's worker, or the example upstream CLI, through the node agent),
and the real broker. Downstream groups are consumers the test runs or holds back."""

from __future__ import annotations

import json

import pytest

from reprise_operator.kinds.backfill.keys_file import partition_for
from reprise_operator.doors.debezium import execute_snapshot, signal_id
from tests.fixtures.kube import wait_for

from .backfill_scenario import (
    FakeConnector,
    commit,
    conditions,
    consume_to_end,
    produce_keyed,
    read_topic,
    wait_status,
)
from .scenario import apply, end_offsets

pytestmark = pytest.mark.integration

UPSTREAM_IMAGE = "reprise-test/users-service:dev"


def backfill(name: str, bootstrap: str, topic: str, source: dict, **spec) -> dict:
    return {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Backfill",
        "metadata": {"name": name},
        "spec": {"kafka": {"bootstrapServers": bootstrap}, "topic": topic, "source": source, **spec},
    }


def upstream_template(database, bootstrap: str, rate: float = 0) -> dict:
    """The example upstream service's backfill CLI as the Job's pod template."""
    command = [
        "python",
        "-m",
        "examples.upstream_cli",
        "backfill",
        "--database",
        str(database),
        "--bootstrap-servers",
        bootstrap,
    ]
    if rate:
        command += ["--max-records-per-second", str(rate)]
    return {"spec": {"containers": [{"name": "backfill", "image": UPSTREAM_IMAGE, "command": command}]}}


def entities(path, count: int):
    from examples.upstream_cli import EntityStore

    store = EntityStore(path)
    store.put_many({f"user-{i}": json.dumps({"user": i, "fixed": True}) for i in range(count)})
    store.close()
    return path


def jobs_of(kube, namespace: str, name: str) -> list[dict]:
    out = kube.kubectl("get", "jobs", "-n", namespace, "-l", f"reprise.io/replay={name}", "-o", "json")
    return json.loads(out.stdout)["items"]


def pods_of(kube, namespace: str, name: str) -> list[dict]:
    out = kube.kubectl("get", "pods", "-n", namespace, "-l", f"reprise.io/replay={name}", "-o", "json")
    return json.loads(out.stdout)["items"]


def phase(body: dict) -> str | None:
    return (body.get("status") or {}).get("phase")


def is_true(body: dict, type_: str) -> bool:
    return conditions(body).get(type_, {}).get("status") == "True"


def test_topic_source_re_emits_the_latest_value_of_1000_keys_on_the_right_partition(
    kube, kafka, operator, namespace, topic_name
):
    source, target = f"{topic_name}-state", topic_name
    kafka.create_topic(source, 3)
    kafka.create_topic(target, 4)
    present = [f"user-{i:04d}" for i in range(1000)]
    absent = [f"ghost-{i}" for i in range(15)]
    # Three versions of every named key, some keys nobody asked for, and one named key deleted since.
    history = [(k, json.dumps({"key": k, "version": v})) for v in range(3) for k in present]
    history += [(f"other-{i}", "{}") for i in range(200)] + [("user-deleted", "{}"), ("user-deleted", None)]
    produce_keyed(kafka.bootstrap, source, history)
    produce_keyed(kafka.bootstrap, target, [(f"older-{i}", "{}") for i in range(40)])
    before = end_offsets(kafka.bootstrap, target, 4)
    # The source was written by librdkafka's murmur2_random: the plan's partitioner must agree with it.
    assert all(p == partition_for(k.decode(), 3) for p, _, k, _ in read_topic(kafka.bootstrap, source, 3))

    named = present + absent + ["user-deleted"]
    apply(
        kube,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "users-to-fix"},
            "data": {"keys.txt": "\n".join(named) + "\n"},
        },
    )
    apply(
        kube,
        namespace,
        backfill(
            "users-fix",
            kafka.bootstrap,
            target,
            {"topic": {"name": source}},
            keysFrom={"configMapRef": {"name": "users-to-fix", "key": "keys.txt"}},
        ),
    )
    done = wait_status(kube, namespace, "users-fix", lambda b: phase(b) == "Complete", "Complete", 85, operator)

    status = done["status"]
    written = read_topic(kafka.bootstrap, target, 4, before)
    by_key = {}
    for partition, _offset, key, value in written:
        assert key.decode() not in by_key, f"{key!r} re-emitted twice"
        by_key[key.decode()] = (partition, json.loads(value))
    assert set(by_key) == set(present)
    for key, (partition, value) in by_key.items():
        assert value == {"key": key, "version": 2}, f"{key}: not the latest value"
        assert partition == partition_for(key, 4), f"{key}: on partition {partition}"
    assert status["keysNotFound"] == sorted(absent + ["user-deleted"])
    assert status["keysNotFoundCount"] == 16 and status["keysProduced"] == 1000
    plan = status["plan"]
    assert plan["keyCount"] == 1016 and sum(p["keys"] for p in plan["partitions"]) == 1016
    assert {p["partition"]: p["startOffset"] for p in plan["partitions"]} == {p: before[p] for p in range(4)}
    ranges = {r["partition"]: r for r in status["producedRange"]}
    for partition, offset, _, _ in written:
        assert ranges[partition]["startOffset"] <= offset < ranges[partition]["endOffset"]
    assert sum(r["endOffset"] - r["startOffset"] for r in ranges.values()) == 1000
    assert is_true(done, "Produced") and is_true(done, "Complete")
    job = json.loads(kube.kubectl("get", "job", "users-fix-backfill", "-n", namespace, "-o", "json").stdout)
    assert job["status"].get("succeeded") == 1
    assert job["metadata"]["ownerReferences"][0]["uid"] == done["metadata"]["uid"]


def test_job_source_barrier_waits_for_every_downstream_group(kube, kafka, operator, namespace, topic_name, tmp_path):
    kafka.create_topic(topic_name, 3)
    produce_keyed(kafka.bootstrap, topic_name, [(f"user-{i % 60}", '{"stale": true}') for i in range(300)])
    for group in ("billing", "search"):
        consume_to_end(kafka.bootstrap, group, topic_name, 3)
    template = upstream_template(entities(tmp_path / "users.db", 50), kafka.bootstrap)
    keys = [f"user-{i}" for i in range(50)] + ["user-missing-1", "user-missing-2"]
    apply(
        kube,
        namespace,
        backfill(
            "users-recalc",
            kafka.bootstrap,
            topic_name,
            {"job": {"template": template}},
            keys=keys,
            downstreamGroups=["billing", "search"],
            approval="Manual",
        ),
    )

    # Manual approval: the plan (keys, partitions, groups) is shown and nothing runs until approved.
    planned = wait_status(kube, namespace, "users-recalc", lambda b: phase(b) == "PlanReady", "PlanReady", 60, operator)
    plan = planned["status"]["plan"]
    assert plan["keyCount"] == 52 and plan["downstreamGroups"] == ["billing", "search"]
    assert {p["partition"] for p in plan["partitions"]} == {partition_for(k, 3) for k in keys}
    assert conditions(planned)["Approved"]["reason"] == "AwaitingApproval"
    assert kube.kubectl("get", "job", "users-recalc-backfill", "-n", namespace, check=False).returncode != 0
    kube.kubectl("annotate", "backfill", "users-recalc", "-n", namespace, "reprise.io/approve=true")

    produced = wait_status(kube, namespace, "users-recalc", lambda b: is_true(b, "Produced"), "Produced", 80, operator)
    ranges = produced["status"]["producedRange"]
    assert sum(r["endOffset"] - r["startOffset"] for r in ranges) == 50
    written = read_topic(kafka.bootstrap, topic_name, 3, {r["partition"]: r["startOffset"] for r in ranges})
    assert {k.decode(): json.loads(v) for _, _, k, v in written} == {
        f"user-{i}": {"user": i, "fixed": True} for i in range(50)
    }
    pod_env = json.loads(kube.kubectl("get", "job", "users-recalc-backfill", "-n", namespace, "-o", "json").stdout)
    env = {e["name"]: e.get("value") for e in pod_env["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REPRISE_KEYS"] == ",".join(keys) and env["REPRISE_KEYS_FILE"] == "/etc/reprise/keys/keys.txt"

    # billing catches up; search is held back: the barrier must not pass.
    consume_to_end(kafka.bootstrap, "billing", topic_name, 3)

    def billing_passed(body: dict) -> bool:
        rows = ((body.get("status") or {}).get("barrier") or {}).get("partitions") or []
        return bool(rows) and all(r["remaining"] == 0 for r in rows if r["group"] == "billing")

    held = wait_status(kube, namespace, "users-recalc", billing_passed, "billing past the barrier", 60, operator)
    assert phase(held) == "Draining" and not is_true(held, "Complete")
    barrier = held["status"]["barrier"]
    assert barrier["groupsPassed"] == 1 and barrier["groupsTotal"] == 2
    search_rows = [r for r in barrier["partitions"] if r["group"] == "search"]
    assert {r["partition"] for r in search_rows} == {r["partition"] for r in ranges}
    assert sum(r["remaining"] for r in search_rows) == 50 == barrier["remaining"]
    assert all(
        r["targetOffset"] == next(x["endOffset"] for x in ranges if x["partition"] == r["partition"])
        for r in search_rows
    )

    consume_to_end(kafka.bootstrap, "search", topic_name, 3)
    done = wait_status(kube, namespace, "users-recalc", lambda b: phase(b) == "Complete", "Complete", 60, operator)
    assert is_true(done, "Drained") and done["status"]["barrier"]["groupsPassed"] == 2
    assert done["status"]["barrier"]["remaining"] == 0


def test_debezium_source_sends_the_exact_signal_and_follows_notifications(kube, kafka, operator, namespace, topic_name):
    table, signals, notifications = topic_name, f"{topic_name}-signal", f"{topic_name}-notify"
    kafka.create_topic(table, 2)
    kafka.create_topic(signals, 1)
    kafka.create_topic(notifications, 1)
    keys = ["1017", "2044", "O'Brien"]
    source = {
        "debezium": {
            "signalTopic": signals,
            "topicPrefix": "crm",
            "dataCollection": "public.customers",
            "keyColumn": "id",
            "notificationTopic": notifications,
        }
    }
    rows = {k: json.dumps({"after": {"id": k, "status": "fixed"}, "op": "r"}) for k in keys}
    with FakeConnector(kafka.bootstrap, "crm", signals, table, notifications, rows) as connector:
        apply(kube, namespace, backfill("customers-resnapshot", kafka.bootstrap, table, source, keys=keys))
        running = wait_status(
            kube,
            namespace,
            "customers-resnapshot",
            lambda b: ((b.get("status") or {}).get("signal") or {}).get("lastNotification") == "IN_PROGRESS",
            "the IN_PROGRESS notification",
            60,
            operator,
        )
        assert connector.error is None
        # The signal, exactly as Debezium's Kafka signal channel reads it.
        key, value, headers = connector.signal
        expected = execute_snapshot(signal_id(running["metadata"]["uid"]), "crm", "public.customers", "id", keys)
        assert key == b"crm"
        assert value == expected.value
        assert json.loads(value)["data"]["additional-conditions"] == [
            {"data-collection": "public.customers", "filter": "id IN ('1017','2044','O''Brien')"}
        ]
        assert dict(headers)["reprise.io/backfill"] == f"{namespace}/customers-resnapshot".encode()
        # Rows are already in the table topic, but the snapshot is not COMPLETED: not produced, not complete.
        assert phase(running) == "Running" and not is_true(running, "Produced")
        assert running["status"]["signal"]["id"] == signal_id(running["metadata"]["uid"])

        # Suspend pauses the connector's snapshot; resuming resumes it (signals on the same topic).
        kube.kubectl(
            "patch",
            "backfill",
            "customers-resnapshot",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":true}}',
        )
        wait_status(
            kube, namespace, "customers-resnapshot", lambda b: phase(b) == "Suspended", "Suspended", 30, operator
        )
        kube.kubectl(
            "patch",
            "backfill",
            "customers-resnapshot",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":false}}',
        )
        wait_status(
            kube, namespace, "customers-resnapshot", lambda b: phase(b) == "Running", "Running again", 30, operator
        )
        controls = [json.loads(v)["type"] for _, _, k, v in read_topic(kafka.bootstrap, signals, 1) if k == b"crm"]
        assert controls == ["execute-snapshot", "pause-snapshot", "resume-snapshot"]

        connector.finish.set()
        done = wait_status(
            kube, namespace, "customers-resnapshot", lambda b: phase(b) == "Complete", "Complete", 60, operator
        )
    assert connector.error is None and connector.notified == [
        "STARTED",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
    ]
    status = done["status"]
    assert status["signal"]["lastNotification"] == "COMPLETED" and status["keysProduced"] == 3
    assert status["keysNotFoundCount"] == 0
    assert sum(r["endOffset"] - r["startOffset"] for r in status["producedRange"]) == 3
    assert is_true(done, "Produced")
    # Exactly one snapshot was asked for, whatever the number of reconciles.
    sent = [json.loads(v)["type"] for _, _, k, v in read_topic(kafka.bootstrap, signals, 1) if k == b"crm"]
    assert sent.count("execute-snapshot") == 1


def test_stalled_downstream_group_is_reported_with_partition_and_offset(kube, kafka, operator, namespace, topic_name):
    source, target = f"{topic_name}-state", topic_name
    kafka.create_topic(source, 1)
    kafka.create_topic(target, 2)
    keys = [f"order-{i}" for i in range(20)]
    produce_keyed(kafka.bootstrap, source, [(k, json.dumps({"order": k})) for k in keys])
    produce_keyed(kafka.bootstrap, target, [(f"order-{i}", "{}") for i in range(100)])
    # The downstream service is stuck on offset 10 of each partition (seed 000's blocked partition).
    commit(kafka.bootstrap, "fulfilment", target, {0: 10, 1: 10})
    apply(
        kube,
        namespace,
        backfill(
            "orders-fix",
            kafka.bootstrap,
            target,
            {"topic": {"name": source}},
            keys=keys,
            downstreamGroups=["fulfilment"],
            barrier={"stalledAfter": "3s"},
        ),
    )

    stalled = wait_status(kube, namespace, "orders-fix", lambda b: is_true(b, "Stalled"), "Stalled", 80, operator)
    condition = conditions(stalled)["Stalled"]
    assert condition["reason"] == "GroupStalled"
    assert "group fulfilment" in condition["message"]
    assert (
        f"{target} partition 0 at offset 10" in condition["message"]
        or f"{target} partition 1 at offset 10" in condition["message"]
    )
    rows = stalled["status"]["barrier"]["partitions"]
    assert all(r["committedOffset"] == 10 and r["remaining"] > 0 and r.get("stalledSince") for r in rows)
    assert phase(stalled) == "Draining"
    events = json.loads(kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    assert any(e.get("reason") == "Stalled" and "offset 10" in e.get("message", "") for e in events)

    consume_to_end(kafka.bootstrap, "fulfilment", target, 2)
    done = wait_status(kube, namespace, "orders-fix", lambda b: phase(b) == "Complete", "Complete", 60, operator)
    assert conditions(done)["Stalled"]["status"] == "False"
    assert done["status"]["barrier"]["groupsPassed"] == 1

    # ttlSecondsAfterFinished deletes the finished Backfill; its Job and keys ConfigMap go with it.
    kube.kubectl(
        "patch",
        "backfill",
        "orders-fix",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"cleanup":{"ttlSecondsAfterFinished":1}}}',
    )
    wait_for(
        lambda: kube.kubectl("get", "backfill", "orders-fix", "-n", namespace, check=False).returncode != 0,
        30,
        "the TTL to delete the Backfill",
    )
    wait_for(lambda: not jobs_of(kube, namespace, "orders-fix"), 30, "the garbage collector to delete the Job")


def test_operator_killed_mid_backfill_adopts_the_job_and_keeps_the_exact_range(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, 3)
    produce_keyed(kafka.bootstrap, topic_name, [(f"user-{i}", "{}") for i in range(90)])
    consume_to_end(kafka.bootstrap, "billing", topic_name, 3)
    template = upstream_template(entities(tmp_path / "users.db", 30), kafka.bootstrap, rate=10)
    apply(
        kube,
        namespace,
        backfill(
            "restarts",
            kafka.bootstrap,
            topic_name,
            {"job": {"template": template}},
            keys=[f"user-{i}" for i in range(30)],
            downstreamGroups=["billing"],
        ),
    )
    wait_status(
        kube,
        namespace,
        "restarts",
        lambda b: phase(b) == "Running" and jobs_of(kube, namespace, "restarts"),
        "the Job to run",
        60,
        operator,
    )
    operator.kill()  # mid-production: the end offsets before it are recorded, the Job exists
    operator.start()
    produced = wait_status(kube, namespace, "restarts", lambda b: phase(b) == "Draining", "Draining", 60, operator)
    operator.kill()  # mid-barrier
    consume_to_end(kafka.bootstrap, "billing", topic_name, 3)
    operator.start()
    done = wait_status(kube, namespace, "restarts", lambda b: phase(b) == "Complete", "Complete", 60, operator)
    assert done["status"]["producedRange"] == produced["status"]["producedRange"]
    assert sum(r["endOffset"] - r["startOffset"] for r in done["status"]["producedRange"]) == 30
    (job,) = jobs_of(kube, namespace, "restarts")
    assert job["status"].get("succeeded") == 1 and not job["status"].get("failed")
    assert len(pods_of(kube, namespace, "restarts")) == 1, "the upstream command ran once"
    assert {"PlanReady", "Approved", "Produced", "Drained", "Complete"} <= {
        t for t, c in conditions(done).items() if c["status"] == "True"
    }


def test_suspend_holds_the_job_and_deleting_mid_flight_leaves_nothing(
    kube, kafka, operator, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, 2)
    template = upstream_template(entities(tmp_path / "users.db", 200), kafka.bootstrap, rate=5)
    apply(
        kube,
        namespace,
        backfill(
            "held",
            kafka.bootstrap,
            topic_name,
            {"job": {"template": template}},
            keys=[f"user-{i}" for i in range(200)],
            downstreamGroups=["billing"],
        ),
    )
    wait_status(
        kube,
        namespace,
        "held",
        lambda b: phase(b) == "Running" and pods_of(kube, namespace, "held"),
        "the Job's pod",
        60,
        operator,
    )
    kube.kubectl("patch", "backfill", "held", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    suspended = wait_status(kube, namespace, "held", lambda b: phase(b) == "Suspended", "Suspended", 30, operator)
    assert conditions(suspended)["Suspended"]["status"] == "True"
    (job,) = jobs_of(kube, namespace, "held")
    assert job["spec"]["suspend"] is True
    wait_for(lambda: not pods_of(kube, namespace, "held"), 30, "the suspended Job's pod to stop")
    kube.kubectl("patch", "backfill", "held", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    wait_status(kube, namespace, "held", lambda b: phase(b) == "Running", "Running again", 30, operator)
    assert jobs_of(kube, namespace, "held")[0]["spec"]["suspend"] is False
    wait_for(lambda: pods_of(kube, namespace, "held"), 30, "the resumed Job's pod")

    kube.kubectl("delete", "backfill", "held", "-n", namespace, "--timeout=60s")
    assert jobs_of(kube, namespace, "held") == [] and pods_of(kube, namespace, "held") == []
    assert kube.kubectl("get", "configmap", "held-keys", "-n", namespace, check=False).returncode != 0
