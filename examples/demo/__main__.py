"""`make demo`: a Handover Reconsume end to end on the platform `make run` started.

It creates a `users` topic with a few hundred thousand records, starts the accounts service
(`examples/accounts_service`: a live consumer with the handover guard, writing to a SQLite ledger) as a
Deployment, applies `examples/reconsume-handover.yaml` (its Kafka address as it is, its replay consumers
calling the same service's handler), keeps producing live traffic, and shows the replay's progress until it
is Complete and torn down. Last, it reads the ledger: every record from each partition's handover offset on
was applied exactly once, by one of the two groups.
"""

from __future__ import annotations

import json
import random
import threading

from examples.accounts_service.store import AccountsStore

from .cluster import WORKDIR, Cluster, create_topic, end_offsets, example, follow, produce, run, say, wait_caught_up

NAMESPACE = "accounts"
TOPIC = "users"
PARTITIONS = 6
HISTORY = 300_000
LIVE_GROUP = "accounts-service"
EVENTS = [b"UserCreated", b"UserUpdated", b"UserLoggedIn"]
#: The accounts service's SQLite file, shared by its live replicas and the replay consumers (all of them run
#: as local processes on the local platform's node agent).
DB = WORKDIR / "accounts.sqlite"


def user_events(first: int, count: int):
    for n in range(first, first + count):
        value = json.dumps({"user": f"u-{n % 50_000}", "n": n, "locale": random.choice(["et", "de", "en", "fr"])})
        yield f"u-{n % 50_000}".encode(), value.encode(), [("event-type", EVENTS[n % 3])], None


def main(cluster: Cluster) -> bool:
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    if create_topic(cluster, TOPIC, PARTITIONS):
        DB.unlink(missing_ok=True)  # a ledger of an earlier platform's topic
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
                            "image": "reprise-demo/accounts:dev",
                            "command": [
                                "python",
                                "-m",
                                "examples.accounts_service",
                                "--bootstrap-servers",
                                cluster.bootstrap,
                                "--group",
                                LIVE_GROUP,
                                "--topic",
                                TOPIC,
                                "--db",
                                str(DB),
                            ],
                        }
                    ]
                },
            },
        },
    }
    cluster.apply(NAMESPACE, service)
    say("the accounts service (2 replicas, with the handover guard) is catching up on the topic ...")
    wait_caught_up(cluster.bootstrap, LIVE_GROUP, {TOPIC: PARTITIONS}, "live group")

    stop = threading.Event()

    def live_traffic() -> None:
        n = HISTORY * 10
        while not stop.wait(0.5):
            produce(cluster.bootstrap, TOPIC, user_events(n, 100))
            n += 100

    threading.Thread(target=live_traffic, daemon=True).start()
    replay = example("reconsume-handover")
    replay["spec"]["consumer"]["env"] = [
        {"name": "REPRISE_HANDLER", "value": "examples.accounts_service.handlers:apply_batch"},
        {"name": "ACCOUNTS_DB", "value": str(DB)},
    ]
    replay["spec"]["completion"]["drainedFor"] = "5s"
    replay["spec"]["cleanup"]["ttlSecondsAfterFinished"] = 600
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
    children = cluster.kubectl("get", "deployments", "-n", NAMESPACE, "-l", f"reprise.io/replay={name}", "-o", "name")
    say(
        f"{status.get('phase')}: standby Deployment {'still there' if children.strip() else 'deleted'}; "
        f"replay group and handover records removed by the operator"
    )
    exact = ledger_check(status)
    return status.get("phase") == "Complete" and exact


def ledger_check(status: dict) -> bool:
    """From each partition's handover offset on, every record the ledger holds was applied exactly once."""
    boundaries = {
        (p["topic"], p["partition"]): p.get("handoverOffset")
        for p in (status.get("progress") or {}).get("partitions") or []
    }
    store = AccountsStore(str(DB))
    try:
        counts = store.applied_counts()
    finally:
        store.close()
    after = {
        key: n for key, n in counts.items() if boundaries.get(key[:2]) is not None and key[2] >= boundaries[key[:2]]
    }
    wrong = sum(1 for n in after.values() if n != 1)
    say(
        f"ledger: {len(counts):,} records applied; {len(after):,} from the handover offsets on, "
        f"{wrong} of them applied other than exactly once"
    )
    return wrong == 0


if __name__ == "__main__":
    run(main)
