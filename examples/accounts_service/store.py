"""The accounts service's state: users' locales and the ledger of applied records, in one SQLite file.

Several processes (live replicas, replay workers) share the file: WAL mode and a busy timeout let them write
in turns. A batch is applied in one transaction, so a crash leaves either all of it or none of it.

The ledger is also what makes the service exactly-once in its own database, the pattern of the seed's
services ("keeps track of the offsets that have been processed"): the offset of each record is stored in the
same transaction as the row it changed, so a record delivered to the same group again (its batch was applied
but the commit failed in a rebalance, or the process died before committing) is recognised and not applied a
second time; the ledger counts it as `redelivered` instead. Kafka's committed offset is then only where a new
owner starts reading, not what decides whether a record takes effect.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Iterable

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (user TEXT PRIMARY KEY, locale TEXT, updated_from TEXT);
CREATE TABLE IF NOT EXISTS ledger (topic TEXT, partition INTEGER, offset INTEGER, applied_by TEXT, applied INTEGER,
                                   redelivered INTEGER NOT NULL DEFAULT 0,
                                   PRIMARY KEY (topic, partition, offset, applied_by));
CREATE TABLE IF NOT EXISTS commit_failures (applied_by TEXT, failed_at REAL, error TEXT);
"""


@dataclass
class Applied:
    records: int = 0
    #: Records this group had already applied (its batch was delivered again after a failed commit or a
    #: crash): recognised by the ledger and not applied again.
    repeated: int = 0


@dataclass(frozen=True)
class LedgerRow:
    topic: str
    partition: int
    offset: int
    applied_by: str
    #: Times the record took effect (1; more only in a ledger written before the store recognised repeats).
    applied: int
    #: Times it was delivered again to the same group and recognised as done.
    redelivered: int


class AccountsStore:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(ledger)")}
        if "redelivered" not in columns:  # a file of an older example: keep its rows, count from now on
            self.db.execute("ALTER TABLE ledger ADD COLUMN redelivered INTEGER NOT NULL DEFAULT 0")

    def apply(self, messages: Iterable[Any], applied_by: str) -> Applied:
        """Apply user events (confluent_kafka Messages) in one transaction; records `applied_by` has applied
        before are counted as redelivered and change nothing."""
        result = Applied()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for message in messages:
                where = (message.topic(), message.partition(), message.offset(), applied_by)
                cursor = self.db.execute("INSERT OR IGNORE INTO ledger VALUES (?, ?, ?, ?, 1, 0)", where)
                if cursor.rowcount == 0:
                    self.db.execute(
                        "UPDATE ledger SET redelivered = redelivered + 1 "
                        "WHERE topic=? AND partition=? AND offset=? AND applied_by=?",
                        where,
                    )
                    result.repeated += 1
                    continue
                event = json.loads(message.value())
                self.db.execute(
                    "INSERT INTO users (user, locale, updated_from) VALUES (?, ?, ?) "
                    "ON CONFLICT(user) DO UPDATE SET locale = excluded.locale, updated_from = excluded.updated_from",
                    (event["user"], event.get("locale"), f"{where[0]}[{where[1]}]@{where[2]}"),
                )
                result.records += 1
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return result

    def commit_failed(self, applied_by: str, error: str) -> None:
        """A commit of `applied_by` failed (the records it covered will be delivered again): kept, so a check of
        the ledger can name the cause of the redeliveries it finds."""
        self.db.execute("INSERT INTO commit_failures VALUES (?, ?, ?)", (applied_by, time.time(), error))

    def commit_failures(self) -> dict[str, list[str]]:
        """The errors of failed commits, per group."""
        found: dict[str, list[str]] = {}
        for applied_by, error in self.db.execute("SELECT applied_by, error FROM commit_failures ORDER BY failed_at"):
            found.setdefault(applied_by, []).append(error)
        return found

    def rows(self, topic: str) -> list[LedgerRow]:
        """Every ledger row of `topic`."""
        return [
            LedgerRow(*row)
            for row in self.db.execute(
                "SELECT topic, partition, offset, applied_by, applied, redelivered FROM ledger WHERE topic=?", (topic,)
            )
        ]

    def applied_counts(self) -> dict[tuple[str, int, int], int]:
        """How many times each record was applied, over every group."""
        rows = self.db.execute(
            "SELECT topic, partition, offset, SUM(applied) FROM ledger GROUP BY topic, partition, offset"
        )
        return {(t, p, o): n for t, p, o, n in rows}

    def close(self) -> None:
        self.db.close()


def default_path() -> str:
    return os.environ.get("ACCOUNTS_DB", "accounts.sqlite")
