"""The record handlers the handler-mode benchmark calls, the same in the replay worker and in the bare loop.
Not a benchmark.

- `noop`: does nothing with the batch: what remains is the cost of getting records to a handler.
- `to_sqlite`: writes each batch to a SQLite table in one transaction (`BENCH_SQLITE_DB`), the shape of a
  service that applies records to its store.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

_db: sqlite3.Connection | None = None


def noop(messages: list[Any]) -> None:
    return None


def _connection() -> sqlite3.Connection:
    global _db
    if _db is None:
        _db = sqlite3.connect(os.environ["BENCH_SQLITE_DB"], isolation_level=None)
        _db.execute("PRAGMA journal_mode=WAL")
        _db.execute("PRAGMA synchronous=NORMAL")
        _db.execute(
            "CREATE TABLE IF NOT EXISTS records (topic TEXT, part INTEGER, offset INTEGER, value BLOB, "
            "PRIMARY KEY (topic, part, offset))"
        )
    return _db


def to_sqlite(messages: list[Any]) -> None:
    db = _connection()
    db.execute("BEGIN")
    db.executemany(
        "INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)",
        [(m.topic(), m.partition(), m.offset(), m.value()) for m in messages],
    )
    db.execute("COMMIT")
