"""Avro lake files as producers write them (fastavro, one writer schema embedded per file), in three schema
versions, put into the local S3 store, and the records a replay must turn them into under the latest schema.

    v1 (days 0-2): event_id, user_id, ts (timestamp-millis), qty int, customer string
    v2 (days 3-5): v1 + email ["null", "string"] default null
    v3 (days 6-8): qty long (int -> long promotion), customer renamed customer_name (aliases: [customer]),
                   email, + channel string default "web"

The latest schema is v3: v1 and v2 records get customer_name from customer, qty as long, email null (v1)
and channel "web" (Avro's own resolution, file by file). INCOMPATIBLE is a version whose qty became a
string, which no rule resolves to long.

The files are encoded here (the Avro object container format of the specification: header with the writer
schema, one block, no codec), so the tests need no Avro library of their own.
"""

from __future__ import annotations

import json
import os
from datetime import date, datetime, timedelta, timezone
from typing import Any

FIRST_DAY = date(2024, 3, 1)
DAYS = 9
PER_DAY = 40
KEYS = 7

_BASE = [
    {"name": "event_id", "type": "string"},
    {"name": "user_id", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]
V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [*_BASE, {"name": "qty", "type": "int"}, {"name": "customer", "type": "string"}],
}
V2: dict[str, Any] = {
    **V1,
    "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}
LATEST: dict[str, Any] = {
    **V1,
    "fields": [
        *_BASE,
        {"name": "qty", "type": "long"},
        {"name": "customer_name", "type": "string", "aliases": ["customer"]},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "channel", "type": "string", "default": "web"},
    ],
}
INCOMPATIBLE: dict[str, Any] = {
    **V1,
    "fields": [*_BASE, {"name": "qty", "type": "string"}, {"name": "customer", "type": "string"}],
}


def day_text(day: int) -> str:
    return (FIRST_DAY + timedelta(days=day)).isoformat()


def version_of(day: int) -> int:
    return 1 + day // 3


def written(day: int, i: int) -> dict[str, Any]:
    """Record i of `day` as its version writes it."""
    version = version_of(day)
    ts = datetime.combine(FIRST_DAY + timedelta(days=day), datetime.min.time(), tzinfo=timezone.utc)
    record: dict[str, Any] = {
        "event_id": f"e-{day}-{i}",
        "user_id": f"u{i % KEYS}",
        "ts": ts + timedelta(seconds=997 * i),
        "qty": i + day,
    }
    name = f"customer {day}/{i}"
    if version == 3:
        record["customer_name"] = name
        record["channel"] = "app" if i % 2 else "web"
    else:
        record["customer"] = name
    if version >= 2:
        record["email"] = None if i % 5 == 0 else f"c{i}@example.com"
    return record


def expected(day: int, i: int) -> dict[str, Any]:
    """Record i of `day` under the latest schema, by Avro's resolution rules."""
    record = written(day, i)
    return {
        "event_id": record["event_id"],
        "user_id": record["user_id"],
        "ts": record["ts"],
        "qty": record["qty"],
        "customer_name": record.get("customer_name", record.get("customer")),
        "email": record.get("email"),
        "channel": record.get("channel", "web"),
    }


def _long(n: int) -> bytes:
    zigzag = (n << 1) ^ (n >> 63)
    out = bytearray()
    while zigzag & ~0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _bytes(data: bytes) -> bytes:
    return _long(len(data)) + data


def _value(kind: Any, value: Any) -> bytes:
    if isinstance(kind, list):  # a union: the branch index, then the value
        branch = kind.index("null") if value is None else next(i for i, k in enumerate(kind) if k != "null")
        return _long(branch) + _value(kind[branch], value)
    if isinstance(kind, dict):  # timestamp-millis over long
        millis = int(value.timestamp() * 1000) if isinstance(value, datetime) else value
        return _value(kind["type"], millis)
    if kind == "null":
        return b""
    if kind in ("int", "long"):
        return _long(value)
    if kind == "string":
        return _bytes(value.encode())
    raise ValueError(f"no encoding for {kind!r} here")


def avro_file(schema: dict[str, Any], records: list[dict[str, Any]]) -> bytes:
    """An Avro object container file holding `records` under the writer schema `schema`."""
    sync = os.urandom(16)
    meta = {"avro.schema": json.dumps(schema).encode(), "avro.codec": b"null"}
    header = b"Obj\x01" + _long(len(meta)) + b"".join(_bytes(k.encode()) + _bytes(v) for k, v in meta.items())
    header += _long(0) + sync
    block = b"".join(_value(f["type"], r[f["name"]]) for r in records for f in schema["fields"])
    return header + _long(len(records)) + _bytes(block) + sync


def day_files(day: int) -> dict[str, bytes]:
    """The files of one day folder (two per day, as a producer flushing twice writes them)."""
    schema = {1: V1, 2: V2, 3: LATEST}[version_of(day)]
    records = [written(day, i) for i in range(PER_DAY)]
    half = PER_DAY // 2
    return {
        f"dt={day_text(day)}/part-0.avro": avro_file(schema, records[:half]),
        f"dt={day_text(day)}/part-1.avro": avro_file(schema, records[half:]),
    }
