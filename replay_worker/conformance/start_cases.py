"""replay_start.json: where a replay starts and ends per partition (HANDOVER.md section 5.1;
`replay_worker/protocol/start_position.py`).

`parse`: a start or end spec (a JSON value, or the text of an environment variable) and its normal form, or an
error code with the field at fault. `decide`: a start spec, an optional end spec, what Kafka said about one
partition at bootstrap, the clamping switch, a fixed "now" and the replay group's committed offset; the
expected start and end of that partition, or an error code.
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.start_position import (
    EndSpec,
    PartitionFacts,
    SpecError,
    StartOlderThanRetention,
    StartSpec,
    decide_partition,
)

NOW_MS = 1717243200000  # 2024-06-01T12:00:00Z


def _parse(name: str, what: str, spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "what": what, "spec": spec}
    try:
        parsed = (StartSpec if what == "start" else EndSpec).parse(spec, what)
    except SpecError as exc:
        body["error"] = {"code": exc.code, "field": exc.field}
        return body
    body["parsed"] = json.loads(parsed.to_json())
    return body


def parse_cases() -> list[dict[str, Any]]:
    s = lambda name, spec: _parse(name, "start", spec)  # noqa: E731
    e = lambda name, spec: _parse(name, "end", spec)  # noqa: E731
    return [
        s("earliest, bare word", "earliest"),
        s("earliest, typed", {"type": "earliest"}),
        s("earliest, shorthand", {"earliest": None}),
        s("timestamp, epoch ms", {"type": "timestamp", "timestamp": 1714564800000}),
        s("timestamp, epoch ms as a string", {"timestamp": "1714564800000"}),
        s("timestamp, ISO-8601 Z", {"timestamp": "2024-05-01T12:00:00Z"}),
        s("timestamp, ISO-8601 with an offset", {"timestamp": "2024-05-01T14:00:00+02:00"}),
        s("timestamp, ISO-8601 with milliseconds", {"timestamp": "2024-05-01T12:00:00.250Z"}),
        s("timestamp, ISO-8601 without a zone is UTC", {"timestamp": "2024-05-01T12:00:00"}),
        s("timestamp, not a time", {"timestamp": "yesterday"}),
        s("timestamp, a boolean", {"timestamp": True}),
        s("duration, units", {"type": "duration", "duration": "1h30m"}),
        s("duration, seconds as a number", {"duration": 90}),
        s("duration, seconds as a string", {"duration": "90"}),
        s("duration, milliseconds", {"duration": "1500ms"}),
        s("duration, days and weeks", {"duration": "1w2d"}),
        s("duration, fractional", {"duration": "1.5h"}),
        s("duration, ISO-8601", {"duration": "PT2H"}),
        s("duration, ISO-8601 days and time", {"duration": "P1DT12H"}),
        s("duration, ISO-8601 lower case", {"duration": "pt15m"}),
        s("duration, zero", {"duration": "0s"}),
        s("duration, negative", {"duration": -5}),
        s("duration, unknown unit", {"duration": "2y"}),
        s("duration, spaces between parts", {"duration": "1h 30m"}),
        s("duration, empty ISO-8601", {"duration": "P"}),
        s("offsets, object form", {"type": "offsets", "offsets": {"orders": {"0": 12, "1": 40}}}),
        s("offsets, list form", {"offsets": [{"topic": "orders", "partition": 0, "offset": 12}]}),
        s("offsets, negative", {"offsets": {"orders": {"0": -1}}}),
        s("offsets, not numbers", {"offsets": {"orders": {"zero": 1}}}),
        s("offsets, not an object", {"offsets": 12}),
        s("offsets, list item without an offset", {"offsets": [{"topic": "orders", "partition": 0}]}),
        s("JSON text (an environment variable)", '{"type":"duration","duration":"15m"}'),
        s("JSON text that does not parse", '{"type":'),
        s("unknown bare word", "latest"),
        s("unknown type", {"type": "latest"}),
        s("two kinds at once", {"earliest": None, "duration": "1h"}),
        s("no kind", {"from": "now"}),
        s("not an object", [1, 2]),
        e("snapshot", "snapshot"),
        e("end timestamp", {"type": "timestamp", "timestamp": "2024-06-01T00:00:00Z"}),
        e("end offsets", {"offsets": {"orders": {"0": 100}}}),
        e("end duration is not an end", {"duration": "1h"}),
        e("end earliest is not an end", "earliest"),
    ]


def _decide(
    name: str,
    start: Any,
    facts: dict[str, Any],
    *,
    end: Any = None,
    allow_clamp: bool = False,
    committed: int | None = None,
    note: str = "",
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if note:
        body["note"] = note
    body.update(
        {
            "start": start,
            "end": end,
            "partition": {"topic": "orders", "partition": 0, "time_lookup": None, "end_time_lookup": None, **facts},
            "allow_clamp": allow_clamp,
            "now_ms": NOW_MS,
            "committed": committed,
        }
    )
    start_spec = StartSpec.parse(start)
    end_spec = EndSpec.parse(end) if end is not None else None
    p = body["partition"]
    body["lookup_ms"] = start_spec.lookup_timestamp(NOW_MS)
    try:
        decision = decide_partition(
            start_spec,
            end_spec,
            PartitionFacts(
                p["topic"], p["partition"], p["log_start"], p["end"], p["time_lookup"], p["end_time_lookup"]
            ),
            allow_clamp=allow_clamp,
            now_ms=NOW_MS,
            committed=committed,
        )
    except (SpecError, StartOlderThanRetention) as exc:
        body["error"] = exc.code
        return body
    body["decision"] = {
        "offset": decision.offset,
        "clamped": decision.clamped,
        "end_offset": decision.end_offset,
        "end_timestamp_ms": decision.end_timestamp_ms,
    }
    return body


def decide_cases() -> list[dict[str, Any]]:
    d = _decide
    ts = {"timestamp": "2024-05-01T12:00:00Z"}
    dur = {"duration": "2h"}
    offs = {"offsets": {"orders": {"0": 120}}}
    return [
        d("earliest is the log start", "earliest", {"log_start": 40, "end": 500}),
        d("earliest of an empty partition", "earliest", {"log_start": 0, "end": 0}),
        d("timestamp found", ts, {"log_start": 0, "end": 500, "time_lookup": 210}),
        d(
            "timestamp newer than every record: start at the end",
            ts,
            {"log_start": 0, "end": 500, "time_lookup": -1},
            note="offsets_for_times answers -1 (no such record)",
        ),
        d(
            "timestamp lookup gives the log start of a truncated partition",
            ts,
            {"log_start": 40, "end": 500, "time_lookup": 40},
            note="every retained record is newer than T and older ones were deleted: some asked-for records are gone",
        ),
        d("the same, clamping allowed", ts, {"log_start": 40, "end": 500, "time_lookup": 40}, allow_clamp=True),
        d("timestamp lookup at log start 0 is fine", ts, {"log_start": 0, "end": 500, "time_lookup": 0}),
        d("timestamp found above the log start", ts, {"log_start": 40, "end": 500, "time_lookup": 41}),
        d("duration: the lookup time is now minus the duration", dur, {"log_start": 0, "end": 500, "time_lookup": 300}),
        d("duration newer than every record", dur, {"log_start": 0, "end": 500, "time_lookup": -1}),
        d(
            "fractional duration seconds truncate to whole milliseconds",
            {"duration": 0.0015},
            {"log_start": 0, "end": 10, "time_lookup": 9},
        ),
        d("explicit offset", offs, {"log_start": 0, "end": 500}),
        d("explicit offset at the end", {"offsets": {"orders": {"0": 500}}}, {"log_start": 0, "end": 500}),
        d("explicit offset beyond the end", {"offsets": {"orders": {"0": 501}}}, {"log_start": 0, "end": 500}),
        d("explicit offset below the log start", offs, {"log_start": 200, "end": 500}),
        d(
            "explicit offset below the log start, clamping allowed",
            offs,
            {"log_start": 200, "end": 500},
            allow_clamp=True,
        ),
        d("explicit offsets without this partition", {"offsets": {"orders": {"1": 5}}}, {"log_start": 0, "end": 500}),
        d("explicit offsets for another topic only", {"offsets": {"refunds": {"0": 5}}}, {"log_start": 0, "end": 500}),
        d(
            "a committed offset wins over the spec",
            "earliest",
            {"log_start": 0, "end": 500},
            committed=333,
            note="the replay group already has an offset: the replay resumes there and publishes it as S",
        ),
        d("a committed offset wins even below the log start", offs, {"log_start": 200, "end": 500}, committed=150),
        d("committed offset 0", dur, {"log_start": 0, "end": 500, "time_lookup": 300}, committed=0),
        d("end snapshot: the end offset at bootstrap", "earliest", {"log_start": 0, "end": 500}, end="snapshot"),
        d("end offsets", "earliest", {"log_start": 0, "end": 500}, end={"offsets": {"orders": {"0": 450}}}),
        d(
            "end offsets below the start are raised to it",
            offs,
            {"log_start": 0, "end": 500},
            end={"offsets": {"orders": {"0": 100}}},
        ),
        d(
            "end offsets without this partition",
            "earliest",
            {"log_start": 0, "end": 500},
            end={"offsets": {"orders": {"3": 100}}},
        ),
        d(
            "end timestamp found",
            "earliest",
            {"log_start": 0, "end": 500, "end_time_lookup": 420},
            end={"timestamp": "2024-05-20T00:00:00Z"},
        ),
        d(
            "end timestamp in the past, no record that new: the end offset now",
            "earliest",
            {"log_start": 0, "end": 500, "end_time_lookup": -1},
            end={"timestamp": "2024-05-20T00:00:00Z"},
        ),
        d(
            "end timestamp in the future: decided per record",
            "earliest",
            {"log_start": 0, "end": 500, "end_time_lookup": -1},
            end={"timestamp": "2024-07-01T00:00:00Z"},
        ),
        d(
            "end timestamp exactly now, no record that new",
            "earliest",
            {"log_start": 0, "end": 500, "end_time_lookup": -1},
            end={"timestamp": NOW_MS},
        ),
        d(
            "start at the end and a snapshot end",
            {"duration": "1m"},
            {"log_start": 0, "end": 500, "time_lookup": -1},
            end="snapshot",
        ),
    ]


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "replay_start",
        "spec": "replay_worker/HANDOVER.md section 5.1",
        "parse": parse_cases(),
        "decide": decide_cases(),
    }
