"""The example accounts service survives a commit the group refuses, as a real service must (issue 32, item 1).

Two replicas of the service (`examples.accounts_service.serve`) share one group and one database, against the
real broker. The first replica applies its first batch and, before it commits, the group moves on without it:
it exceeded `max.poll.interval.ms` while applying (a slow batch on a loaded machine), so librdkafka left the
group and the second replica took every partition. Its commit is then refused. The service must log that and
carry on (not crash, as it did with ILLEGAL_GENERATION during `make demo`), the second replica reads the
uncommitted batch again, and the store recognises it: every record takes effect exactly once.
"""

from __future__ import annotations

import json
import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from examples.accounts_service.__main__ import serve
from examples.accounts_service.store import AccountsStore
from replay_worker.guard import GuardedConsumer

from .harness import committed, end_offsets, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2
RECORDS = 400


class SlowFirstBatch(AccountsStore):
    """The first replica's store: its first batch is applied, then held until the group has left that replica
    behind (the second replica owns every partition), so the commit that follows is one the group refuses."""

    def __init__(self, path: str, left_behind: threading.Event) -> None:
        super().__init__(path)
        self.left_behind = left_behind
        self.batches = 0

    def apply(self, messages, applied_by):
        result = super().apply(messages, applied_by)
        self.batches += 1
        if self.batches == 1:
            assert self.left_behind.wait(120), "the group never rebalanced without the first replica"
        return result


def group_members(admin: AdminClient, group: str) -> list:
    return admin.describe_consumer_groups([group])[group].result(timeout=10).members


def test_a_commit_refused_in_a_rebalance_is_logged_and_the_batch_takes_effect_once(kafka, topic_name, tmp_path):
    bootstrap = kafka.bootstrap
    kafka.create_topic(topic_name, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for n in range(RECORDS):
        producer.produce(topic_name, key=f"u-{n % 50}".encode(), value=json.dumps({"user": f"u-{n % 50}"}).encode())
    producer.flush(30)
    group = f"{topic_name}-accounts"
    db = str(tmp_path / "accounts.sqlite")
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        # The broker's least; a batch applied for longer than this puts the replica out of the group.
        "session.timeout.ms": 6000,
        "max.poll.interval.ms": 6000,
    }
    running = {"yes": True}
    left_behind = threading.Event()
    outcome: dict[str, object] = {}
    first = GuardedConsumer(settings, handover_topic=f"{topic_name}-handover", member="first")
    second = GuardedConsumer(settings, handover_topic=f"{topic_name}-handover", member="second")
    stores: list[AccountsStore] = []
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def replica(name: str, consumer: GuardedConsumer, store_of) -> None:
        store = store_of()
        stores.append(store)
        consumer.subscribe([topic_name])
        try:
            outcome[name] = serve(consumer, store, group, 100, lambda: running["yes"])
        except BaseException as exc:  # what the test asserts on: the replica must not end this way
            outcome[name] = exc
        finally:
            consumer.close()
            store.close()  # SQLite: in the thread that opened it

    threads = [threading.Thread(target=replica, args=("first", first, lambda: SlowFirstBatch(db, left_behind)))]
    threads[0].start()
    try:
        wait_for(lambda: any(s.batches for s in stores if isinstance(s, SlowFirstBatch)), 60, "the first batch")
        threads.append(threading.Thread(target=replica, args=("second", second, lambda: AccountsStore(db))))
        threads[1].start()

        def second_owns_all() -> bool:
            members = group_members(admin, group)
            return (
                len(members) == 1
                and members[0].member_id == second.memberid()
                and len(members[0].assignment.topic_partitions) == PARTITIONS
            )

        wait_for(second_owns_all, 60, "the second replica owning every partition")
        left_behind.set()
        ends = end_offsets(bootstrap, topic_name, PARTITIONS)
        wait_for(
            lambda: (
                all(committed(bootstrap, group, topic_name, PARTITIONS).get(p, (-1, None))[0] >= ends[p] for p in ends)
                or "first" in outcome
            ),
            120,
            "the group at the end of the topic",
        )
    finally:
        left_behind.set()
        running["yes"] = False
        for thread in threads:
            thread.join(60)
    assert not isinstance(outcome.get("first"), BaseException), f"the first replica crashed: {outcome['first']!r}"
    check = AccountsStore(db)
    try:
        failures = check.commit_failures().get(group, [])
        rows = check.rows(topic_name)
    finally:
        check.close()
    assert failures, "the first replica's commit was not refused: nothing was tested"
    applied = {(r.partition, r.offset): r.applied for r in rows}
    assert sorted(applied) == [(p, o) for p in range(PARTITIONS) for o in range(ends[p])], "records lost"
    assert set(applied.values()) == {1}, "a record took effect twice"
    assert sum(r.redelivered for r in rows) > 0, "the refused batch was never read again by the new owner"
