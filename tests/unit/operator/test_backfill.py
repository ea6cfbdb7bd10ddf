"""Backfill's pure parts: the partitioner, keys, the plan, the Jobs it runs, the worker's result."""

from datetime import datetime, timedelta, timezone

import pytest
from reprise_operator.api import BackfillSpec, OffsetRange
from reprise_operator.kinds.backfill.keys_file import (
    KEYS_ENV_LIMIT,
    KEYS_PATH,
    check_file_keys,
    keys_env,
    keys_from_text,
    murmur2,
    partition_for,
)
from reprise_operator.kinds.backfill.rules import (
    QuietClock,
    keys_configmap,
    plan_status,
    plan_summary,
    quiet_period,
    ranges_from_status,
    ranges_status,
    upstream_job,
    worker_job,
    worker_outcome,
)
from reprise_operator.rules.job_state import job_state
from reprise_operator.rules.workloads import Owner

from replay_worker.settings import WorkerSettings

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
OWNER = Owner("reprise.io/v1alpha1", "Backfill", "fix-users", "0b1c2d3e-aaaa")


@pytest.mark.parametrize(
    "data, expected",
    [
        # Kafka's own test vectors (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafkas_test_vectors(data, expected):
    assert murmur2(data) == expected


def test_partition_is_positive_hash_modulo_partitions():
    assert partition_for("21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    assert {partition_for(f"user-{i}", 4) for i in range(200)} == {0, 1, 2, 3}


def test_keys_file_text():
    assert keys_from_text("u-1\n\n  u-2  \r\nu-1\n") == ["u-1", "u-2"]


@pytest.mark.parametrize("key", ["a\nb", " padded", "trailing\t"])
def test_keys_a_file_cannot_carry_are_refused(key):
    with pytest.raises(ValueError, match="line break or surrounding whitespace"):
        check_file_keys(["ok", key])


def test_too_many_key_bytes_are_refused():
    with pytest.raises(ValueError, match="ConfigMap"):
        check_file_keys(["k" * 1000 + str(i) for i in range(1100)])


def test_plan_counts_keys_per_partition_with_the_partitioner():
    keys = [f"user-{i}" for i in range(100)]
    plan = plan_status(keys, 3, ["billing"], T0)
    assert plan["keyCount"] == 100 and plan["downstreamGroups"] == ["billing"]
    assert sum(p["keys"] for p in plan["partitions"]) == 100
    for part in plan["partitions"]:
        assert part["keys"] == sum(1 for k in keys if partition_for(k, 3) == part["partition"])
    assert plan_summary(plan, "users", "topic") == "100 keys to 3 partitions of users; waits for billing"


def test_debezium_plan_has_no_partitions():
    plan = plan_status(["1", "2"], None, [], T0)
    assert plan["partitions"] == []
    assert "connector's key format" in plan_summary(plan, "crm.public.customers", "debezium")


def test_keys_configmap_is_owned_and_one_key_per_line():
    cm = keys_configmap(OWNER, "shop", ["u-1", "u-2"])
    assert cm["metadata"]["name"] == "fix-users-keys"
    assert cm["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    assert cm["data"] == {"keys.txt": "u-1\nu-2\n"}


def test_keys_env_has_file_keys_and_topic():
    env = {e["name"]: e["value"] for e in keys_env(["a", "b"], "users")}
    assert env == {
        "REPRISE_KEYS_FILE": KEYS_PATH,
        "REPRISE_KEYS": "a,b",
        "REPRISE_KEY_COUNT": "2",
        "REPRISE_TOPIC": "users",
    }


def test_keys_env_leaves_out_keys_that_do_not_fit():
    keys = [f"{i:08d}" for i in range(KEYS_ENV_LIMIT // 8)]
    names = {e["name"] for e in keys_env(keys, "users")}
    assert "REPRISE_KEYS" not in names and "REPRISE_KEYS_FILE" in names


def spec(**source) -> BackfillSpec:
    return BackfillSpec.model_validate(
        {
            "kafka": {"bootstrapServers": "kafka:9092", **source.pop("kafka", {})},
            "topic": "users",
            "keys": ["u-1"],
            "source": source,
        }
    )


def test_worker_job_runs_the_worker_in_role_backfill_with_the_keys_file():
    job = worker_job(
        OWNER, "shop", spec(topic={"name": "users-state"}), "shop/fix-users/0b1c2d3e", "reprise:dev", "reprise.handover"
    )
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "reprise:dev" and container["command"] == ["python", "-m", "replay_worker"]
    env = {e["name"]: e["value"] for e in container["env"]}
    settings = WorkerSettings.from_env(env)
    assert settings.role == "backfill" and settings.topics == ("users-state",) and settings.forward_topic == "users"
    assert settings.filter.keys_file == KEYS_PATH and settings.replay_id == "shop/fix-users/0b1c2d3e"
    assert {"name": "reprise-backfill-keys", "mountPath": "/etc/reprise/keys", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert {
        "name": "reprise-backfill-keys",
        "configMap": {"name": "fix-users-keys", "items": [{"key": "keys.txt", "path": "keys.txt"}]},
    } in pod["volumes"]
    assert pod["restartPolicy"] == "Never"
    assert job["metadata"]["labels"]["reprise.io/kind"] == "backfill"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "Backfill"


def test_worker_job_mounts_the_kafka_secret_when_given():
    s = spec(topic={"name": "users-state"}, kafka={"configFrom": {"secretRef": {"name": "kafka-client"}}})
    job = worker_job(OWNER, "shop", s, "rid", "reprise:dev", "reprise.handover")
    volumes = {v["name"] for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes == {"reprise-kafka-config", "reprise-backfill-keys"}
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REPRISE_KAFKA_CONFIG_DIR"] == "/etc/reprise/kafka"


def test_upstream_job_gets_the_keys_and_keeps_the_users_settings():
    template = {
        "metadata": {"labels": {"app": "orders"}},
        "spec": {
            "containers": [
                {
                    "name": "cli",
                    "image": "orders:1",
                    "command": ["orders-cli", "backfill"],
                    "env": [{"name": "DB_URL", "value": "postgres://db"}, {"name": "REPRISE_KEYS", "value": "stale"}],
                }
            ],
            "restartPolicy": "Always",
        },
    }
    s = spec(job={"template": template, "backoffLimit": 1, "activeDeadlineSeconds": 600})
    job = upstream_job(OWNER, "shop", s, ["u-1", "u-2"])
    assert job["spec"]["backoffLimit"] == 1 and job["spec"]["activeDeadlineSeconds"] == 600
    pod = job["spec"]["template"]
    assert (
        pod["metadata"]["labels"]["app"] == "orders" and pod["metadata"]["labels"]["reprise.io/replay"] == "fix-users"
    )
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["DB_URL"] == "postgres://db" and env["REPRISE_KEYS"] == "u-1,u-2"
    assert env["REPRISE_KEYS_FILE"] == KEYS_PATH and env["REPRISE_TOPIC"] == "users"
    assert container["command"] == ["orders-cli", "backfill"]
    assert any(m["mountPath"] == "/etc/reprise/keys" for m in container["volumeMounts"])


def test_upstream_job_needs_a_container():
    with pytest.raises(ValueError, match="containers"):
        upstream_job(OWNER, "shop", spec(job={"template": {"spec": {"containers": []}}}), ["u-1"])


@pytest.mark.parametrize(
    "job, state",
    [
        (None, "missing"),
        ({"spec": {}, "status": {}}, "running"),
        ({"spec": {"suspend": True}, "status": {}}, "suspended"),
        ({"spec": {}, "status": {"succeeded": 1}}, "succeeded"),
        ({"spec": {}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}, "succeeded"),
        ({"spec": {}, "status": {"active": 1, "failed": 1}}, "running"),
    ],
)
def test_job_state(job, state):
    assert job_state(job)[0] == state


def test_failed_job_says_why():
    job = {
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ]
        }
    }
    assert job_state(job) == ("failed", "BackoffLimitExceeded: Job has reached the specified backoff limit")


def test_worker_outcome_lists_missing_and_deleted_keys_as_not_found():
    result = {
        "produced": 3,
        "missing": ["u-9", "u-8"],
        "deleted": ["u-7"],
        "partitions": {"1": {"first": 5, "last": 6, "count": 2}, "0": {"first": 9, "last": 9, "count": 1}},
    }
    outcome = worker_outcome(result, "users")
    assert outcome.produced == 3 and outcome.deleted == 1
    assert outcome.not_found == ["u-7", "u-8", "u-9"]
    assert [(r.partition, r.start, r.end) for r in outcome.ranges] == [(0, 9, 10), (1, 5, 7)]
    assert ranges_from_status(OffsetRange.model_validate(r) for r in ranges_status(outcome.ranges)) == outcome.ranges


def test_quiet_clock_restarts_on_every_move():
    clock = QuietClock()
    assert clock.observe({0: 5}, T0) == timedelta(0)
    assert clock.observe({0: 5}, T0 + timedelta(seconds=4)) == timedelta(seconds=4)
    assert clock.observe({0: 6}, T0 + timedelta(seconds=5)) == timedelta(0)
    assert quiet_period(5.0) == timedelta(seconds=50) and quiet_period(0.2) == timedelta(seconds=10)
