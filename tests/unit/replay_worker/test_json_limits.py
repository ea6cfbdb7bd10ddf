"""The protocol's JSON limits (HANDOVER.md section 2, "Limits"): the depth check against the depth of the parsed
value, on generated JSON full of brackets, quotes and escapes inside strings; and a writer that refuses what every
reader would refuse."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from replay_worker.protocol.json_limits import MAX_DEPTH, MAX_RECORD_VALUE_BYTES, too_deep
from replay_worker.protocol.wire import HandoverFormatError, ReplayInfo, encode

#: Strings that look like nesting or like the end of a string to a careless scanner.
TRICKY = ["[", "]{", '\\"[', "\\", '\\\\"{', "é[", "\u2028]]", '"', ""]


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def generate(rng: random.Random, levels: int, budget: list[int]) -> Any:
    if levels == 0 or budget[0] <= 0 or rng.random() < 0.1:
        return rng.choice([1, None, True, 1.5, [], {}, *TRICKY])
    budget[0] -= 1
    children = [generate(rng, levels - 1, budget) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.5:
        return children
    return {f"{rng.choice(TRICKY)}{i}": child for i, child in enumerate(children)}


@pytest.mark.parametrize("seed", range(20))
def test_too_deep_is_exact_on_json(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        value = generate(rng, rng.randint(0, 150), [200])
        for ascii_only in (True, False):
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only).encode()
            for limit in (0, 1, 5, MAX_DEPTH):
                assert too_deep(text, limit) == (depth(value) > limit), (text, limit)


def test_too_deep_at_the_limit_and_past_it() -> None:
    assert not too_deep(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert too_deep(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    assert too_deep(b"[" * 5000)  # not JSON either: undecodable either way
    assert not too_deep(b'"' + b"[" * 5000 + b'"')


def test_a_writer_refuses_a_replay_record_no_reader_reads() -> None:
    keys = [f"key-{i:06d}-" + "x" * 1000 for i in range(1100)]
    big = ReplayInfo("ns/name/uid", "Handover", "g", "live", ("orders",), {"keys": keys})
    with pytest.raises(HandoverFormatError, match=f"more than the handover topic's limit of {MAX_RECORD_VALUE_BYTES}"):
        encode(big)
    deep: Any = "x"
    for _ in range(MAX_DEPTH):
        deep = [deep]
    nested = ReplayInfo("ns/name/uid", "Handover", "g", "live", ("orders",), {"json": [{"path": "a", "equals": deep}]})
    with pytest.raises(HandoverFormatError, match="nested deeper than"):
        encode(nested)
