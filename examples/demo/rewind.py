"""`make demo-rewind`: a Rewind of a live group, its plan approved, then the rollback from its ConfigMap.

It applies `examples/reconsume-rewind.yaml` (only `completion.drainedFor` shortened to 5s, so the demo is
short): the search indexer lost its index, so its live group re-reads products and product-prices from the
oldest record. The demo runs the indexer (`search_indexer`, a plain consumer) as the Deployment the manifest
names, keeps writing price changes, shows the plan at PlanReady and approves it, follows the rewind until
Complete and checks that every record up to the rewind's end offsets was indexed again. Then it rolls the
group back with the ConfigMap's own `restore.sh` (kafka-consumer-groups --reset-offsets --from-file, run with
the Kafka tools of the local broker) and checks the group's offsets are the snapshot's.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time

from confluent_kafka import KafkaException

from local_platform.kafka_broker import ensure_kafka

from .cluster import (
    WORKDIR,
    Cluster,
    approve_at_plan_ready,
    check,
    committed,
    create_topic,
    example,
    follow,
    produce,
    run,
    say,
    wait_caught_up,
)
from .search_indexer import IndexLedger

NAMESPACE = "search"
PARTITIONS = 3
HISTORY = 20_000
LEDGER = WORKDIR / "search-index.sqlite"


def records(topic: str, first: int, count: int):
    for n in range(first, first + count):
        key = f"product-{n % 1_000}".encode()
        yield key, json.dumps({"product": key.decode(), "n": n, "topic": topic}).encode(), [], None


def indexer(cluster: Cluster, group: str, topics: list[str]) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "search-indexer"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "search-indexer"}},
            "template": {
                "metadata": {"labels": {"app": "search-indexer"}},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "indexer",
                            "image": "reprise-demo/search-indexer:dev",
                            "command": [
                                "python",
                                "-m",
                                "examples.demo.search_indexer",
                                "--bootstrap-servers",
                                cluster.bootstrap,
                                "--group",
                                group,
                                "--topics",
                                ",".join(topics),
                                "--ledger",
                                str(LEDGER),
                            ],
                        }
                    ],
                },
            },
        },
    }


def kafka_consumer_groups() -> str:
    """A `kafka-consumer-groups.sh` of the local broker's Kafka (its jars), for restore.sh to find on PATH."""
    bin_dir = WORKDIR / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "kafka-consumer-groups.sh"
    script.write_text(
        f'#!/bin/sh\nexec java -cp "{ensure_kafka()}/*" '
        'org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(bin_dir)


def main(cluster: Cluster) -> bool:
    rewind = example("reconsume-rewind")
    rewind["spec"]["completion"]["drainedFor"] = "5s"
    name, group, topics = rewind["metadata"]["name"], rewind["spec"]["consumerGroup"], rewind["spec"]["topics"]
    cluster.fresh(NAMESPACE, "reconsume", name)
    cluster.kubectl("delete", "deployment", "search-indexer", "-n", NAMESPACE, "--ignore-not-found", "--wait=true")
    cluster.kubectl("delete", "configmap", f"{name}-rollback", "-n", NAMESPACE, "--ignore-not-found")
    for topic in topics:
        if create_topic(cluster, topic, PARTITIONS):
            produce(cluster.bootstrap, topic, records(topic, 0, HISTORY))
    # A fresh index: no ledger and no offsets of an earlier run (its indexer is gone, so the group is empty).
    LEDGER.unlink(missing_ok=True)
    admin = cluster.admin()  # kept referenced until the futures are done
    for outcome in admin.delete_consumer_groups([group], request_timeout=30).values():
        try:
            outcome.result(timeout=60)
        except KafkaException:  # no such group yet
            pass
    cluster.apply(NAMESPACE, indexer(cluster, group, topics))
    say(f"the search indexer (Deployment search-indexer, group {group}) is indexing {', '.join(topics)} ...")
    wait_caught_up(cluster.bootstrap, group, {t: PARTITIONS for t in topics}, "search indexer")

    stop = threading.Event()

    def price_changes() -> None:
        n = HISTORY * 10
        while not stop.wait(1.0):
            produce(cluster.bootstrap, topics[-1], records(topics[-1], n, 20))
            n += 20

    threading.Thread(target=price_changes, daemon=True).start()
    cluster.apply(NAMESPACE, rewind)
    say(
        f"applied examples/reconsume-rewind.yaml (drainedFor 5s) in namespace {NAMESPACE}: Reconsume {name}, "
        "approval Manual"
    )

    def describe(status: dict) -> str:
        progress = status.get("progress") or {}
        return f"progress {progress.get('percent', 0):>3}%  lag {progress.get('lag', '-'):>6}  ETA {progress.get('eta', '-')}"

    try:
        body = follow(
            cluster,
            NAMESPACE,
            "reconsume",
            name,
            describe,
            approve_at_plan_ready(cluster, NAMESPACE, "reconsume", name),
        )
    finally:
        stop.set()
    status = body["status"]
    ok = check(status["phase"] == "Complete", "the Rewind is Complete", f"the Rewind ended {status['phase']}")
    ends = {
        (p["topic"], p["partition"]): p.get("endOffset") for p in (status.get("plan") or {}).get("partitions") or []
    }
    ledger = IndexLedger(str(LEDGER))
    try:
        times = ledger.times()
    finally:
        ledger.close()
    rollback = status.get("rollback") or {}
    snapshot = {(o["topic"], o["partition"]): o["offset"] for o in rollback.get("offsets") or []}
    # Records the indexer had indexed before the rewind (below the snapshot) were indexed again after it; the
    # ones written between the snapshot and the rewind's end offsets, at least once.
    rewound = {
        (t, p, o): 2 if o < snapshot.get((t, p), 0) else 1 for (t, p), end in ends.items() for o in range(end or 0)
    }
    short = sum(1 for key, least in rewound.items() if times.get(key, 0) < least)
    ok &= check(
        bool(rewound) and short == 0,
        f"all {len(rewound):,} records up to the rewind's end offsets were indexed after the rewind",
        f"{short:,} of {len(rewound):,} records up to the end offsets were not indexed after the rewind",
    )

    configmap = cluster.get(NAMESPACE, "configmap", rollback.get("configMap", f"{name}-rollback")) or {"data": {}}
    say(f"rollback: ConfigMap {rollback.get('configMap')} holds the offsets of {rollback.get('takenAt')}; restore.sh:")
    say(f"    {configmap['data'].get('restore.sh', '').strip()}")
    say("rolling back: scale the indexer to 0, run restore.sh, check the offsets, scale it back")
    cluster.kubectl("scale", "deployment", "search-indexer", "-n", NAMESPACE, "--replicas=0")
    now = {(t, p): o for t in topics for p, o in committed(cluster.bootstrap, group, t, PARTITIONS).items()}
    say(f"  the group is {sum(now.values()) - sum(snapshot.values()):,} records past the snapshot; moving it back")
    folder = WORKDIR / "rollback"
    folder.mkdir(exist_ok=True)
    for key in ("offsets.csv", "restore.sh"):
        (folder / key).write_text(configmap["data"].get(key, ""))
    env = dict(os.environ, PATH=f"{kafka_consumer_groups()}{os.pathsep}{os.environ['PATH']}")
    for _ in range(30):  # until the indexer has left the group: the tool refuses to reset an active one
        done = subprocess.run(["sh", "restore.sh"], cwd=folder, env=env, capture_output=True, text=True)
        if done.returncode == 0 and "inactive" not in done.stdout + done.stderr:
            break
        time.sleep(2)
    restored = {(t, p): o for t in topics for p, o in committed(cluster.bootstrap, group, t, PARTITIONS).items()}
    ok &= check(
        bool(snapshot) and restored == snapshot,
        f"the group is back at the snapshot on all {len(snapshot)} partitions",
        f"after restore.sh the group is at {restored}, the snapshot is {snapshot}\n{done.stdout}{done.stderr}",
    )
    cluster.kubectl("scale", "deployment", "search-indexer", "-n", NAMESPACE, "--replicas=1")
    return ok


if __name__ == "__main__":
    run(main)
