"""The handover topic's wire format: record keys and JSON values, tombstones, and the decoding of malformed
records. Pure (the Kafka calls are in `handover_topic`).

HANDOVER.md section 2 is the specification. Every record is keyed `["<replay id>","<kind>"]` or
`["<replay id>","<kind>","<topic>",<partition>]` (compact JSON) and carries a compact JSON object with `v`
(the format version), `kind` and `replay_id`; a null value (tombstone) deletes the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from .json_limits import MAX_DEPTH, MAX_RECORD_KEY_BYTES, MAX_RECORD_VALUE_BYTES, loads, too_deep

FORMAT_VERSION = 1
Mode = Literal["Parallel", "Handover", "Drain"]
MODES: tuple[str, ...] = ("Parallel", "Handover", "Drain")
RecordKind = Literal["replay", "start", "handover", "guard", "ack", "progress", "result"]
TopicPartitionKey = tuple[str, int]
RECORD_KINDS: tuple[str, ...] = ("replay", "start", "handover", "guard", "ack", "progress", "result")
#: Kinds keyed by the replay alone; the others are keyed by replay, topic and partition.
REPLAY_KINDS: tuple[str, ...] = ("replay", "result")


class HandoverFormatError(ValueError):
    """A handover-topic record that does not follow the format; `code` names the reason (see `decode`)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ReplayInfo:
    """`replay` record: what the replay is. Written once, in the bootstrap transaction."""

    replay_id: str
    mode: str
    replay_group: str
    live_group: str | None
    topics: tuple[str, ...]
    #: The replay's filter with its key set inlined: the guard skips exactly the records it matches.
    filter: Mapping[str, Any]
    at_ms: int = 0


@dataclass(frozen=True)
class StartInfo:
    """`start` record: S(p), and the end bound when there is one. Written in the bootstrap transaction."""

    replay_id: str
    topic: str
    partition: int
    offset: int
    end_offset: int | None = None
    end_timestamp_ms: int | None = None
    clamped: bool = False
    at_ms: int = 0


@dataclass(frozen=True)
class HandoverInfo:
    """`handover` record: H(p). The replay processed every record below it and processes none from it on."""

    replay_id: str
    topic: str
    partition: int
    offset: int
    reason: str
    by: str = "replay"
    at_ms: int = 0


@dataclass(frozen=True)
class GuardInfo:
    """`guard` record: the live side is skipping p (advisory, for people and the operator's status)."""

    replay_id: str
    topic: str
    partition: int
    first_skipped: int | None
    seen_until: int | None
    member: str = ""
    at_ms: int = 0
    #: Set when the guard cannot follow the replay on this partition (it skips nothing then): a reason code.
    problem: str | None = None


@dataclass(frozen=True)
class AckInfo:
    """`ack` record: the live group's committed offset of p is >= H, with no pending skip: p is handed over."""

    replay_id: str
    topic: str
    partition: int
    offset: int
    committed: int
    member: str = ""
    at_ms: int = 0


@dataclass(frozen=True)
class ProgressInfo:
    """`progress` record: the replay group's committed position of p (advisory, for the operator's status).

    Published by the replica that owns p every few seconds while it moves, so the operator follows every
    replay on a cluster by tailing this topic instead of asking Kafka for each replay group's offsets."""

    replay_id: str
    topic: str
    partition: int
    position: int
    at_end: bool = False
    member: str = ""
    at_ms: int = 0


@dataclass(frozen=True)
class ResultInfo:
    """`result` record: the outcome of a run-to-completion worker (a Backfill Job)."""

    replay_id: str
    body: Mapping[str, Any]
    at_ms: int = 0


HandoverRecord = ReplayInfo | StartInfo | HandoverInfo | GuardInfo | AckInfo | ProgressInfo | ResultInfo


@dataclass(frozen=True)
class RecordKey:
    replay_id: str
    kind: str
    topic: str | None = None
    partition: int | None = None


def encode_key(replay_id: str, kind: RecordKind, topic: str | None = None, partition: int | None = None) -> bytes:
    """`["<replay id>","<kind>"]` or `["<replay id>","<kind>","<topic>",<partition>]`, compact JSON.

    JSON because replay ids contain `/` (the operator's are `namespace/name/uid`); every language can
    build and parse it, and the compacted topic keeps one value per such key."""
    parts: list[Any] = [replay_id, kind]
    if topic is not None:
        parts += [topic, int(partition if partition is not None else -1)]
    return json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_key(raw: bytes | str | None) -> RecordKey:
    """The key of a handover-topic message; `HandoverFormatError` (code `malformed-key`) when it is not one,
    also when it is longer than `MAX_RECORD_KEY_BYTES` or nested deeper than `MAX_DEPTH` (HANDOVER.md 2)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    parts: Any = None
    if data is not None and len(data) <= MAX_RECORD_KEY_BYTES and not too_deep(data):
        try:
            parts = loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            # Every way a key fails to parse is the protocol's malformed-key, never an exception of the parser's.
            parts = None
    if not isinstance(parts, list) or len(parts) not in (2, 4) or not all(isinstance(p, str) for p in parts[:2]):
        raise HandoverFormatError(f"not a handover key: {_shown(raw)}", code="malformed-key")
    if len(parts) == 4:
        if not isinstance(parts[2], str) or type(parts[3]) is not int:
            raise HandoverFormatError(f"not a handover key: {_shown(raw)}", code="malformed-key")
        return RecordKey(parts[0], parts[1], parts[2], parts[3])
    return RecordKey(parts[0], parts[1])


def _key_of(record: HandoverRecord) -> bytes:
    if isinstance(record, ReplayInfo):
        return encode_key(record.replay_id, "replay")
    if isinstance(record, ResultInfo):
        return encode_key(record.replay_id, "result")
    kind: RecordKind = {
        StartInfo: "start",
        HandoverInfo: "handover",
        GuardInfo: "guard",
        AckInfo: "ack",
        ProgressInfo: "progress",
    }[type(record)]  # type: ignore[assignment]
    return encode_key(record.replay_id, kind, record.topic, record.partition)  # type: ignore[union-attr]


def encode(record: HandoverRecord) -> tuple[bytes, bytes]:
    """(key, value) of a record; the value is compact JSON with `v` (format version) and `kind`."""
    if isinstance(record, ReplayInfo):
        body: dict[str, Any] = {
            "kind": "replay",
            "mode": record.mode,
            "replay_group": record.replay_group,
            "live_group": record.live_group,
            "topics": list(record.topics),
            "filter": dict(record.filter),
        }
    elif isinstance(record, StartInfo):
        body = {
            "kind": "start",
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "end_offset": record.end_offset,
            "end_timestamp_ms": record.end_timestamp_ms,
            "clamped": record.clamped,
        }
    elif isinstance(record, HandoverInfo):
        body = {
            "kind": "handover",
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "reason": record.reason,
            "by": record.by,
        }
    elif isinstance(record, GuardInfo):
        body = {
            "kind": "guard",
            "topic": record.topic,
            "partition": record.partition,
            "first_skipped": record.first_skipped,
            "seen_until": record.seen_until,
            "member": record.member,
        }
        if record.problem is not None:
            body["problem"] = record.problem
    elif isinstance(record, AckInfo):
        body = {
            "kind": "ack",
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "committed": record.committed,
            "member": record.member,
        }
    elif isinstance(record, ProgressInfo):
        body = {
            "kind": "progress",
            "topic": record.topic,
            "partition": record.partition,
            "position": record.position,
            "at_end": record.at_end,
            "member": record.member,
        }
    else:
        body = {"kind": "result", "result": dict(record.body)}
    value = {"v": FORMAT_VERSION, "replay_id": record.replay_id, **body, "at_ms": record.at_ms}
    key = _key_of(record)
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    _refuse_unreadable(record, key, raw)
    return key, raw


def _refuse_unreadable(record: HandoverRecord, key: bytes, value: bytes) -> None:
    """A writer never publishes what every reader would refuse (HANDOVER.md section 2, "Limits")."""
    kind = type(record).__name__.removesuffix("Info").lower()
    if len(key) > MAX_RECORD_KEY_BYTES:
        raise HandoverFormatError(
            f"the {kind} record of replay {record.replay_id!r} has a key of {len(key)} bytes, more than the"
            f" handover topic's limit of {MAX_RECORD_KEY_BYTES}: shorten the replay id or the topic name",
            code="malformed-key",
        )
    if len(value) > MAX_RECORD_VALUE_BYTES:
        raise HandoverFormatError(
            f"the {kind} record of replay {record.replay_id!r} is {len(value)} bytes, more than the handover"
            f" topic's limit of {MAX_RECORD_VALUE_BYTES}: a replay record carries its filter's keys inline, so"
            " a filter with that many keys cannot be published (replay fewer keys at a time)",
            code="too-large",
        )
    if too_deep(value):
        raise HandoverFormatError(
            f"the {kind} record of replay {record.replay_id!r} is nested deeper than {MAX_DEPTH}: a filter's"
            " values (equals, in) must be shallower",
            code="malformed-value",
        )


def decode(raw_key: bytes | str | None, raw_value: bytes | str | None) -> tuple[RecordKey, HandoverRecord | None]:
    """The record of one handover-topic message; None for a tombstone. `HandoverFormatError` says why a
    record is malformed, with a `code` that is the same in every language (checked in this order):
    `malformed-key` (also a key above `MAX_RECORD_KEY_BYTES` or `MAX_DEPTH`), `too-large` (a value above
    `MAX_RECORD_VALUE_BYTES`), `malformed-value` (nested deeper than `MAX_DEPTH`, not JSON, not a JSON
    object, or `v` not an integer), `newer-version`
    (`v` above FORMAT_VERSION), `kind-mismatch` (the value's `kind` is not the key's), `unknown-kind`,
    `key-mismatch` (the key has the wrong shape for its kind, or the value names another partition),
    `bad-field` (a field is missing or has the wrong JSON type; unknown fields are ignored)."""
    key = decode_key(raw_key)
    if raw_value is None:
        return key, None
    data = raw_value.encode("utf-8", "surrogatepass") if isinstance(raw_value, str) else raw_value
    if len(data) > MAX_RECORD_VALUE_BYTES:
        raise HandoverFormatError(
            f"value of {key} is {len(data)} bytes, more than the limit of {MAX_RECORD_VALUE_BYTES}", code="too-large"
        )
    if too_deep(data):
        # The same code as any other value that is not JSON: a value can be both, and every port must agree.
        raise HandoverFormatError(f"value of {key} is nested deeper than {MAX_DEPTH}", code="malformed-value")
    try:
        v = loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise HandoverFormatError(f"value of {key} is not JSON", code="malformed-value") from None
    if not isinstance(v, dict) or not _is_int(v.get("v", 0)):
        raise HandoverFormatError(f"value of {key} is not a handover record", code="malformed-value")
    if v.get("v", 0) > FORMAT_VERSION:
        raise HandoverFormatError(
            f"{key} has format version {v.get('v')}, newer than {FORMAT_VERSION}", code="newer-version"
        )
    if v.get("kind") != key.kind:
        raise HandoverFormatError(f"value of {key} does not say kind {key.kind!r}", code="kind-mismatch")
    if key.kind not in RECORD_KINDS:
        raise HandoverFormatError(f"unknown record kind {key.kind!r}", code="unknown-kind")
    if (key.topic is None) != (key.kind in REPLAY_KINDS):
        raise HandoverFormatError(f"a {key.kind} record has no key of this shape: {key}", code="key-mismatch")
    rid = key.replay_id
    try:
        at = _field(v, "at_ms", int, 0)
        if key.kind == "replay":
            topics = _field(v, "topics", list, [])
            if not all(isinstance(t, str) for t in topics):
                raise TypeError("topics")
            return key, ReplayInfo(
                rid,
                _field(v, "mode", str),
                _field(v, "replay_group", str),
                _field(v, "live_group", str, None),
                tuple(topics),
                _field(v, "filter", dict, {}),
                at,
            )
        if key.kind == "result":
            return key, ResultInfo(rid, _field(v, "result", dict, {}), at)
        t, p = _field(v, "topic", str), _field(v, "partition", int)
        if (t, p) != (key.topic, key.partition):
            raise HandoverFormatError(f"value of {key} names {t}[{p}]", code="key-mismatch")
        if key.kind == "start":
            return key, StartInfo(
                rid,
                t,
                p,
                _field(v, "offset", int),
                _field(v, "end_offset", int, None),
                _field(v, "end_timestamp_ms", int, None),
                _field(v, "clamped", bool, False),
                at,
            )
        if key.kind == "handover":
            return key, HandoverInfo(
                rid, t, p, _field(v, "offset", int), _field(v, "reason", str, ""), _field(v, "by", str, "replay"), at
            )
        if key.kind == "guard":
            return key, GuardInfo(
                rid,
                t,
                p,
                _field(v, "first_skipped", int, None),
                _field(v, "seen_until", int, None),
                _field(v, "member", str, ""),
                at,
                _field(v, "problem", str, None),
            )
        if key.kind == "progress":
            return key, ProgressInfo(
                rid,
                t,
                p,
                _field(v, "position", int),
                _field(v, "at_end", bool, False),
                _field(v, "member", str, ""),
                at,
            )
        return key, AckInfo(
            rid, t, p, _field(v, "offset", int), _field(v, "committed", int), _field(v, "member", str, ""), at
        )
    except (KeyError, TypeError) as exc:
        raise HandoverFormatError(f"value of {key} is missing or has a bad field: {exc}", code="bad-field") from None


_REQUIRED = object()


def _shown(raw: bytes | str | None) -> str:
    """A key for a message, cut at 200 characters: a key may be megabytes, and messages reach the logs."""
    if raw is None or len(raw) <= 200:
        return repr(raw)
    return f"{raw[:200]!r}... ({len(raw)} bytes)"


def _is_int(value: Any) -> bool:
    return type(value) is int  # a JSON integer: not true/false, not 1.5


def _field(body: Mapping[str, Any], name: str, kind: type, default: Any = _REQUIRED) -> Any:
    """A field of a record value with its JSON type; absent (or null, for an optional field) gives `default`."""
    value = body.get(name)
    if value is None:
        if default is _REQUIRED:
            raise KeyError(name)
        return default
    if not (_is_int(value) if kind is int else isinstance(value, kind)):
        raise TypeError(f"{name} is not a JSON {kind.__name__}")
    return value
