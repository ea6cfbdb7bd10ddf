"""The accounts service's state: users' locales and the ledger of applied records, in one SQLite file.

Several processes (live replicas, replay workers) share the file: WAL mode and a busy timeout let them write
in turns. A batch is applied in one transaction, so a crash leaves either all of it or none of it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (user TEXT PRIMARY KEY, locale TEXT, updated_from TEXT);
CREATE TABLE IF NOT EXISTS ledger (topic TEXT, partition INTEGER, offset INTEGER, applied_by TEXT, applied INTEGER,
                                   PRIMARY KEY (topic, partition, offset, applied_by));
"""


@dataclass
class Applied:
    records: int = 0
    #: Records this group had already applied (a replayed uncommitted batch after a crash).
    repeated: int = 0


class AccountsStore:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def apply(self, messages: Iterable[Any], applied_by: str) -> Applied:
        """Apply user events (confluent_kafka Messages) in one transaction."""
        result = Applied()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for message in messages:
                event = json.loads(message.value())
                where = f"{message.topic()}[{message.partition()}]@{message.offset()}"
                self.db.execute(
                    "INSERT INTO users (user, locale, updated_from) VALUES (?, ?, ?) "
                    "ON CONFLICT(user) DO UPDATE SET locale = excluded.locale, updated_from = excluded.updated_from",
                    (event["user"], event.get("locale"), where),
                )
                cursor = self.db.execute(
                    "INSERT INTO ledger VALUES (?, ?, ?, ?, 1) ON CONFLICT DO UPDATE SET applied = applied + 1",
                    (message.topic(), message.partition(), message.offset(), applied_by),
                )
                result.records += 1
                if cursor.rowcount and self._applied_before(message, applied_by):
                    result.repeated += 1
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return result

    def _applied_before(self, message: Any, applied_by: str) -> bool:
        row = self.db.execute(
            "SELECT applied FROM ledger WHERE topic=? AND partition=? AND offset=? AND applied_by=?",
            (message.topic(), message.partition(), message.offset(), applied_by),
        ).fetchone()
        return bool(row and row[0] > 1)

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
