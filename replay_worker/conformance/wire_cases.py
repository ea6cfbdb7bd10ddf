"""wire.json: the handover topic's records as bytes (HANDOVER.md section 2).

`encode`: a record (its fields, in normal form) and the exact key and value bytes the reference writes.
`decode`: raw key and value bytes and either the record in normal form (`record`, null for a tombstone) or
the stable `error` code of a malformed record.

The normal form of a record is the JSON object of its value with every field present (defaults filled in)
and `v` left out: what `encode` writes for the decoded record.
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.wire import (
    AckInfo,
    GuardInfo,
    HandoverFormatError,
    HandoverInfo,
    HandoverRecord,
    ProgressInfo,
    ReplayInfo,
    ResultInfo,
    StartInfo,
    decode,
    encode,
)
from ..protocol.json_limits import MAX_DEPTH, MAX_INTEGER_DIGITS, MAX_RECORD_KEY_BYTES, MAX_RECORD_VALUE_BYTES
from .encoding import Repeated, to_json

RID = "shop/orders-fix/3f2a9c1e-77b0-4d0e-9a51-0c6f1f7a2b10"


def normal_form(record: HandoverRecord) -> dict[str, Any]:
    body = json.loads(encode(record)[1])
    body.pop("v")
    return body


def records() -> list[tuple[str, HandoverRecord]]:
    flt = {"headers": {"source": ["billing"]}, "json": [{"path": "status", "equals": "paid"}], "keys": ["a", "b"]}
    return [
        (
            "replay, Handover",
            ReplayInfo(RID, "Handover", "reprise-shop-orders-fix", "orders-service", ("orders",), flt, 1717243200000),
        ),
        (
            "replay, Parallel without live group, two topics, empty filter",
            ReplayInfo(RID, "Parallel", "reprise-shop-orders-fix", None, ("orders", "refunds"), {}, 1717243200001),
        ),
        ("start, unbounded", StartInfo(RID, "orders", 0, 1200, None, None, False, 1717243200002)),
        ("start, bounded by offset, clamped", StartInfo(RID, "orders", 3, 0, 5000, None, True, 1717243200003)),
        (
            "start, bounded by a future time",
            StartInfo(RID, "orders", 11, 77, None, 1893456000000, False, 1717243200004),
        ),
        ("handover by the replay", HandoverInfo(RID, "orders", 0, 4711, "caught-up", "replay", 1717243200005)),
        ("handover forced by the operator", HandoverInfo(RID, "orders", 1, 9, "forced", "operator", 1717243200006)),
        ("guard, skipping", GuardInfo(RID, "orders", 0, 1300, 1450, "orders-service-7d9f-abcde", 1717243200007)),
        (
            "guard, with a problem",
            GuardInfo(
                RID, "orders", 2, None, 88, "orders-service-7d9f-abcde", 1717243200008, "unreadable-handover-record"
            ),
        ),
        ("ack", AckInfo(RID, "orders", 0, 4711, 4800, "orders-service-7d9f-abcde", 1717243200009)),
        ("progress", ProgressInfo(RID, "orders", 0, 3000, False, "reprise-shop-orders-fix-0", 1717243200010)),
        ("progress at the end", ProgressInfo(RID, "orders", 5, 42, True, "reprise-shop-orders-fix-1", 1717243200011)),
        ("result", ResultInfo("shop/backfill-a/1b2c", {"produced": 12, "missing_keys": ["k9"]}, 1717243200012)),
        ("non-ASCII and quotes in names", StartInfo('ns/naïve "q"/u', "tópico", 0, 1, None, None, False, 0)),
    ]


def encode_cases() -> list[dict[str, Any]]:
    cases = []
    for name, record in records():
        key, value = encode(record)
        cases.append({"name": name, "record": normal_form(record), "key": to_json(key), "value": to_json(value)})
    return cases


def _decode_case(name: str, key: bytes | None, value: bytes | None, note: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if note:
        body["note"] = note
    body.update({"key": to_json(key), "value": to_json(value)})
    try:
        decoded_key, record = decode(key, value)
    except HandoverFormatError as exc:
        body["error"] = exc.code
        return body
    body["parsed_key"] = {
        "replay_id": decoded_key.replay_id,
        "kind": decoded_key.kind,
        "topic": decoded_key.topic,
        "partition": decoded_key.partition,
    }
    body["record"] = None if record is None else normal_form(record)
    return body


def decode_cases() -> list[dict[str, Any]]:
    d = _decode_case
    k_start = b'["r1","start","orders",0]'
    k_replay = b'["r1","replay"]'
    start = b'{"v":1,"replay_id":"r1","kind":"start","topic":"orders","partition":0,"offset":5'
    cases = [d(f"round trip: {name}", *encode(record)) for name, record in records()]
    cases += [
        # tombstones
        d("tombstone of a partition record", k_start, None),
        d("tombstone of a replay record", k_replay, None),
        d(
            "tombstone of an unknown kind",
            b'["r1","lease","orders",0]',
            None,
            note="a tombstone deletes whatever the key held",
        ),
        # keys
        d("key not JSON", b"r1/start/orders/0", start + b"}"),
        d("key null", None, start + b"}"),
        d("key a JSON object", b'{"replay":"r1"}', start + b"}"),
        d("key with three elements", b'["r1","start","orders"]', start + b"}"),
        d("key with five elements", b'["r1","start","orders",0,1]', start + b"}"),
        d("key with a string partition", b'["r1","start","orders","0"]', start + b"}"),
        d("key with a boolean partition", b'["r1","start","orders",true]', start + b"}"),
        d("key with a fractional partition", b'["r1","start","orders",0.5]', start + b"}"),
        d("key with a numeric replay id", b'[1,"replay"]', b'{"v":1,"kind":"replay"}'),
        d("key not UTF-8", b'["r\xff","replay"]', None),
        d(
            "key with spaces (not compact, still readable)",
            b'["r1", "start", "orders", 0]',
            start + b"}",
            note="readers accept it; writers must write the compact form, compaction compares bytes",
        ),
        # values
        d("value not JSON", k_start, b"offset=5"),
        d("value not UTF-8", k_start, b'{"v":1,"kind":"start","topic":"orders","partition":0,"offset":5,"x":"\xff"}'),
        d("value a JSON array", k_start, b"[1,2]"),
        d("value with a string v", k_start, start.replace(b'"v":1', b'"v":"1"') + b"}"),
        d("value without v (read as version 1 and older)", k_start, start.replace(b'"v":1,', b"") + b"}"),
        d("newer format version", k_start, start.replace(b'"v":1', b'"v":2') + b"}"),
        d("newer format version of a tombstoned kind", b'["r1","lease","orders",0]', b'{"v":2,"kind":"lease"}'),
        d("kind differs from the key", k_start, start.replace(b'"kind":"start"', b'"kind":"handover"') + b"}"),
        d("kind missing", k_start, start.replace(b'"kind":"start",', b"") + b"}"),
        d("unknown kind", b'["r1","lease","orders",0]', b'{"v":1,"kind":"lease","topic":"orders","partition":0}'),
        d("partition kind under a replay key", b'["r1","start"]', b'{"v":1,"kind":"start","offset":5}'),
        d(
            "replay kind under a partition key",
            b'["r1","replay","orders",0]',
            b'{"v":1,"kind":"replay","mode":"Handover","replay_group":"g"}',
        ),
        d("value names another partition", k_start, start.replace(b'"partition":0', b'"partition":1') + b"}"),
        d("value names another topic", k_start, start.replace(b'"topic":"orders"', b'"topic":"refunds"') + b"}"),
        d("unknown fields are ignored", k_start, start + b',"lease_ms":30000,"owner":{"a":1}}'),
        d(
            "optional fields absent get their defaults",
            k_start,
            b'{"kind":"start","topic":"orders","partition":0,"offset":5}',
        ),
        d(
            "optional fields null get their defaults",
            k_start,
            start + b',"end_offset":null,"end_timestamp_ms":null,"clamped":null,"at_ms":null}',
        ),
        d("required field missing", k_start, start.replace(b',"offset":5', b"") + b"}"),
        d("required field null", k_start, start.replace(b'"offset":5', b'"offset":null') + b"}"),
        d("integer field as a string", k_start, start.replace(b'"offset":5', b'"offset":"5"') + b"}"),
        d("integer field as a fraction", k_start, start.replace(b'"offset":5', b'"offset":5.5') + b"}"),
        d(
            "integer field as 5.0",
            k_start,
            start.replace(b'"offset":5', b'"offset":5.0') + b"}",
            note="integers are JSON integers: no fraction part, no exponent",
        ),
        d("integer field as a boolean", k_start, start.replace(b'"offset":5', b'"offset":true') + b"}"),
        d("boolean field as a number", k_start, start + b',"clamped":1}'),
        d("at_ms as a string", k_start, start + b',"at_ms":"17"}'),
        d("replay: mode missing", k_replay, b'{"v":1,"kind":"replay","replay_group":"g"}'),
        d(
            "replay: topics not strings",
            k_replay,
            b'{"v":1,"kind":"replay","mode":"Handover","replay_group":"g","topics":[1]}',
        ),
        d(
            "replay: filter not an object",
            k_replay,
            b'{"v":1,"kind":"replay","mode":"Handover","replay_group":"g","filter":["x"]}',
        ),
        d(
            "replay: an unknown mode is read as it is",
            k_replay,
            b'{"v":1,"kind":"replay","mode":"Mirror","replay_group":"g","live_group":"l"}',
            note="the guard acts only for mode Handover",
        ),
        d(
            "replay: a filter the reader cannot evaluate is still a readable record",
            k_replay,
            b'{"v":1,"kind":"replay","mode":"Handover","replay_group":"g","live_group":"l","filter":{"regex":"x"}}',
            note="the guard then skips nothing for this replay (guard_traces.json)",
        ),
        d(
            "guard: first_skipped null",
            b'["r1","guard","orders",0]',
            b'{"v":1,"kind":"guard","topic":"orders","partition":0,"first_skipped":null,"seen_until":3}',
        ),
        d(
            "ack: committed missing",
            b'["r1","ack","orders",0]',
            b'{"v":1,"kind":"ack","topic":"orders","partition":0,"offset":3}',
        ),
        d("result: result not an object", b'["r1","result"]', b'{"v":1,"kind":"result","result":[1]}'),
    ]
    return cases + limit_cases()


def limit_cases() -> list[dict[str, Any]]:
    """The size and nesting limits (HANDOVER.md section 2, "Limits"), at the limit and one past it."""
    d = _decode_case
    k_start = b'["r1","start","orders",0]'
    start = '{"v":1,"replay_id":"r1","kind":"start","topic":"orders","partition":0,"offset":5'
    # A key of exactly the limit: the topic name fills it (the value must name the same topic).
    key_head, key_tail = '["r1","start","', '",0]'
    long_topic = MAX_RECORD_KEY_BYTES - len(key_head) - len(key_tail)

    def long_key(topic_length: int) -> tuple[Repeated, Repeated]:
        return (
            Repeated((key_head, 1), ("t", topic_length), (key_tail, 1)),
            Repeated(('{"v":1,"kind":"start","topic":"', 1), ("t", topic_length), ('","partition":0,"offset":5}', 1)),
        )

    def padded(size: int) -> Repeated:
        head, tail = start + ',"pad":"', '"}'
        return Repeated((head, 1), ("x", size - len(head) - len(tail)), (tail, 1))

    def nested(depth: int, head: str = start, closed: bool = True) -> Repeated:
        """The start record with a member `deep` at `depth` (the record itself is depth 1)."""
        levels = depth - 1
        if not closed:
            return Repeated((head + ',"deep":', 1), ("[", levels))
        return Repeated((head + ',"deep":', 1), ("[", levels), ("]", levels), ("}", 1))

    return [
        d(f"key of {MAX_RECORD_KEY_BYTES} bytes (the limit)", *long_key(long_topic)),
        d(f"key of {MAX_RECORD_KEY_BYTES + 1} bytes", *long_key(long_topic + 1)),
        d(
            "key nested 5000 deep, not closed",
            Repeated(("[", 5000)),
            start.encode() + b"}",
            note="the review's attack A3: it broke the Python reader and hid the records after it",
        ),
        d("key nested 5000 deep", Repeated(("[", 5000), ("]", 5000)), None, note="a tombstone's key is read too"),
        d(f"key nested {MAX_DEPTH + 1} deep", Repeated(("[", MAX_DEPTH + 1), ("]", MAX_DEPTH + 1)), None),
        d(f"value of {MAX_RECORD_VALUE_BYTES} bytes (the limit)", k_start, padded(MAX_RECORD_VALUE_BYTES)),
        d(f"value of {MAX_RECORD_VALUE_BYTES + 1} bytes", k_start, padded(MAX_RECORD_VALUE_BYTES + 1)),
        d("value of 10 MB", k_start, padded(10_000_000)),
        d(
            f"value of {MAX_RECORD_VALUE_BYTES + 1} bytes, not JSON",
            k_start,
            Repeated(("x", MAX_RECORD_VALUE_BYTES + 1)),
            note="the size is checked before the value is parsed",
        ),
        d(f"value nested {MAX_DEPTH} deep (the limit)", k_start, nested(MAX_DEPTH)),
        d(f"value nested {MAX_DEPTH + 1} deep", k_start, nested(MAX_DEPTH + 1)),
        d(
            f"value nested {MAX_DEPTH} deep in objects",
            k_start,
            Repeated((start + ',"deep":', 1), ('{"a":', MAX_DEPTH - 1), ("1", 1), ("}", MAX_DEPTH)),
        ),
        d(
            f"value nested {MAX_DEPTH + 1} deep in objects",
            k_start,
            Repeated((start + ',"deep":', 1), ('{"a":', MAX_DEPTH), ("1", 1), ("}", MAX_DEPTH + 1)),
        ),
        d("value nested 5000 deep", k_start, nested(5000)),
        d("value nested 5000 deep, not closed", k_start, nested(5000, closed=False)),
        d(
            f"value nested {MAX_DEPTH + 1} deep with a newer version",
            k_start,
            nested(MAX_DEPTH + 1, start.replace('"v":1', '"v":2')),
            note="the depth is checked before anything in the value is read",
        ),
        d(
            f"an unknown field with an integer of {MAX_INTEGER_DIGITS} digits (the limit)",
            k_start,
            Repeated((start + ',"big":', 1), ("7", MAX_INTEGER_DIGITS), ("}", 1)),
        ),
        d(
            f"an unknown field with an integer of {MAX_INTEGER_DIGITS + 1} digits",
            k_start,
            Repeated((start + ',"big":', 1), ("7", MAX_INTEGER_DIGITS + 1), ("}", 1)),
        ),
        d(
            "brackets inside strings are not nesting",
            k_start,
            Repeated((start + ',"s":"', 1), ("[{", 5000), ('\\"', 1), ("]}", 5000), ('"}', 1)),
        ),
        d(
            f"an escaped backslash ends a string: the brackets after it nest, {MAX_DEPTH + 1} deep",
            k_start,
            nested(MAX_DEPTH + 1, start + ',"s":"\\\\"'),
        ),
    ]


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "wire",
        "spec": "replay_worker/HANDOVER.md section 2",
        "encode": encode_cases(),
        "decode": decode_cases(),
    }
