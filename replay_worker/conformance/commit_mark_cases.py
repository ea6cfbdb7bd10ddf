"""commit_marks.json: the marks both groups attach to committed offsets' metadata (HANDOVER.md section 3).

`encode`: mark fields, the exact metadata string, and `committed`, the string as stored (the mark and one NUL). `decode`: a metadata string (null when the commit has
none) and the `result`: `none` (no mark: empty, or someone else's metadata), `mark` with its fields, or
`unusable` with a `reason` (`newer-version`, `malformed`) for a Reprise mark this reader cannot use.
"""

from __future__ import annotations

from typing import Any

from ..protocol.commit_marks import CommitMark
from ..protocol.json_limits import MAX_DEPTH, MAX_INTEGER_DIGITS


def _fields(mark: CommitMark) -> dict[str, Any]:
    return {
        "replay": mark.replay_id,
        "finished": mark.finished,
        "skip_from": mark.skip_from,
        "reread_until": mark.reread_until,
    }


def encode_cases() -> list[dict[str, Any]]:
    marks = [
        ("replay group: finished", CommitMark("shop/orders-fix/1a2b", finished="caught-up")),
        ("live group: skip_from", CommitMark("shop/orders-fix/1a2b", skip_from=1300)),
        ("live group: reread_until", CommitMark("shop/orders-fix/1a2b", reread_until=1450)),
        ("live group: skip_from 0", CommitMark("r", skip_from=0)),
        ("non-ASCII replay id", CommitMark("ns/zürich/1", finished="end-of-partition")),
        ("every field (not written by the reference, readable)", CommitMark("r", "forced", 3, 9)),
    ]
    return [
        {"name": name, "mark": _fields(mark), "metadata": mark.encode(), "committed": mark.committed_metadata()}
        for name, mark in marks
    ]


def _decode(name: str, metadata: str | None, note: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if note:
        body["note"] = note
    body["metadata"] = metadata
    mark = CommitMark.decode(metadata)
    if mark is None:
        body["result"] = "none"
    elif not mark.usable:
        body.update({"result": "unusable", "reason": mark.problem})
    else:
        body.update({"result": "mark", "mark": _fields(mark)})
    return body


def decode_cases() -> list[dict[str, Any]]:
    d = _decode
    cases = [d(f"round trip: {case['name']}", case["metadata"]) for case in encode_cases()]
    cases += [
        d("no metadata", None),
        d("empty metadata", ""),
        d("someone else's text", "committed by billing-worker 7"),
        d("someone else's JSON object", '{"owner":"billing","batch":7}'),
        d("someone else's JSON array", '["reprise",1]'),
        d(
            "JSON with leading whitespace is not a mark",
            ' {"reprise":1,"replay":"r","skip_from":3}',
            note="a mark starts with {",
        ),
        d("text starting with { that is not JSON", "{not json"),
        d("unknown fields are ignored", '{"reprise":1,"replay":"r","skip_from":3,"by":"guard-2"}'),
        d("spaces inside are fine", '{ "reprise": 1, "replay": "r", "reread_until": 9 }'),
        d("no fields: every record below the offset was processed", '{"reprise":1,"replay":"r"}'),
        d(
            "newer format version",
            '{"reprise":2,"replay":"r","skip_from":3}',
            note="the guard cannot know what a newer guard skipped below the offset",
        ),
        d("newer format version without a replay", '{"reprise":2,"lease":{"until":9}}'),
        d("format version as a string", '{"reprise":"1","replay":"r","skip_from":3}'),
        d("format version 0", '{"reprise":0,"replay":"r"}'),
        d("format version null", '{"reprise":null,"replay":"r"}'),
        d("replay missing", '{"reprise":1,"skip_from":3}'),
        d("replay not a string", '{"reprise":1,"replay":7,"skip_from":3}'),
        d("skip_from a string", '{"reprise":1,"replay":"r","skip_from":"3"}'),
        d("skip_from a fraction", '{"reprise":1,"replay":"r","skip_from":3.5}'),
        d("reread_until a boolean", '{"reprise":1,"replay":"r","reread_until":true}'),
        d("finished not a string", '{"reprise":1,"replay":"r","finished":true}'),
        d("null fields are absent fields", '{"reprise":1,"replay":"r","skip_from":null,"finished":null}'),
        d(
            "as stored: the mark and one NUL",
            '{"reprise":1,"replay":"r","skip_from":3}\0',
            note="what a Java or Go client reads back of a mark any side committed",
        ),
        d(
            "the text ends at the first NUL",
            '{"reprise":1,"replay":"r","reread_until":9}\0{"reprise":2}',
            note="confluent-kafka-python reads metadata as a C string",
        ),
        d("a NUL alone is no metadata", "\0"),
        d("someone else's text and a NUL", "batch 7\0"),
        d(
            f"a mark nested {MAX_DEPTH} deep (the limit)",
            '{"reprise":1,"replay":"r","skip_from":5,"x":' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}",
        ),
        d(
            f"a mark nested {MAX_DEPTH + 1} deep is no mark",
            '{"reprise":1,"replay":"r","skip_from":5,"x":' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}",
            note="deeper than the protocol reads (HANDOVER.md section 2, Limits): like text that is not JSON",
        ),
        d(
            f"a mark with an integer of {MAX_INTEGER_DIGITS} digits (the limit)",
            '{"reprise":1,"replay":"r","skip_from":5,"x":' + "7" * MAX_INTEGER_DIGITS + "}",
        ),
        d(
            f"a mark with an integer of {MAX_INTEGER_DIGITS + 1} digits is no mark",
            '{"reprise":1,"replay":"r","skip_from":5,"x":' + "7" * (MAX_INTEGER_DIGITS + 1) + "}",
        ),
        d(
            "a mark nested 4000 deep is no mark",
            '{"reprise":1,"replay":"r","x":' + "[" * 4000 + "]" * 4000 + "}",
            note="metadata holds up to 4096 bytes by default; Python's parser alone breaks near 1000 levels",
        ),
    ]
    return cases


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "commit_marks",
        "spec": "replay_worker/HANDOVER.md section 3",
        "encode": encode_cases(),
        "decode": decode_cases(),
    }
