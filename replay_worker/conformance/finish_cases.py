"""replay_finish.json: when the replay stops a partition, per mode (HANDOVER.md sections 1 and 5.4;
`replay_worker/protocol/finish_rules.py`).

`finish`: the mode, the replay's position (the next offset it would process; everything below is processed),
the partition's end bound, whether the consumer reached the end of the partition, and the live side's
position; the expected reason to stop now, or null to go on. `record_ends`: whether a bounded replay stops
before a record (its offset and timestamp).
"""

from __future__ import annotations

import itertools
from typing import Any

from ..protocol.finish_rules import record_ends_partition, replay_finish

MODES = ("Drain", "Parallel", "Handover")


def finish_cases() -> list[dict[str, Any]]:
    cases = []
    grid = itertools.product(MODES, (None, 5, 10, 11), (None, 1717243200000), (False, True), (None, 9, 10, 11))
    for mode, end_offset, end_ts, at_end, live in grid:
        inputs = {
            "mode": mode,
            "position": 10,
            "end_offset": end_offset,
            "end_timestamp_ms": end_ts,
            "at_end": at_end,
            "live_position": live,
        }
        reason = replay_finish(
            mode, 10, end_offset=end_offset, end_timestamp_ms=end_ts, at_end=at_end, live_committed=live
        )
        name = (
            f"{mode}, end_offset={end_offset}, end_time={'set' if end_ts else 'none'}, "
            f"at_end={str(at_end).lower()}, live={live}"
        )
        cases.append({"name": name, **inputs, "reason": reason})
    try:
        replay_finish("Rewind", 10)
    except ValueError:
        cases.append(
            {
                "name": "unknown mode",
                "mode": "Rewind",
                "position": 10,
                "end_offset": None,
                "end_timestamp_ms": None,
                "at_end": False,
                "live_position": None,
                "error": "unknown-mode",
            }
        )
    return cases


def record_end_cases() -> list[dict[str, Any]]:
    cases = []
    for end_offset, end_ts, offset, ts in itertools.product(
        (None, 100), (None, 5000), (99, 100, 101), (None, 4999, 5000, 5001)
    ):
        name = f"end_offset={end_offset}, end_time={end_ts}, offset={offset}, timestamp={ts}"
        cases.append(
            {
                "name": name,
                "end_offset": end_offset,
                "end_timestamp_ms": end_ts,
                "offset": offset,
                "timestamp_ms": ts,
                "ends": record_ends_partition(end_offset, end_ts, offset, ts),
            }
        )
    return cases


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "replay_finish",
        "spec": "replay_worker/HANDOVER.md sections 1 and 5.4",
        "finish": finish_cases(),
        "record_ends": record_end_cases(),
    }
