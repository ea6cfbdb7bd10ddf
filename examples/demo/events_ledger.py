"""The events service of `make demo-lake`: a live consumer with the handover guard, and the batch handler its
replay consumers call, both writing one ledger of which event was applied from where.

    python -m examples.demo.events_ledger --bootstrap-servers HOST:PORT --group events-service --topic events
    REPRISE_HANDLER=examples.demo.events_ledger:record   (the drain and continuation consumers)

The ledger (SQLite, `EVENTS_LEDGER`) holds one row per applied record: the event's id and the topic, partition
and offset it was read from, and `live` or `replay`. The demo reads it to check the seam.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys

from replay_worker.guard import GuardedConsumer

from .live_loop import run_until_stopped


class EventLedger:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS applied (event_id TEXT, topic TEXT, partition INTEGER, "
            "offset INTEGER, applied_by TEXT)"
        )

    def apply(self, messages: list, applied_by: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany(
            "INSERT INTO applied VALUES (?, ?, ?, ?, ?)",
            [
                (json.loads(m.value()).get("event_id"), m.topic(), m.partition(), m.offset(), applied_by)
                for m in messages
            ],
        )
        self.db.execute("COMMIT")

    def rows(self) -> list[tuple[str, str, int, int, str]]:
        return list(self.db.execute("SELECT event_id, topic, partition, offset, applied_by FROM applied"))

    def close(self) -> None:
        self.db.close()


def record(messages: list) -> None:
    """REPRISE_HANDLER of the replay consumers (drain of the backfill topic, continuation on the live topic)."""
    ledger = EventLedger(os.environ["EVENTS_LEDGER"])
    try:
        ledger.apply(messages, "replay")
    finally:
        ledger.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo.events_ledger")
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--group", default="events-service")
    parser.add_argument("--topic", default="events")
    args = parser.parse_args(argv)
    consumer = GuardedConsumer(
        {
            "bootstrap.servers": args.bootstrap_servers,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    ledger = EventLedger(os.environ["EVENTS_LEDGER"])
    try:
        run_until_stopped(consumer, [args.topic], lambda batch: ledger.apply(batch, "live"))
    finally:
        ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
