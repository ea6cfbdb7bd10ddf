"""A user's orders service in Python, written from docs/own-service.md: the guard on the live side, and
`handle` for Reprise's worker (REPRISE_HANDLER=orders:handle) on the replay side."""

from __future__ import annotations

import logging
import os
import signal

from confluent_kafka import KafkaException
from replay_worker.guard import GuardedConsumer

log = logging.getLogger("orders")

_ledgers: dict[str, int] = {}


def _append(side: str, lines: list[str]) -> None:
    if side not in _ledgers:
        path = os.path.join(os.environ["ORDERS_LEDGER_DIR"], f"python-{side}-{os.getpid()}.log")
        _ledgers[side] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if lines:
        os.write(_ledgers[side], "".join(lines).encode())


def handle(records) -> None:
    """The replay: Reprise's worker calls this per batch."""
    group = os.environ.get("REPRISE_REPLAY_GROUP", "replay")
    _append("R", [f"R {m.topic()} {m.partition()} {m.offset()} {group}\n" for m in records])


def main() -> None:
    group = os.environ["ORDERS_GROUP"]
    consumer = GuardedConsumer(
        {
            "bootstrap.servers": os.environ["ORDERS_BOOTSTRAP_SERVERS"],
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([os.environ["ORDERS_TOPIC"]])
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    try:
        while running[0]:
            records = [m for m in consumer.consume(200, 1.0) if m.error() is None]
            _append("L", [f"L {m.topic()} {m.partition()} {m.offset()} {group}\n" for m in records])
            if records:
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:  # a commit during a rebalance: the partition's new owner re-reads
                    log.warning("commit failed: %s", exc)
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
