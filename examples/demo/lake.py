"""`make demo-lake`: a LakeReplay from a generated Parquet lake, through the backfill topic, then on to the live
topic with `then.reconsume`, and the seam between the two checked to be exact.

It generates a lake once (`spark_app.lakegen`: 12,000 events of 100 users over 6 days of January 2024,
partitioned by day, written under three schema versions), puts the last two days on the live topic `events`
(with their event times, as the upstream wrote them) and runs the events service (`events_ledger`, with the
handover guard) on it. It applies `examples/lakereplay-then-reconsume.yaml` with the fields that name the
user's lake, topics and service changed to the demo's (the demo prints them), shows the plan at PlanReady and
approves it, and follows Spark, the drain and the continuation until Complete. Then it checks from the ledger:
every lake event from `from` to the seam (`to`, inside the third schema version; the range spans all three) was
applied once, from the backfill topic; the continuation started on each live partition at exactly the first
offset at or after the seam; no event came from both sides, and every live record from the seam on was applied.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime, timezone

from local_platform.spark_jvm import short_job_options
from spark_app.lakegen import LATEST_SCHEMA, LakeSpec, expected_records

from .cluster import (
    WORKDIR,
    Cluster,
    approve_at_plan_ready,
    check,
    create_topic,
    example,
    follow,
    produce,
    run,
    say,
    wait_caught_up,
)
from .events_ledger import EventLedger

NAMESPACE = "lake"
LAKE = LakeSpec(rows=12_000, days=6, keys=100)
LAKE_DIR = WORKDIR / "lake"
LIVE_TOPIC, LIVE_GROUP, PARTITIONS = "events", "events-service", 3
START, SEAM = datetime(2024, 1, 2, tzinfo=timezone.utc), datetime(2024, 1, 5, 12, tzinfo=timezone.utc)
KEPT_FROM, LIVE_END = datetime(2024, 1, 5, tzinfo=timezone.utc), datetime(2024, 1, 7, tzinfo=timezone.utc)
LEDGER = WORKDIR / "events-ledger.sqlite"


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_lake() -> str:
    uri = f"file://{LAKE_DIR}/events"
    done = LAKE_DIR / f"rows-{LAKE.rows}-days-{LAKE.days}-keys-{LAKE.keys}.done"
    if done.exists():
        say(f"the lake {uri} is there from an earlier run")
        return uri
    subprocess.run(["rm", "-rf", str(LAKE_DIR)], check=True)
    LAKE_DIR.mkdir(parents=True)
    say(f"generating the lake {uri} with Spark ({LAKE.rows:,} events, {LAKE.days} days, 3 schema versions) ...")
    log = LAKE_DIR / "lakegen.log"
    # The short-job JVM options the platform's Spark runs use (C1, the class-data archive): half the CPU.
    env = {**os.environ, "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS") or short_job_options()}
    with open(log, "wb") as out:
        code = subprocess.run(
            [
                sys.executable,
                "-m",
                "spark_app.lakegen",
                "--rows",
                str(LAKE.rows),
                "--days",
                str(LAKE.days),
                "--keys",
                str(LAKE.keys),
                "--out",
                uri,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        ).returncode
    if code != 0:
        raise SystemExit(f"demo: the lake generator failed ({code}); see {log}")
    done.touch()
    return uri


def live_events() -> list[dict]:
    return [r for _, r in expected_records(LAKE, KEPT_FROM, LIVE_END)]


def events_service(cluster: Cluster) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": LIVE_GROUP},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": LIVE_GROUP}},
            "template": {
                "metadata": {"labels": {"app": LIVE_GROUP}},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "app",
                            "image": "reprise-demo/events:dev",
                            "command": [
                                "python",
                                "-m",
                                "examples.demo.events_ledger",
                                "--bootstrap-servers",
                                cluster.bootstrap,
                                "--group",
                                LIVE_GROUP,
                                "--topic",
                                LIVE_TOPIC,
                            ],
                            "env": [
                                {"name": "EVENTS_LEDGER", "value": str(LEDGER)},
                                {
                                    "name": "POD_NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                # The guard's handover topic: this namespace's, where the operator puts the replay.
                                {"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover.$(POD_NAMESPACE)"},
                            ],
                        }
                    ],
                },
            },
        },
    }


def the_replay(lake_uri: str) -> tuple[dict, list[str]]:
    """The example, with the fields that name the user's lake, topics and service set to the demo's."""
    replay = example("lakereplay-then-reconsume")
    spec = replay["spec"]
    edits = {
        "source.uri": lake_uri,
        "source.timestampColumn": "ts",
        "source.keyColumn": "user_id",
        "source.partitionColumn": "dt",
        "source.from": rfc3339(START),
        "source.to": rfc3339(SEAM),
        "backfillTopic.partitions": PARTITIONS,
        "spark.executor.instances": 1,
        "consumer.deploymentRef.name": LIVE_GROUP,
        "consumer.replicas": 1,
        "consumer.env": [{"name": "REPRISE_HANDLER", "value": "examples.demo.events_ledger:record"}],
        "completion": {"drainedFor": "5s"},
        "then.reconsume.topics": [LIVE_TOPIC],
        "then.reconsume.consumerGroup": LIVE_GROUP,
        "then.reconsume.completion": {"drainedFor": "5s"},
    }
    for path, value in edits.items():
        *parents, leaf = path.split(".")
        node = spec
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    spec["then"]["reconsume"].pop("filter", None)  # the lake's events carry no event-type header
    return replay, [*edits, "then.reconsume.filter (removed)"]


def first_offsets_at_or_after(cluster: Cluster, moment: datetime) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reprise-demo-seam"})
    try:
        ms = int(moment.timestamp() * 1000)
        found = reader.offsets_for_times([TopicPartition(LIVE_TOPIC, p, ms) for p in range(PARTITIONS)], timeout=30)
        ends = {
            p: reader.get_watermark_offsets(TopicPartition(LIVE_TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)
        }
        return {tp.partition: tp.offset if tp.offset >= 0 else ends[tp.partition] for tp in found}
    finally:
        reader.close()


def main(cluster: Cluster) -> bool:
    replay, edited = the_replay(generate_lake())
    name = replay["metadata"]["name"]
    cluster.fresh(NAMESPACE, "lakereplay", name)
    cluster.kubectl("delete", "deployment", LIVE_GROUP, "-n", NAMESPACE, "--ignore-not-found", "--wait=true")
    admin = cluster.admin()  # kept referenced until the futures are done
    if LIVE_TOPIC in admin.list_topics(timeout=10).topics:
        admin.delete_topics([LIVE_TOPIC])[LIVE_TOPIC].result()
    for outcome in admin.delete_consumer_groups([LIVE_GROUP], request_timeout=30).values():
        try:
            outcome.result(timeout=60)
        except Exception:  # no such group yet
            pass
    LEDGER.unlink(missing_ok=True)
    while not create_topic(cluster, LIVE_TOPIC, PARTITIONS, {"retention.ms": "-1"}):  # the deletion settles
        threading.Event().wait(1)
    live = live_events()
    produce(
        cluster.bootstrap,
        LIVE_TOPIC,
        (
            (
                e["user_id"].encode(),
                json.dumps({**e, "ts": e["ts"].isoformat()}).encode(),
                [],
                int(e["ts"].timestamp() * 1000),
            )
            for e in sorted(live, key=lambda e: (e["ts"], e["event_id"]))
        ),
    )
    say(
        f"the live topic {LIVE_TOPIC} holds {len(live):,} events from {rfc3339(KEPT_FROM)} on (half a day before the seam)"
    )
    cluster.secret(NAMESPACE, replay["spec"]["kafka"]["configFrom"]["secretRef"]["name"], {"client.rack": "demo"})
    schema = replay["spec"]["source"]["schema"]["configMapRef"]
    cluster.apply(
        NAMESPACE,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": schema["name"]},
            "data": {schema["key"]: json.dumps(LATEST_SCHEMA)},
        },
    )
    cluster.apply(NAMESPACE, events_service(cluster))
    say(f"the events service (group {LIVE_GROUP}, with the handover guard) is reading {LIVE_TOPIC} ...")
    wait_caught_up(cluster.bootstrap, LIVE_GROUP, {LIVE_TOPIC: PARTITIONS}, "events service")

    cluster.apply(NAMESPACE, replay)
    say(
        f"applied examples/lakereplay-then-reconsume.yaml in namespace {NAMESPACE}, with the demo's {', '.join(edited)}"
    )

    def describe(status: dict) -> str:
        spark, progress = status.get("spark") or {}, status.get("progress") or {}
        cont = status.get("continuation") or {}
        return (
            f"spark {spark.get('state', '-'):<10} written {spark.get('recordsWritten', '-'):>6}  drain lag "
            f"{progress.get('lag', '-'):>6}  continuation {cont.get('phase', '-')}"
        )

    body = follow(
        cluster,
        NAMESPACE,
        "lakereplay",
        name,
        describe,
        approve_at_plan_ready(cluster, NAMESPACE, "lakereplay", name),
        interval=3,
    )
    status = body["status"]
    ok = check(
        status["phase"] == "Complete",
        "the LakeReplay and its continuation are Complete",
        f"the LakeReplay ended {status['phase']}",
    )
    return ok & seam_check(cluster, status, live)


def seam_check(cluster: Cluster, status: dict, live: list[dict]) -> bool:
    backfill = (status.get("children") or {}).get("backfillTopic")
    ledger = EventLedger(str(LEDGER))
    try:
        rows = ledger.rows()
    finally:
        ledger.close()
    from_lake = [r for r in rows if r[1] == backfill and r[4] == "replay"]
    expected = {r["event_id"]: n for n, r in expected_records(LAKE, START, SEAM)}
    lake_ids = [r[0] for r in from_lake]
    ok = check(
        sorted(lake_ids) == sorted(expected),
        f"the lake side: all {len(expected):,} events from {rfc3339(START)} to the seam applied once, "
        f"from schema versions {sorted({LAKE.version_of(n) for n in expected.values()})}",
        f"the lake side: {len(set(expected) - set(lake_ids))} missing, "
        f"{len(lake_ids) - len(set(lake_ids))} twice, {len(set(lake_ids) - set(expected))} unexpected",
    )
    starts = {o["partition"]: o["offset"] for o in (status.get("continuation") or {}).get("startOffsets") or []}
    firsts = first_offsets_at_or_after(cluster, SEAM)
    say(
        "  seam per partition (continuation start / first offset at or after the seam): "
        + ", ".join(f"{LIVE_TOPIC}[{p}] {starts.get(p)}/{firsts[p]}" for p in sorted(firsts))
    )
    ok &= check(
        starts == firsts,
        "the continuation started at exactly the seam on every partition",
        f"the continuation started at {starts}, the seam is at {firsts}",
    )
    from_kafka = [r for r in rows if r[1] == LIVE_TOPIC and r[4] == "replay"]
    ok &= check(
        not {r[0] for r in from_kafka} & set(lake_ids) and all(r[3] >= starts.get(r[2], 0) for r in from_kafka),
        f"no event came from both sides; the continuation replayed {len(from_kafka):,} records, none before the seam",
        "an event came from both sides, or the continuation replayed records before the seam",
    )
    after_seam = {e["event_id"] for e in live if e["ts"] >= SEAM}
    applied = {r[0] for r in rows if r[1] == LIVE_TOPIC}
    ok &= check(
        after_seam <= applied,
        f"all {len(after_seam):,} live events from the seam on were applied",
        f"{len(after_seam - applied)} live events from the seam on were never applied",
    )
    return ok


if __name__ == "__main__":
    run(main)
