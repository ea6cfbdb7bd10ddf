"""`make demo`: a Handover Reconsume end to end on the platform `make run` started.

It creates a `users` topic with a few hundred thousand records, starts the accounts service
(`examples/accounts_service`: a live consumer with the handover guard, writing to a SQLite ledger) as a
Deployment, applies `examples/reconsume-handover.yaml` (its Kafka address as it is, its replay consumers
calling the same service's handler), keeps producing live traffic, and shows the replay's progress until it
is Complete and torn down. Last, it reads the ledger and holds it to what Reprise guarantees (exactly_once.py):
from each partition's first skipped record on, no record applied by both groups and none lost; records the same
group was given again (a commit refused in a rebalance) are counted apart, with their cause.
"""

from __future__ import annotations

import json
import random
import threading
import time

from examples.accounts_service.store import AccountsStore

from . import containers
from .cluster import (
    REPO,
    WORKDIR,
    Cluster,
    check,
    committed,
    create_topic,
    end_offsets,
    example,
    follow,
    produce,
    run,
    say,
    wait_caught_up,
)
from .exactly_once import PartitionLedger
from .exactly_once import check as check_ledger

NAMESPACE = "accounts"
TOPIC = "users"
PARTITIONS = 6
HISTORY = 300_000
LIVE_GROUP = "accounts-service"
EVENTS = [b"UserCreated", b"UserUpdated", b"UserLoggedIn"]
#: The accounts service's SQLite file, shared by its live replicas and the replay consumers: local processes on the
#: node agent; on the real node, containers that mount its folder from the host (containers.py).
DB = WORKDIR / "accounts" / "accounts.sqlite"
IMAGE = "reprise-demo/accounts:dev"


def user_events(first: int, count: int):
    for n in range(first, first + count):
        value = json.dumps({"user": f"u-{n % 50_000}", "n": n, "locale": random.choice(["et", "de", "en", "fr"])})
        yield f"u-{n % 50_000}".encode(), value.encode(), [("event-type", EVENTS[n % 3])], None


def main(cluster: Cluster) -> bool:
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    DB.parent.mkdir(parents=True, exist_ok=True)
    if create_topic(cluster, TOPIC, PARTITIONS):
        for stale in DB.parent.glob(f"{DB.name}*"):  # a ledger of an earlier platform's topic
            stale.unlink()
    if cluster.real_node:
        containers.service_image(
            cluster.state, IMAGE, REPO / "examples" / "accounts_service" / "Dockerfile", REPO / "examples"
        )
        containers.shared_folder(DB.parent)
    if sum(end_offsets(cluster.bootstrap, TOPIC, PARTITIONS).values()) < HISTORY:  # new, or made by demo-backfill
        say(f"producing {HISTORY:,} user events into {TOPIC} ({PARTITIONS} partitions) ...")
        produce(cluster.bootstrap, TOPIC, user_events(0, HISTORY))
    cluster.secret(NAMESPACE, "accounts-kafka-client", {"client.rack": "demo"})
    service = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "accounts-consumer"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "accounts"}},
            "template": {
                "metadata": {"labels": {"app": "accounts"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": IMAGE,
                            "command": [
                                "python",
                                "-m",
                                "examples.accounts_service",
                                "--bootstrap-servers",
                                cluster.pod_bootstrap,
                                "--group",
                                LIVE_GROUP,
                                "--topic",
                                TOPIC,
                                "--db",
                                str(DB),
                            ],
                            "env": [
                                {
                                    "name": "POD_NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                # The guard's handover topic: this namespace's, where the operator puts the replay.
                                {"name": "REPRISE_HANDOVER_TOPIC", "value": "reprise.handover.$(POD_NAMESPACE)"},
                            ],
                        }
                    ]
                },
            },
        },
    }
    if cluster.real_node:
        template = service["spec"]["template"]
        template["spec"] = containers.on_node(template["spec"], DB.parent)
    cluster.apply(NAMESPACE, service)
    say("the accounts service (2 replicas, with the handover guard) is catching up on the topic ...")
    wait_caught_up(cluster.bootstrap, LIVE_GROUP, {TOPIC: PARTITIONS}, "live group")
    # Everything below this was the live group's history before the replay: the check starts here.
    since = committed(cluster.bootstrap, LIVE_GROUP, TOPIC, PARTITIONS)

    stop = threading.Event()

    def live_traffic() -> None:
        n = HISTORY * 10
        while not stop.wait(0.5):
            produce(cluster.bootstrap, TOPIC, user_events(n, 100))
            n += 100

    threading.Thread(target=live_traffic, daemon=True).start()
    replay = example("reconsume-handover")
    # This run's replay writes the ledger under a name of its own: an earlier run's replay rows are not its.
    replay_by = f"replay-{int(time.time())}"
    replay["spec"]["consumer"]["env"] = [
        {"name": "REPRISE_HANDLER", "value": "examples.accounts_service.handlers:apply_batch"},
        {"name": "ACCOUNTS_DB", "value": str(DB)},
        {"name": "ACCOUNTS_APPLIED_BY", "value": replay_by},
    ]
    replay["spec"]["completion"]["drainedFor"] = "5s"
    replay["spec"]["cleanup"]["ttlSecondsAfterFinished"] = 600
    # An earlier run's Reconsume (kept 600 s after it finished) would be Complete already: start a new one.
    cluster.fresh(NAMESPACE, "reconsume", replay["metadata"]["name"])
    cluster.apply(NAMESPACE, replay)
    name = replay["metadata"]["name"]
    say(
        f"applied Reconsume {name} (mode Handover); following it (kubectl get replays -n {NAMESPACE} -w shows the same)"
    )

    def describe(status: dict) -> str:
        progress = status.get("progress") or {}
        handed = sum(1 for p in progress.get("partitions") or [] if p.get("state") == "HandedOver")
        return (
            f"progress {progress.get('percent', 0):>3}%  lag {progress.get('lag', '-'):>7}  "
            f"ETA {progress.get('eta', '-'):>6}  handed over {handed}/{PARTITIONS}"
        )

    try:
        status = follow(cluster, NAMESPACE, "reconsume", name, describe)["status"]
    finally:
        stop.set()
    say("live traffic stopped; the accounts service takes the last of it ...")
    wait_caught_up(cluster.bootstrap, LIVE_GROUP, {TOPIC: PARTITIONS}, "live group")
    children = cluster.kubectl("get", "deployments", "-n", NAMESPACE, "-l", f"reprise.io/replay={name}", "-o", "name")
    say(
        f"{status.get('phase')}: standby Deployment {'still there' if children.strip() else 'deleted'}; "
        f"replay group and handover records removed by the operator"
    )
    exact = ledger_check(status, since, end_offsets(cluster.bootstrap, TOPIC, PARTITIONS), replay_by)
    return status.get("phase") == "Complete" and exact


def ledger_check(status: dict, since: dict[int, int], ends: dict[int, int], replay_by: str) -> bool:
    """The ledger held to Reprise's guarantee (exactly_once.py), from the live group's offsets at the start."""
    handover = {
        p["partition"]: p.get("handoverOffset")
        for p in (status.get("progress") or {}).get("partitions") or []
        if p.get("topic") == TOPIC
    }
    store = AccountsStore(str(DB))
    try:
        rows = store.rows(TOPIC)
        failures = store.commit_failures().get(LIVE_GROUP, [])
    finally:
        store.close()
    partitions = {}
    for p in range(PARTITIONS):
        mine = [r for r in rows if r.partition == p and r.applied_by in (LIVE_GROUP, replay_by)]
        partitions[p] = PartitionLedger(
            live={r.offset: r.applied for r in mine if r.applied_by == LIVE_GROUP},
            replay={r.offset: r.applied for r in mine if r.applied_by == replay_by},
            since=since.get(p, 0),
            end=ends[p],
            handover=handover.get(p),
            redelivered=sum(r.redelivered for r in mine if r.offset >= since.get(p, 0)),
        )
    verdict = check_ledger(partitions)
    cause = (
        f"the live group's commit failed {len(failures)} times while it rebalanced "
        f"({', '.join(sorted(set(failures)))}) and the new owner read from the last commit"
        if failures
        else "a process stopped before it committed, and the new owner read from the last commit"
    )
    for line in verdict.lines(cause):
        say(line)
    return check(
        verdict.ok,
        "from the first skipped offsets on, no record applied by both groups and none lost",
        "the handover was not exact (see the ledger line above)",
    )


if __name__ == "__main__":
    run(main)
