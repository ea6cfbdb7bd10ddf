"""The Python replay rules pass replay_start.json and replay_finish.json, read from the committed JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replay_worker.protocol.finish_rules import record_ends_partition, replay_finish
from replay_worker.protocol.start_position import (
    EndSpec,
    PartitionFacts,
    SpecError,
    StartOlderThanRetention,
    StartSpec,
    decide_partition,
)

from .vectors import ids, load

START = load("replay_start.json")
FINISH = load("replay_finish.json")


@pytest.mark.parametrize("case", START["parse"], ids=ids(START["parse"]))
def test_start_parse_case(case: dict[str, Any]) -> None:
    kind = StartSpec if case["what"] == "start" else EndSpec
    if "error" in case:
        with pytest.raises(SpecError) as caught:
            kind.parse(case["spec"], case["what"])
        assert {"code": caught.value.code, "field": caught.value.field} == case["error"]
    else:
        assert json.loads(kind.parse(case["spec"], case["what"]).to_json()) == case["parsed"]


@pytest.mark.parametrize("case", START["decide"], ids=ids(START["decide"]))
def test_start_decide_case(case: dict[str, Any]) -> None:
    start = StartSpec.parse(case["start"])
    end = EndSpec.parse(case["end"]) if case["end"] is not None else None
    assert start.lookup_timestamp(case["now_ms"]) == case["lookup_ms"]
    p = case["partition"]
    facts = PartitionFacts(p["topic"], p["partition"], p["log_start"], p["end"], p["time_lookup"], p["end_time_lookup"])
    try:
        decision = decide_partition(
            start, end, facts, allow_clamp=case["allow_clamp"], now_ms=case["now_ms"], committed=case["committed"]
        )
    except (SpecError, StartOlderThanRetention) as exc:
        assert exc.code == case.get("error"), f"unexpected error {exc.code}"
        return
    assert "error" not in case, f"expected {case.get('error')}"
    assert {
        "offset": decision.offset,
        "clamped": decision.clamped,
        "end_offset": decision.end_offset,
        "end_timestamp_ms": decision.end_timestamp_ms,
    } == case["decision"]


@pytest.mark.parametrize("case", FINISH["finish"], ids=ids(FINISH["finish"]))
def test_finish_case(case: dict[str, Any]) -> None:
    def decide() -> str | None:
        return replay_finish(
            case["mode"],
            case["position"],
            end_offset=case["end_offset"],
            end_timestamp_ms=case["end_timestamp_ms"],
            at_end=case["at_end"],
            live_committed=case["live_position"],
        )

    if "error" in case:
        with pytest.raises(ValueError):
            decide()
    else:
        assert decide() == case["reason"]


@pytest.mark.parametrize("case", FINISH["record_ends"], ids=ids(FINISH["record_ends"]))
def test_record_ends_case(case: dict[str, Any]) -> None:
    assert (
        record_ends_partition(case["end_offset"], case["end_timestamp_ms"], case["offset"], case["timestamp_ms"])
        is case["ends"]
    )
