"""A small upstream service's backfill CLI, the kind seed 000 describes: "simple CLI commands" that
re-produce the current state of named entities from the service's own database.

It is what a Backfill with the `job` source runs (see `examples/backfill-job.yaml` and the operator's
end-to-end tests). The "database" is SQLite: one table `entities(key, state)` holding each entity's current
state as the service stores it. The command reads the keys the way Reprise hands them over, the file in
`REPRISE_KEYS_FILE` (one key per line) or else `REPRISE_KEYS` (comma-separated), and produces one record per
key found, key = the entity's key, value = its state, with the murmur2 partitioner Java services use, so the
records land where the service's own updates of those keys do.

    python -m examples.upstream_cli put --database users.db u-1 '{"name": "Ada"}'
    REPRISE_KEYS=u-1,u-2 python -m examples.upstream_cli backfill --database users.db \\
        --bootstrap-servers kafka:9092 --topic users
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable, Mapping

SCHEMA = "CREATE TABLE IF NOT EXISTS entities (key TEXT PRIMARY KEY, state TEXT NOT NULL)"


class EntityStore:
    """The service's database: each entity's current state by key."""

    def __init__(self, path: str | Path) -> None:
        self.connection = sqlite3.connect(str(path))
        self.connection.execute(SCHEMA)

    def put(self, key: str, state: str) -> None:
        self.put_many({key: state})

    def put_many(self, states: Mapping[str, str]) -> None:
        with self.connection:
            self.connection.executemany(
                "INSERT INTO entities (key, state) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET state = excluded.state",
                list(states.items()),
            )

    def current(self, keys: Iterable[str]) -> dict[str, str]:
        """The current state of each key that exists (missing keys are absent from the answer)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        for i in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for key, state in self.connection.execute(f"SELECT key, state FROM entities WHERE key IN ({marks})", chunk):
                found[key] = state
        return found

    def close(self) -> None:
        self.connection.close()
