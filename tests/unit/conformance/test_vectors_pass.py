"""The Python reference passes every conformance vector, read from the committed JSON files the way the Java
and Go runners read them (conformance/README.md says what each case means)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.protocol.filters import FilterSpecError, Undecodable, published_filter
from replay_worker.protocol.wire import (
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

from .vectors import headers, ids, load, raw

FILTERS = load("filters.json")
WIRE = load("wire.json")
MARKS = load("commit_marks.json")


# -- filters.json


@pytest.mark.parametrize("case", FILTERS["cases"], ids=ids(FILTERS["cases"]))
def test_filter_case(case: dict[str, Any]) -> None:
    matcher = published_filter(case["filter"])
    try:
        result = (
            "match" if matcher.matches(raw(case["key"]), headers(case["headers"]), raw(case["value"])) else "no-match"
        )
    except Undecodable:
        result = "undecodable"
    assert result == case["result"]


@pytest.mark.parametrize("case", FILTERS["invalid"], ids=ids(FILTERS["invalid"]))
def test_invalid_filter_case(case: dict[str, Any]) -> None:
    with pytest.raises(FilterSpecError) as caught:
        published_filter(case["filter"])
    assert {"code": caught.value.code, "field": caught.value.field} == case["error"]


# -- wire.json


def _record(normal: dict[str, Any]) -> HandoverRecord:
    """A record from its normal form (every field present)."""
    n = dict(normal)
    rid, kind, at = n.pop("replay_id"), n.pop("kind"), n.pop("at_ms")
    if kind == "replay":
        return ReplayInfo(rid, n["mode"], n["replay_group"], n["live_group"], tuple(n["topics"]), n["filter"], at)
    if kind == "result":
        return ResultInfo(rid, n["result"], at)
    t, p = n["topic"], n["partition"]
    if kind == "start":
        return StartInfo(rid, t, p, n["offset"], n["end_offset"], n["end_timestamp_ms"], n["clamped"], at)
    if kind == "handover":
        return HandoverInfo(rid, t, p, n["offset"], n["reason"], n["by"], at)
    if kind == "guard":
        return GuardInfo(rid, t, p, n["first_skipped"], n["seen_until"], n["member"], at, n.get("problem"))
    if kind == "ack":
        return AckInfo(rid, t, p, n["offset"], n["committed"], n["member"], at)
    assert kind == "progress"
    return ProgressInfo(rid, t, p, n["position"], n["at_end"], n["member"], at)


def _normal(record: HandoverRecord) -> dict[str, Any]:
    body = json.loads(encode(record)[1])
    del body["v"]
    return body


@pytest.mark.parametrize("case", WIRE["encode"], ids=ids(WIRE["encode"]))
def test_wire_encode_case(case: dict[str, Any]) -> None:
    key, value = encode(_record(case["record"]))
    assert key == raw(case["key"])
    assert value == raw(case["value"])


@pytest.mark.parametrize("case", WIRE["decode"], ids=ids(WIRE["decode"]))
def test_wire_decode_case(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(HandoverFormatError) as caught:
            decode(raw(case["key"]), raw(case["value"]))
        assert caught.value.code == case["error"]
        return
    key, record = decode(raw(case["key"]), raw(case["value"]))
    assert {"replay_id": key.replay_id, "kind": key.kind, "topic": key.topic, "partition": key.partition} == case[
        "parsed_key"
    ]
    assert (None if record is None else _normal(record)) == case["record"]


# -- commit_marks.json


def _fields(mark: CommitMark) -> dict[str, Any]:
    return {
        "replay": mark.replay_id,
        "finished": mark.finished,
        "skip_from": mark.skip_from,
        "reread_until": mark.reread_until,
    }


@pytest.mark.parametrize("case", MARKS["encode"], ids=ids(MARKS["encode"]))
def test_commit_mark_encode_case(case: dict[str, Any]) -> None:
    m = case["mark"]
    mark = CommitMark(m["replay"], m["finished"], m["skip_from"], m["reread_until"])
    assert mark.encode() == case["metadata"]
    assert mark.committed_metadata() == case["committed"]


@pytest.mark.parametrize("case", MARKS["decode"], ids=ids(MARKS["decode"]))
def test_commit_mark_decode_case(case: dict[str, Any]) -> None:
    mark = CommitMark.decode(case["metadata"])
    if case["result"] == "none":
        assert mark is None
    elif case["result"] == "unusable":
        assert mark is not None and not mark.usable and mark.problem == case["reason"]
    else:
        assert mark is not None and mark.usable and _fields(mark) == case["mark"]
