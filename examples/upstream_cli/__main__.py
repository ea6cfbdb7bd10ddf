"""`python -m examples.upstream_cli backfill|put`: re-produce named entities' current state; store one.

Exit codes: 0 done (keys not in the database are reported, not an error: a Backfill lists them); 2 bad
arguments or no keys; 1 Kafka did not acknowledge every record.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

from confluent_kafka import Producer

from . import EntityStore


def keys_from_environment(env: Mapping[str, str], keys_file: str | None = None) -> list[str]:
    """The keys Reprise handed over: the keys file (one per line) first, else REPRISE_KEYS (comma-separated)."""
    path = keys_file or env.get("REPRISE_KEYS_FILE")
    if path:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return list(dict.fromkeys(line.strip() for line in lines if line.strip()))
    return list(dict.fromkeys(k.strip() for k in env.get("REPRISE_KEYS", "").split(",") if k.strip()))


def backfill(store: EntityStore, keys: Sequence[str], bootstrap: str, topic: str, rate: float = 0.0) -> dict:
    """Produce the current state of every key found; what was produced and what was not found.

    `rate` > 0 paces the records (per second), so downstream services are not flooded."""
    current = store.current(keys)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "client.id": "upstream-backfill",
        }
    )
    failures: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error.str())

    started = time.monotonic()
    for n, key in enumerate(k for k in keys if k in current):
        if rate > 0:
            time.sleep(max(0.0, started + n / rate - time.monotonic()))
        producer.produce(
            topic,
            key=key.encode(),
            value=current[key].encode(),
            on_delivery=delivered,
            headers=[("source", b"backfill")],
        )
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"{remaining} records unacknowledged, {len(failures)} failed: {failures[:1]}")
    return {"produced": len(current), "not_found": [k for k in keys if k not in current]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.upstream_cli")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("backfill", help="re-produce the current state of the named entities")
    run.add_argument("--database", required=True)
    run.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    run.add_argument("--topic", default=os.environ.get("REPRISE_TOPIC"))
    run.add_argument("--keys-file", default=None, help="default: $REPRISE_KEYS_FILE, else $REPRISE_KEYS")
    run.add_argument(
        "--max-records-per-second", type=float, default=0.0, help="pace the records; 0: as fast as possible"
    )
    put = commands.add_parser("put", help="store an entity's current state")
    put.add_argument("--database", required=True)
    put.add_argument("key")
    put.add_argument("state")
    args = parser.parse_args(argv)
    store = EntityStore(args.database)
    try:
        if args.command == "put":
            store.put(args.key, args.state)
            return 0
        if not args.bootstrap_servers or not args.topic:
            print("upstream_cli: --bootstrap-servers and --topic (or REPRISE_TOPIC) are required", file=sys.stderr)
            return 2
        keys = keys_from_environment(os.environ, args.keys_file)
        if not keys:
            print("upstream_cli: no keys (REPRISE_KEYS_FILE or REPRISE_KEYS)", file=sys.stderr)
            return 2
        try:
            summary = backfill(store, keys, args.bootstrap_servers, args.topic, args.max_records_per_second)
        except RuntimeError as exc:
            print(f"upstream_cli: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(summary), flush=True)
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
