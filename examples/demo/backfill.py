"""`make demo-backfill`: a Backfill of named entities, complete when two downstream groups consumed them.

It applies `examples/backfill-topic.yaml` unchanged: re-emit the latest state of users u-1001, u-1002 and
u-2417 from the compacted `users-state` topic to `users`, done when the groups `billing` and `notifications`
have both committed past what was produced. The demo makes what the manifest refers to (the topics, with three
versions of 3,000 users in the state topic, and the Kafka client Secret), runs the two downstream groups
itself, starting `notifications` only once `billing` has passed so the barrier is seen waiting, follows the
Backfill until Complete and checks: each group received exactly the three users once, each in its latest
version, and the status says so.
"""

from __future__ import annotations

import json
import threading

from confluent_kafka import Consumer, TopicPartition

from .cluster import Cluster, check, create_topic, end_offsets, example, follow, produce, run, say

NAMESPACE = "users"
USERS = 3_000
VERSIONS = 3
PARTITIONS = {"users": 6, "users-state": 3}


class Downstream:
    """A downstream group reading `users` from where it stood, committing after each batch."""

    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster, self.group = cluster, group
        self.received: list[tuple[str, dict]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._consume, name=group, daemon=True)

    def start_at(self, offsets: dict[int, int]) -> None:
        """Commit `offsets` for the group (where it stands before the Backfill) without consuming."""
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": self.group})
        try:
            consumer.commit(offsets=[TopicPartition("users", p, o) for p, o in offsets.items()], asynchronous=False)
        finally:
            consumer.close()

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["users"])
        try:
            while not self.stop.is_set():
                batch = [m for m in consumer.consume(100, 0.5) if m.error() is None]
                if batch:
                    self.received += [(m.key().decode(), json.loads(m.value())) for m in batch]
                    consumer.commit(asynchronous=False)
        finally:
            consumer.close()


def main(cluster: Cluster) -> bool:
    backfill = example("backfill-topic")
    name, keys = backfill["metadata"]["name"], backfill["spec"]["keys"]
    groups = backfill["spec"]["downstreamGroups"]
    cluster.fresh(NAMESPACE, "backfill", name)
    for topic, partitions in PARTITIONS.items():
        create_topic(cluster, topic, partitions, {"cleanup.policy": "compact"} if topic == "users-state" else None)
    say(f"writing {VERSIONS} versions of {USERS:,} users to the compacted topic users-state ...")
    produce(
        cluster.bootstrap,
        "users-state",
        (
            (f"u-{n}".encode(), json.dumps({"user": f"u-{n}", "version": v}).encode(), [], None)
            for v in range(1, VERSIONS + 1)
            for n in range(USERS)
        ),
    )
    cluster.secret(NAMESPACE, backfill["spec"]["kafka"]["configFrom"]["secretRef"]["name"], {"client.rack": "demo"})
    before = end_offsets(cluster.bootstrap, "users", PARTITIONS["users"])
    downstream = {group: Downstream(cluster, group) for group in groups}
    for group in downstream.values():
        group.start_at(before)
    first, second = (downstream[g] for g in groups)
    first.thread.start()
    say(f"downstream group {first.group} is consuming users; {second.group} starts once {first.group} has passed")

    cluster.apply(NAMESPACE, backfill)
    say(
        f"applied examples/backfill-topic.yaml unchanged in namespace {NAMESPACE}: Backfill {name} of {', '.join(keys)}"
    )

    def describe(status: dict) -> str:
        barrier = status.get("barrier") or {}
        return (
            f"keys produced {status.get('keysProduced', '-')}/{len(keys)}  barrier "
            f"{barrier.get('groupsPassed', 0)}/{barrier.get('groupsTotal', len(groups))} groups passed, "
            f"{barrier.get('remaining', '-')} records to go"
        )

    def start_second(body: dict) -> None:
        barrier = (body.get("status") or {}).get("barrier") or {}
        if barrier.get("groupsPassed", 0) >= 1 and not second.thread.is_alive() and not second.stop.is_set():
            say(f"  {first.group} has passed: starting {second.group}")
            second.thread.start()

    try:
        body = follow(cluster, NAMESPACE, "backfill", name, describe, start_second)
    finally:
        for group in downstream.values():
            group.stop.set()
            if group.thread.is_alive():
                group.thread.join(10)
    status = body["status"]
    say(
        f"{status['phase']}: produced range "
        + ", ".join(
            f"users[{r['partition']}] {r['startOffset']}..{r['endOffset']}" for r in status.get("producedRange") or []
        )
    )
    ok = status["phase"] == "Complete"
    for group in downstream.values():
        got = {}
        for key, value in group.received:
            got.setdefault(key, []).append(value["version"])
        ok &= check(
            got == {k: [VERSIONS] for k in keys},
            f"{group.group} received {', '.join(sorted(got))} once each, in their latest version {VERSIONS}",
            f"{group.group} received {got}, expected each of {keys} once in version {VERSIONS}",
        )
    ok &= check(
        status.get("keysProduced") == len(keys) and not status.get("keysNotFound"),
        f"status: {status.get('keysProduced')} keys produced, none missing",
        f"status: keysProduced {status.get('keysProduced')}, keysNotFound {status.get('keysNotFound')}",
    )
    return ok


if __name__ == "__main__":
    run(main)
