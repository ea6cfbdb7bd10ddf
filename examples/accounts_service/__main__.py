"""`python -m examples.accounts_service`: the live accounts service, its consumer loop wrapped by the guard.

    python -m examples.accounts_service --bootstrap-servers localhost:9092 --group accounts-service \\
        --topic users --db accounts.sqlite [--handover-topic reprise.handover.<namespace>]

The loop is an ordinary confluent-kafka loop: consume a batch, apply it, commit. The only change a service
makes to take part in a Handover replay is the first line of `main`: `GuardedConsumer` instead of `Consumer`.

A commit can fail, and in a group that grows or shrinks it will: a commit sent while the group rebalances is
refused (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID). The service logs it and carries on, as
services do: the partition's new owner reads the batch again from the last commit, and the store recognises
each record it has applied already (it keeps the offsets with the rows, in one transaction), so the batch
takes effect once.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any, Callable

from confluent_kafka import KafkaError, KafkaException

from replay_worker.guard import GuardedConsumer

from .store import AccountsStore

log = logging.getLogger("accounts_service")


def serve(consumer: Any, store: AccountsStore, group: str, batch: int, running: Callable[[], bool]) -> int:
    """Consume, apply and commit until `running()` is false; returns how many records took effect."""
    applied = 0
    while running():
        messages = [m for m in consumer.consume(batch, 0.5) if m.error() is None]
        if not messages:
            continue
        result = store.apply(messages, group)  # apply first (with the offsets, in one transaction) ...
        try:
            consumer.commit(asynchronous=False)  # ... then commit: where the next owner starts reading
        except KafkaException as exc:
            # Refused while the group rebalances: the new owner reads from the last commit, and the store
            # recognises what it applied already. Nothing to undo, nothing to retry here.
            error = exc.args[0].name() if exc.args and isinstance(exc.args[0], KafkaError) else str(exc)
            log.warning("commit failed (%s); the partition's next owner reads these records again", error)
            store.commit_failed(group, error)
        applied += result.records
        if result.repeated:
            log.info("%d records delivered again were applied before; not applied twice", result.repeated)
        if applied // 10_000 != (applied - result.records) // 10_000:
            log.info(
                "applied %d user events (%d skipped by the guard while a replay covers them)",
                applied,
                consumer.stats.skipped,
            )
    return applied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.accounts_service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--group", default="accounts-service", help="the live consumer group")
    parser.add_argument("--topic", default="users")
    parser.add_argument("--db", default="accounts.sqlite", help="SQLite file (shared with replay workers)")
    # Default: $REPRISE_HANDOVER_TOPIC (the Deployment names its namespace's topic), else reprise.handover.
    parser.add_argument("--handover-topic", default=None)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("replay_worker.librdkafka").setLevel(logging.WARNING)
    running = {"yes": True}
    signal.signal(signal.SIGTERM, lambda *_: running.update(yes=False))
    signal.signal(signal.SIGINT, lambda *_: running.update(yes=False))

    consumer = GuardedConsumer(
        {
            "bootstrap.servers": args.bootstrap_servers,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
        },
        handover_topic=args.handover_topic,
    )
    store = AccountsStore(args.db)
    consumer.subscribe([args.topic])
    try:
        serve(consumer, store, args.group, args.batch, lambda: running["yes"])
    finally:
        consumer.close()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
