"""Backfill's `debezium` source: the signal records Reprise sends to a Debezium connector and the
notifications it reads back (REFERENCE.md section 5).

The top of the module is pure: building the `execute-snapshot` signal (and the pause, resume and stop
signals that suspend and deletion use), SQL quoting of the keys, and folding notification records into the
snapshot's progress. The bottom ("I/O") is the only code that produces to the signal topic and reads the
signal and notification topics; the reconcile calls it through `asyncio.to_thread`.

The signal. Key: the connector's `topic.prefix` (the Kafka signal channel ignores records whose key is not
its logical name). Value, compact JSON:

    {"id":"reprise-<uid>","type":"execute-snapshot","data":{"data-collections":["public.users"],
     "type":"incremental","additional-conditions":[{"data-collection":"public.users",
     "filter":"id IN ('1','2','3')"}]}}

REFERENCE.md shows `type` and `data`; the Kafka channel also reads `id` (Debezium's KafkaSignalChannel
reads `id`, `type` and `data` from the value), and incremental-snapshot notifications carry that id back,
which is how Reprise tells its own snapshot's notifications from anyone else's. The same id is Reprise's
idempotency key: before sending, the signal topic is searched for it, so an operator restart between
sending and recording never starts a second snapshot. Debezium reads partition 0 of the signal topic only,
so the signal goes to partition 0.

Quoting. Every key is a SQL string literal with single quotes doubled (`O'Brien` -> `'O''Brien'`), also
keys that look like numbers: an integer column compares with a quoted number in PostgreSQL, MySQL, SQL
Server, Oracle and Db2, but a text column compared with an unquoted number fails in PostgreSQL. Keys with
a backslash or a control character are refused: MySQL (by default) treats backslash as an escape inside
literals, so no one quoting is safe for every database. More than 1000 keys become `IN` lists of at most
1000 joined with OR (Oracle's limit on one list).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from . import kafka_admin

#: Debezium's notification types of an incremental snapshot, in the order they arrive.
NOTIFICATION_TYPES = ("STARTED", "PAUSED", "RESUMED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "COMPLETED", "ABORTED")
#: `status` values of TABLE_SCAN_COMPLETED that mean the scan worked (EMPTY: the filter matched no row).
SCAN_SUCCEEDED = ("SUCCEEDED", "EMPTY")
#: Oracle refuses an IN list of more than 1000 expressions.
IN_LIST_LIMIT = 1000
#: The signal topic's default max.message.bytes is about 1 MB; stay clearly under it.
MAX_SIGNAL_BYTES = 900_000
#: The record header that names the Backfill a signal came from (Debezium ignores headers).
SIGNAL_HEADER = "reprise.io/backfill"

_UNSAFE = re.compile(r"[\\\x00-\x1f\x7f]")


class SignalError(ValueError):
    """The keys cannot be put in a signal (unsafe characters, too many): the message says which."""


# ------------------------------------------------------------------------------------------ signals


def sql_literal(key: str) -> str:
    """`key` as a SQL string literal, single quotes doubled."""
    if _UNSAFE.search(key):
        raise SignalError(
            f"key {key[:80]!r} has a backslash or a control character: it cannot be quoted safely for every "
            "database (MySQL reads backslash as an escape); use the topic or job source for it"
        )
    return "'" + key.replace("'", "''") + "'"


def key_filter(key_column: str, keys: Sequence[str]) -> str:
    """The snapshot's filter: `<keyColumn> IN ('k1','k2')`, split into ORed lists of at most 1000."""
    if not keys:
        raise SignalError("no keys: the snapshot filter needs at least one")
    literals = [sql_literal(k) for k in keys]
    lists = [
        f"{key_column} IN ({','.join(literals[i : i + IN_LIST_LIMIT])})" for i in range(0, len(literals), IN_LIST_LIMIT)
    ]
    return " OR ".join(lists)


def signal_id(uid: str) -> str:
    """The id of a Backfill's execute-snapshot signal: stable across restarts, unique per object."""
    return f"reprise-{uid}"


@dataclass(frozen=True)
class SignalRecord:
    """One record for the signal topic."""

    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()

    def body(self) -> dict:
        return json.loads(self.value)


def _record(topic_prefix: str, body: Mapping[str, Any], backfill: str) -> SignalRecord:
    value = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(value) > MAX_SIGNAL_BYTES:
        raise SignalError(
            f"the signal would be {len(value)} bytes, over the {MAX_SIGNAL_BYTES} a signal topic accepts by "
            "default: split the keys over several Backfills"
        )
    return SignalRecord(topic_prefix.encode("utf-8"), value, ((SIGNAL_HEADER, backfill.encode("utf-8")),))


def execute_snapshot(
    id_: str, topic_prefix: str, data_collection: str, key_column: str, keys: Sequence[str], backfill: str = ""
) -> SignalRecord:
    """The incremental `execute-snapshot` signal limited to the rows whose key column is one of `keys`."""
    body = {
        "id": id_,
        "type": "execute-snapshot",
        "data": {
            "data-collections": [data_collection],
            "type": "incremental",
            "additional-conditions": [{"data-collection": data_collection, "filter": key_filter(key_column, keys)}],
        },
    }
    return _record(topic_prefix, body, backfill)


def pause_snapshot(id_: str, topic_prefix: str, backfill: str = "") -> SignalRecord:
    """`pause-snapshot` (spec.suspend): Debezium pauses the connector's running incremental snapshot."""
    return _record(topic_prefix, {"id": id_, "type": "pause-snapshot", "data": {"type": "incremental"}}, backfill)


def resume_snapshot(id_: str, topic_prefix: str, backfill: str = "") -> SignalRecord:
    """`resume-snapshot` (spec.suspend back to false)."""
    return _record(topic_prefix, {"id": id_, "type": "resume-snapshot", "data": {"type": "incremental"}}, backfill)


def stop_snapshot(id_: str, topic_prefix: str, data_collection: str, backfill: str = "") -> SignalRecord:
    """`stop-snapshot` of one table (the Backfill was deleted before the snapshot completed)."""
    body = {"id": id_, "type": "stop-snapshot", "data": {"data-collections": [data_collection], "type": "incremental"}}
    return _record(topic_prefix, body, backfill)


# ------------------------------------------------------------------------------------------ notifications


@dataclass(frozen=True)
class Notification:
    """One Debezium notification (`id`, `aggregate_type`, `type`, `additional_data`, `timestamp`)."""

    id: str | None
    aggregate_type: str
    type: str
    additional_data: Mapping[str, str] = field(default_factory=dict)
    timestamp_ms: int | None = None


def parse_notification(value: bytes | str | None) -> Notification | None:
    """A notification record's value, plain JSON or in the JsonConverter envelope (`{"schema","payload"}`);
    None for anything that is not a notification."""
    if value is None:
        return None
    try:
        body = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(body, dict) and isinstance(body.get("payload"), dict) and "schema" in body:
        body = body["payload"]
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        return None
    extra = body.get("additional_data") or body.get("additionalData") or {}
    timestamp = body.get("timestamp")
    try:
        timestamp_ms = int(timestamp) if timestamp is not None else None
    except (TypeError, ValueError):
        timestamp_ms = None
    return Notification(
        id=str(body["id"]) if body.get("id") is not None else None,
        aggregate_type=str(body.get("aggregate_type") or body.get("aggregateType") or ""),
        type=body["type"].upper(),
        additional_data={str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {},
        timestamp_ms=timestamp_ms,
    )


@dataclass(frozen=True)
class SnapshotProgress:
    """What the notifications of one signal said so far."""

    last: str | None = None
    at_ms: int | None = None
    rows_scanned: int | None = None
    completed: bool = False
    #: Why the snapshot failed (ABORTED, or a table scan that did not succeed); None while it has not.
    failure: str | None = None
    seen: int = 0


def follow(progress: SnapshotProgress, notification: Notification, id_: str) -> SnapshotProgress:
    """Fold one notification into the progress of signal `id_`; others' notifications change nothing."""
    if notification.id != id_ or notification.type not in NOTIFICATION_TYPES:
        return progress
    data = notification.additional_data
    updated = replace(progress, last=notification.type, at_ms=notification.timestamp_ms, seen=progress.seen + 1)
    if notification.type == "TABLE_SCAN_COMPLETED":
        status = (data.get("status") or "SUCCEEDED").upper()
        rows = data.get("total_rows_scanned")
        if rows is not None and rows.isdigit():
            updated = replace(updated, rows_scanned=(progress.rows_scanned or 0) + int(rows))
        if status not in SCAN_SUCCEEDED:
            table = data.get("scanned_collection") or data.get("data_collection") or "the table"
            updated = replace(updated, failure=f"the scan of {table} ended with status {status}")
    elif notification.type == "ABORTED":
        updated = replace(updated, failure="the connector aborted the incremental snapshot")
    elif notification.type == "COMPLETED":
        updated = replace(updated, completed=True)
    return updated


def follow_all(progress: SnapshotProgress, notifications: Iterable[Notification], id_: str) -> SnapshotProgress:
    for notification in notifications:
        progress = follow(progress, notification, id_)
    return progress


# ------------------------------------------------------------------------------------------ I/O

# Debezium's signal and notification topics are read and written through the Kafka door (kafka_admin):
# this module decides what to send and what a notification means, and opens no client itself.
Read = kafka_admin.TopicRead


def send(bootstrap: str, config: Mapping[str, str], topic: str, record: SignalRecord) -> int:
    """Produce `record` to partition 0 of the signal topic (the only one Debezium reads); its offset."""
    return kafka_admin.produce_one(
        bootstrap,
        config,
        topic,
        key=record.key,
        value=record.value,
        headers=list(record.headers),
        partition=0,
        client_id="reprise-operator-signal",
    )


def read_topic(
    bootstrap: str,
    config: Mapping[str, str],
    topic: str,
    since_ms: int | None = None,
    from_offsets: Mapping[int, int] | None = None,
) -> Read:
    """Every record of `topic` from `from_offsets` (else from the first record at or after `since_ms`, else
    from the beginning) up to the end offsets as of the call (see `kafka_admin.read_topic`)."""
    return kafka_admin.read_topic(
        bootstrap, config, topic, since_ms=since_ms, from_offsets=from_offsets, client_id="reprise-operator-debezium"
    )


def signal_sent(bootstrap: str, config: Mapping[str, str], topic: str, id_: str, since_ms: int) -> bool:
    """Whether an execute-snapshot signal with id `id_` is in the signal topic since `since_ms`."""
    for _, _, _, value in read_topic(bootstrap, config, topic, since_ms=since_ms).records:
        try:
            body = json.loads(value or b"")
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(body, dict) and body.get("id") == id_ and body.get("type") == "execute-snapshot":
            return True
    return False


def read_notifications(
    bootstrap: str, config: Mapping[str, str], topic: str, since_ms: int, from_offsets: Mapping[int, int] | None = None
) -> tuple[list[Notification], Mapping[int, int]]:
    """The notifications written since `since_ms` (or after `from_offsets`), and where to continue."""
    read = read_topic(bootstrap, config, topic, since_ms=since_ms, from_offsets=from_offsets)
    found = [n for n in (parse_notification(value) for _, _, _, value in read.records) if n is not None]
    return found, read.next_offsets
