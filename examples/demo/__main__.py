"""`make demo`: a Handover Reconsume end to end on the platform `make run` started.

It creates a `users` topic with a few hundred thousand records, starts the accounts service
(`examples/accounts_service`: a live consumer with the handover guard, writing to a SQLite ledger) as a
Deployment, applies `examples/reconsume-handover.yaml` (pointed at the local broker, its replay consumers
calling the same service's handler), keeps producing live traffic, and shows the replay's progress until it
is Complete and torn down. Last, it reads the ledger: every record from each partition's handover offset on
was applied exactly once, by one of the two groups.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from examples.accounts_service.store import AccountsStore
from local_platform.platform import read_state

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "accounts"
TOPIC = "users"
PARTITIONS = 6
HISTORY = 300_000
LIVE_GROUP = "accounts-service"
EVENTS = [b"UserCreated", b"UserUpdated", b"UserLoggedIn"]
#: The accounts service's SQLite file, shared by its live replicas and the replay consumers (all of them run
#: as local processes on the local platform's node agent).
DB = REPO / ".reprise" / "demo" / "accounts.sqlite"


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


class Cluster:
    def __init__(self, state: dict) -> None:
        self.kubectl_path = state["kubectl"]
        self.kubeconfig = state["kubeconfig"]
        self.bootstrap = state["bootstrap"]

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        proc = subprocess.run([self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args], input=input,
                              capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise SystemExit(f"demo: kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout


def produce(bootstrap: str, count: int, first: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for n in range(first, first + count):
        value = json.dumps({"user": f"u-{n % 50_000}", "n": n, "locale": random.choice(["et", "de", "en", "fr"])})
        while True:
            try:
                producer.produce(TOPIC, key=f"u-{n % 50_000}".encode(), value=value.encode(),
                                 headers=[("event-type", EVENTS[n % 3])])
                break
            except BufferError:  # the local queue is full (a broker still starting): let it drain
                producer.poll(0.1)
        if n % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def lag(bootstrap: str, group: str) -> int:
    admin_ends = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        committed = admin_ends.committed(parts, timeout=30)
        total = 0
        for tp in committed:
            _, high = admin_ends.get_watermark_offsets(TopicPartition(TOPIC, tp.partition), timeout=10)
            total += high - max(tp.offset, 0)
        return total
    finally:
        admin_ends.close()


def main() -> int:
    state = read_state()
    if not state or not state.get("bootstrap"):
        print("reprise: no local platform is running: start `make run` in another shell first", file=sys.stderr)
        return 2
    cluster = Cluster(state)
    say(f"Kafka at {cluster.bootstrap}, kubeconfig {cluster.kubeconfig}")
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    DB.parent.mkdir(parents=True, exist_ok=True)
    if TOPIC not in admin.list_topics(timeout=10).topics:
        DB.unlink(missing_ok=True)  # a ledger of an earlier platform's topic
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result()
        say(f"producing {HISTORY:,} user events into {TOPIC} ({PARTITIONS} partitions) ...")
        produce(cluster.bootstrap, HISTORY)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "accounts-kafka-client"},
              "stringData": {"client.rack": "demo"}}
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(secret))
    service = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "accounts-consumer"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "accounts"}},
                 "template": {"metadata": {"labels": {"app": "accounts"}},
                              "spec": {"containers": [{"name": "app", "image": "reprise-demo/accounts:dev",
                                                       "command": ["python", "-m", "examples.accounts_service",
                                                                   "--bootstrap-servers", cluster.bootstrap,
                                                                   "--group", LIVE_GROUP, "--topic", TOPIC,
                                                                   "--db", str(DB)]}]}}},
    }
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(service))
    say("the accounts service (2 replicas, with the handover guard) is catching up on the topic ...")
    while True:
        try:
            remaining = lag(cluster.bootstrap, LIVE_GROUP)
        except KafkaException as exc:  # the group coordinator is still being elected
            say(f"  waiting for the group coordinator ({exc.args[0].name()})")
            remaining = -1
        if remaining == 0:
            break
        if remaining > 0:
            say(f"  live group lag {remaining:,}")
        time.sleep(3)

    stop = threading.Event()

    def live_traffic() -> None:
        n = HISTORY * 10
        while not stop.wait(0.5):
            produce(cluster.bootstrap, 100, n)
            n += 100

    threading.Thread(target=live_traffic, daemon=True).start()
    replay = yaml.safe_load((REPO / "examples" / "reconsume-handover.yaml").read_text())
    replay["spec"]["kafka"]["bootstrapServers"] = cluster.bootstrap
    replay["spec"]["consumer"]["env"] = [
        {"name": "REPRISE_HANDLER", "value": "examples.accounts_service.handlers:apply_batch"},
        {"name": "ACCOUNTS_DB", "value": str(DB)},
    ]
    replay["spec"]["completion"]["drainedFor"] = "5s"
    replay["spec"]["cleanup"]["ttlSecondsAfterFinished"] = 600
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(replay))
    name = replay["metadata"]["name"]
    say(f"applied Reconsume {name} (mode Handover); following it (kubectl get replays -n {NAMESPACE} -w shows the same)")
    last = None
    try:
        while True:
            body = json.loads(cluster.kubectl("get", "reconsume", name, "-n", NAMESPACE, "-o", "json"))
            status = body.get("status") or {}
            progress = status.get("progress") or {}
            handed = sum(1 for p in progress.get("partitions") or [] if p.get("state") == "HandedOver")
            line = (f"  phase {status.get('phase', '-'):<9} progress {progress.get('percent', 0):>3}%  "
                    f"lag {progress.get('lag', '-'):>7}  ETA {progress.get('eta', '-'):>6}  "
                    f"handed over {handed}/{PARTITIONS}")
            if line != last:
                say(line)
                last = line
            if status.get("phase") in ("Complete", "Failed"):
                break
            time.sleep(2)
    finally:
        stop.set()
    children = cluster.kubectl("get", "deployments", "-n", NAMESPACE, "-l", f"reprise.io/replay={name}", "-o", "name")
    say(f"{status.get('phase')}: standby Deployment {'still there' if children.strip() else 'deleted'}; "
        f"replay group and handover records removed by the operator")
    exact = ledger_check(status)
    return 0 if status.get("phase") == "Complete" and exact else 1


def ledger_check(status: dict) -> bool:
    """From each partition's handover offset on, every record the ledger holds was applied exactly once."""
    boundaries = {(p["topic"], p["partition"]): p.get("handoverOffset")
                  for p in (status.get("progress") or {}).get("partitions") or []}
    store = AccountsStore(str(DB))
    try:
        counts = store.applied_counts()
    finally:
        store.close()
    after = {key: n for key, n in counts.items()
             if boundaries.get(key[:2]) is not None and key[2] >= boundaries[key[:2]]}
    wrong = sum(1 for n in after.values() if n != 1)
    say(f"ledger: {len(counts):,} records applied; {len(after):,} from the handover offsets on, "
        f"{wrong} of them applied other than exactly once")
    return wrong == 0


if __name__ == "__main__":
    sys.exit(main())
