"""`python -m examples.demo.search_indexer`: the search indexer of `make demo-rewind`, a plain live consumer.

    python -m examples.demo.search_indexer --bootstrap-servers HOST:PORT --group search-indexer \\
        --topics products,product-prices --ledger indexed.sqlite

An ordinary confluent-kafka loop (consume a batch, index it, commit; commit and close on SIGTERM), with no
Reprise code in it: a Rewind needs none, it only scales the Deployment and moves the group's offsets. The
"index" is a ledger of how many times each record was indexed, which the demo reads to check the rewind.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys

from confluent_kafka import Consumer

from .live_loop import run_until_stopped


class IndexLedger:
    """(topic, partition, offset) -> times indexed, in one SQLite file; a batch is one transaction."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS indexed (topic TEXT, partition INTEGER, offset INTEGER, "
            "times INTEGER, PRIMARY KEY (topic, partition, offset))"
        )

    def index(self, messages: list) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany(
            "INSERT INTO indexed VALUES (?, ?, ?, 1) ON CONFLICT DO UPDATE SET times = times + 1",
            [(m.topic(), m.partition(), m.offset()) for m in messages],
        )
        self.db.execute("COMMIT")

    def times(self) -> dict[tuple[str, int, int], int]:
        return {(t, p, o): n for t, p, o, n in self.db.execute("SELECT topic, partition, offset, times FROM indexed")}

    def close(self) -> None:
        self.db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo.search_indexer")
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--group", default="search-indexer")
    parser.add_argument("--topics", default="products,product-prices")
    parser.add_argument("--ledger", required=True)
    args = parser.parse_args(argv)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap_servers,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    ledger = IndexLedger(args.ledger)
    try:
        run_until_stopped(consumer, args.topics.split(","), ledger.index)
    finally:
        ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
