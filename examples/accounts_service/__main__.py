"""`python -m examples.accounts_service`: the live accounts service, its consumer loop wrapped by the guard.

    python -m examples.accounts_service --bootstrap-servers localhost:9092 --group accounts-service \\
        --topic users --db accounts.sqlite [--handover-topic reprise.handover]

The loop is an ordinary confluent-kafka loop: consume a batch, apply it, commit. The only change a service
makes to take part in a Handover replay is the first line of `main`: `GuardedConsumer` instead of `Consumer`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from replay_worker.guard import GuardedConsumer

from .store import AccountsStore

log = logging.getLogger("accounts_service")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.accounts_service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--group", default="accounts-service", help="the live consumer group")
    parser.add_argument("--topic", default="users")
    parser.add_argument("--db", default="accounts.sqlite", help="SQLite file (shared with replay workers)")
    parser.add_argument("--handover-topic", default="reprise.handover")
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
    applied = 0
    try:
        while running["yes"]:
            messages = [m for m in consumer.consume(args.batch, 0.5) if m.error() is None]
            if not messages:
                continue
            result = store.apply(messages, args.group)  # apply first ...
            consumer.commit(asynchronous=False)  # ... then commit: at-least-once, the ledger shows repeats
            applied += result.records
            if applied // 10_000 != (applied - result.records) // 10_000:
                log.info(
                    "applied %d user events (%d skipped by the guard while a replay covers them)",
                    applied,
                    consumer.stats.skipped,
                )
    finally:
        consumer.close()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
