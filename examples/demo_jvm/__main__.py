"""`make demo-jvm`: a Handover Reconsume of a JVM service end to end, on the platform `make run` started.

The sibling of `make demo` (examples/demo) for examples/accounts-jvm: it builds the Java service with Maven
(with the Reprise Java library of this checkout, into the cache), runs it as a 3-replica Deployment whose
consumers embed the Java guard, fills a `users-jvm` topic, applies examples/reconsume-handover-service.yaml
(`consumer.entrypoint: Service`: the replay consumers run the service's own image and its replay role) while
live traffic keeps arriving, and follows the replay until it is Complete. Last, it reads the service's ledger
back and holds it to what Reprise guarantees (examples/demo/exactly_once.py): from each partition's first
skipped offset on, no record processed by both groups and none lost; records the same group processed again
(its own at-least-once delivery) are counted apart. It ends with a check line and `done`/`FAILED`, as `make
demo` does.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from examples.demo.cluster import Cluster, check, committed, end_offsets, say
from examples.demo.exactly_once import PartitionLedger
from examples.demo.exactly_once import check as check_ledger
from local_platform.jvm_image import build_jvm_image
from local_platform.platform import read_state

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "accounts-jvm"
TOPIC = "users-jvm"
PARTITIONS = 6
HISTORY = 60_000
LIVE_GROUP = "accounts-jvm"
IMAGE = "reprise-examples/accounts-jvm:dev"
COMMAND = ["java", "-cp", "/app/accounts-jvm.jar:/app/lib/*", "io.reprise.examples.accounts.AccountsService"]
EVENTS = [b"UserCreated", b"UserUpdated", b"UserLoggedIn"]
#: The ledger of every live and replay process (all of them run as local processes on the node agent).
LEDGER = REPO / ".reprise" / "demo-jvm" / "ledger"


def produce(bootstrap: str, count: int, first: int = 0) -> None:
    from confluent_kafka import Producer

    # log_level 3: a short-lived producer's warnings on close ("Failed to acquire idempotence PID ... destroyed")
    # are not the demo's story; errors still show.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True, "log_level": 3})
    for n in range(first, first + count):
        while True:
            try:
                producer.produce(
                    TOPIC,
                    key=f"u-{n % 5000}".encode(),
                    value=json.dumps({"n": n}).encode(),
                    headers=[("event-type", EVENTS[n % 3])],
                )
                break
            except BufferError:
                producer.poll(0.1)
        if n % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def service(bootstrap: str) -> dict:
    env = {
        "ACCOUNTS_BOOTSTRAP_SERVERS": bootstrap,
        "ACCOUNTS_GROUP": LIVE_GROUP,
        "ACCOUNTS_TOPIC": TOPIC,
        "ACCOUNTS_LEDGER_DIR": str(LEDGER),
        "ACCOUNTS_BATCH": "500",
        "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "accounts-jvm"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "accounts-jvm"}},
            "template": {
                "metadata": {"labels": {"app": "accounts-jvm"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": IMAGE,
                            "command": COMMAND,
                            "env": [{"name": k, "value": v} for k, v in env.items()]
                            + [
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


def main() -> int:
    began = time.monotonic()
    ok = run_demo()
    say(f"{'done' if ok else 'FAILED'} in {time.monotonic() - began:.0f}s")
    return 0 if ok else 1


def run_demo() -> bool:
    state = read_state()
    if not state or not state.get("bootstrap"):
        print("reprise: no local platform is running: start `make run` in another shell first", file=sys.stderr)
        raise SystemExit(2)
    cluster = Cluster(state)
    say(f"Kafka at {cluster.bootstrap}, kubeconfig {cluster.kubeconfig}")
    prometheus = (state.get("urls") or {}).get("prometheus")
    if prometheus:  # the chart's alerts, evaluated while the demo runs
        say(f"Prometheus at {prometheus}: curl -s {prometheus}/api/v1/alerts (RepriseReplayStalled, lag alerts, ...)")
    say("building examples/accounts-jvm with Maven (the Reprise Java library from java/, into the cache) ...")
    image = build_jvm_image(REPO / "examples" / "accounts-jvm", IMAGE)
    say(f"  {image.reference}: /app is {image.folder}")
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    if TOPIC not in admin.list_topics(timeout=10).topics:
        for old in LEDGER.glob("*.log") if LEDGER.exists() else []:
            old.unlink()  # the ledger of an earlier platform's topic
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result()
        say(f"producing {HISTORY:,} user events into {TOPIC} ({PARTITIONS} partitions) ...")
        produce(cluster.bootstrap, HISTORY)
    LEDGER.mkdir(parents=True, exist_ok=True)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "accounts-kafka-client", "labels": {"reprise.io/kafka-client": "true"}},
        "stringData": {"session.timeout.ms": "10000"},
    }
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(secret))
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(service(cluster.bootstrap)))
    say("the Java accounts service (3 replicas, consumers wrapped by GuardedConsumer) is catching up ...")
    while (remaining := _lag(cluster.bootstrap)) != 0:
        if remaining > 0:
            say(f"  live group lag {remaining:,}")
        time.sleep(3)
    # Everything below this was the live group's history before the replay: the check starts here.
    since = committed(cluster.bootstrap, LIVE_GROUP, TOPIC, PARTITIONS)

    stop = threading.Event()

    def live_traffic() -> None:
        n = HISTORY * 10
        while not stop.wait(0.5):
            produce(cluster.bootstrap, 50, n)
            n += 50

    threading.Thread(target=live_traffic, daemon=True).start()
    replay = yaml.safe_load((REPO / "examples" / "reconsume-handover-service.yaml").read_text())
    replay["spec"]["kafka"]["bootstrapServers"] = cluster.bootstrap
    replay["spec"]["topics"] = [TOPIC]
    replay["spec"]["completion"]["drainedFor"] = "5s"
    replay["spec"]["consumer"]["env"].append({"name": "REPRISE_MAX_RECORDS_PER_SECOND", "value": "4000"})
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(replay))
    name = replay["metadata"]["name"]
    say(
        f"applied Reconsume {name} (Handover, consumer.entrypoint: Service): the replay consumers run the "
        "service's own image, which starts Reprise's Java replay role"
    )
    status: dict = {}
    last = None
    try:
        while True:
            body = json.loads(cluster.kubectl("get", "reconsume", name, "-n", NAMESPACE, "-o", "json"))
            status = body.get("status") or {}
            progress = status.get("progress") or {}
            handed = sum(1 for p in progress.get("partitions") or [] if p.get("state") == "HandedOver")
            waiting = next(
                (c for c in status.get("conditions") or [] if c["type"] == "Waiting" and c["status"] == "True"), None
            )
            line = (
                f"  phase {status.get('phase', '-'):<9} progress {progress.get('percent', 0):>3}%  "
                f"lag {progress.get('lag', '-'):>7}  handed over {handed}/{PARTITIONS}"
                + (f"  waiting: {waiting['reason']}" if waiting else "")
            )
            if line != last:
                say(line)
                last = line
            if status.get("phase") in ("Complete", "Failed"):
                break
            time.sleep(2)
    finally:
        stop.set()
    say("live traffic stopped; the service takes the last of it ...")
    while _lag(cluster.bootstrap) != 0:
        time.sleep(2)
    handover = {p["partition"]: p.get("handoverOffset") for p in (status.get("progress") or {}).get("partitions") or []}
    exact = ledger_check(since, end_offsets(cluster.bootstrap, TOPIC, PARTITIONS), handover)
    return status.get("phase") == "Complete" and exact


def _lag(bootstrap: str) -> int:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": LIVE_GROUP, "enable.auto.commit": False})
    try:
        total = 0
        for tp in reader.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30):
            _, high = reader.get_watermark_offsets(TopicPartition(TOPIC, tp.partition), timeout=10)
            total += high - max(tp.offset, 0)
        return total
    except Exception as exc:  # the group coordinator is still being elected
        say(f"  waiting for the group coordinator ({exc})")
        return -1
    finally:
        reader.close()


def read_ledger(folder: Path) -> tuple[dict[int, Counter], dict[int, Counter]]:
    """The service's ledger files: per partition, how often the live group and the replay processed each offset
    (a torn last line, of a killed process, is skipped)."""
    live: dict[int, Counter] = {}
    replay: dict[int, Counter] = {}
    for path in folder.glob("*.log"):
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) != 5 or parts[1] != TOPIC or parts[0] not in ("L", "R"):
                continue
            side = live if parts[0] == "L" else replay
            side.setdefault(int(parts[2]), Counter())[int(parts[3])] += 1
    return live, replay


def ledger_check(since: dict[int, int], ends: dict[int, int], handover: dict[int, int | None]) -> bool:
    """The ledger held to Reprise's guarantee (examples/demo/exactly_once.py), from the live group's offsets when
    the replay was applied."""
    live, replay = read_ledger(LEDGER)
    verdict = check_ledger(
        {
            p: PartitionLedger(
                live=live.get(p, Counter()),
                replay=replay.get(p, Counter()),
                since=since.get(p, 0),
                end=ends[p],
                handover=handover.get(p),
            )
            for p in range(PARTITIONS)
        }
    )
    for line in verdict.lines(
        "the service is at-least-once: a batch processed but not committed when a rebalance or a restart moved its "
        "partition is read again by the new owner"
    ):
        say(line)
    return check(
        verdict.ok,
        "from the first skipped offsets on, no record processed by both groups and none lost",
        "the handover was not exact (see the ledger line above)",
    )


if __name__ == "__main__":
    sys.exit(main())
