"""Where a replay starts and ends, per partition: the specs and the pure decisions.

The I/O (watermarks, `offsets_for_times`) happens in `bootstrap`; this module only decides, so every rule
below is unit-tested as data:

- A timestamp start is the earliest offset whose timestamp is >= T. Kafka answers "no such offset" (-1)
  when no record is that new: the partition's start is then its end offset (REFERENCE.md section 1).
- A start older than the partition's log-start offset is a retention risk: `decide_start` returns it, and
  each caller refuses it its own way unless clamping is allowed (the worker raises `StartOlderThanRetention`,
  the operator fails the plan with RetentionExceeded). Kafka's own tool clamps silently; a replay must say
  so, because records it was asked for are gone (use a LakeReplay for them).
- Explicit offsets name every partition of the replayed topics: a partition left out is a SpecError, not
  "start at the end", so a mistyped list never silently replays nothing of a partition.

This module, `durations`, `timestamps`, `filters` and `settings` are the replay contract the operator shares
(`replay_worker.contract`); none of them imports a Kafka client.
- The start is resolved once (see `bootstrap`); a "duration back from now" is turned into a timestamp at
  that moment, so every replica and restart agrees on it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping

from .durations import parse_duration
from .spec_error import SpecError
from .timestamps import epoch_ms, parse_rfc3339

__all__ = [
    "EndSpec",
    "PartitionFacts",
    "SpecError",
    "StartDecision",
    "StartOlderThanRetention",
    "StartSpec",
    "decide_end",
    "decide_partition",
    "decide_start",
    "parse_duration",
    "refuse_lost_start",
]

StartKind = Literal["earliest", "timestamp", "duration", "offsets"]
EndKind = Literal["snapshot", "timestamp", "offsets"]
#: Per topic, per partition: an offset.
PartitionOffsets = Mapping[str, Mapping[int, int]]


class StartOlderThanRetention(RuntimeError):
    """The asked-for start is below the log-start offset: records the replay should cover are gone."""

    code = "start-older-than-retention"

    def __init__(self, topic: str, partition: int, requested: int | None, log_start: int, what: str) -> None:
        self.topic, self.partition, self.requested, self.log_start = topic, partition, requested, log_start
        asked = f"offset {requested}" if requested is not None else what
        super().__init__(
            f"start of {topic}[{partition}] ({asked}) is older than the partition's log-start offset {log_start}: "
            f"those records were deleted by retention. Replay them from the lake (a LakeReplay), or allow "
            f"clamping (REPRISE_ALLOW_CLAMP=true / --allow-clamp) to start at offset {log_start} instead"
        )


def _ms_from(value: Any, what: str) -> int:
    """Epoch milliseconds from an int/float (ms) or an ISO-8601 string (naive means UTC)."""
    if isinstance(value, bool):
        raise SpecError(
            f"{what}: expected epoch milliseconds or an ISO-8601 time, got {value!r}", field=what, code="bad-time"
        )
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            return epoch_ms(parse_rfc3339(text))
        except ValueError:
            raise SpecError(
                f"{what}: {value!r} is not an ISO-8601 time (e.g. 2024-05-01T12:00:00Z) nor epoch milliseconds",
                field=what,
                code="bad-time",
            ) from None
    raise SpecError(
        f"{what}: expected epoch milliseconds or an ISO-8601 time, got {value!r}", field=what, code="bad-time"
    )


def _parse_offsets(value: Any, what: str) -> dict[str, dict[int, int]]:
    """`{"topic": {"0": 12, "1": 40}}` or `[{"topic": "t", "partition": 0, "offset": 12}, ...]`."""
    result: dict[str, dict[int, int]] = {}
    try:
        if isinstance(value, Mapping):
            for topic, partitions in value.items():
                if not isinstance(partitions, Mapping):
                    raise TypeError
                result[str(topic)] = {int(p): int(o) for p, o in partitions.items()}
        elif isinstance(value, list):
            for item in value:
                result.setdefault(str(item["topic"]), {})[int(item["partition"])] = int(item["offset"])
        else:
            raise TypeError
    except (TypeError, ValueError, KeyError):
        raise SpecError(
            f'{what}: expected {{"topic": {{"0": 12}}}} or a list of {{topic, partition, offset}}, '
            f"got {json.dumps(value)[:200]}",
            field=what,
            code="bad-offsets",
        ) from None
    for topic, partitions in result.items():
        for partition, offset in partitions.items():
            if partition < 0 or offset < 0:
                raise SpecError(
                    f"{what}: {topic}[{partition}]={offset}: partitions and offsets are >= 0",
                    field=what,
                    code="negative-offset",
                )
    return result


def _one_of(obj: Any, kinds: tuple[str, ...], what: str) -> tuple[str, Any]:
    """Accept `{"type": K, K: value}`, the shorthand `{K: value}`, or a bare `"K"` for value-less kinds."""
    if isinstance(obj, str):
        if obj in kinds:
            return obj, None
        raise SpecError(f"{what}: {obj!r} is not one of {', '.join(kinds)}", field=what, code="unknown-type")
    if not isinstance(obj, Mapping):
        raise SpecError(
            f"{what}: expected a JSON object, got {json.dumps(obj)[:200]}", field=what, code="not-an-object"
        )
    if "type" in obj:
        kind = obj["type"]
        if kind not in kinds:
            raise SpecError(f"{what}: type {kind!r} is not one of {', '.join(kinds)}", field=what, code="unknown-type")
        return kind, obj.get(kind)
    present = [k for k in kinds if k in obj]
    if len(present) != 1:
        raise SpecError(
            f"{what}: give exactly one of {', '.join(kinds)} (got {sorted(obj)})", field=what, code="ambiguous-type"
        )
    return present[0], obj[present[0]]


@dataclass(frozen=True)
class StartSpec:
    """Where the replay starts: earliest, a timestamp, a duration back from now, or explicit offsets."""

    kind: StartKind
    timestamp_ms: int | None = None
    duration_s: float | None = None
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, obj: Any, what: str = "start") -> "StartSpec":
        if isinstance(obj, str) and obj.strip().startswith(("{", "[", '"')):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise SpecError(
                    f"{what}: not valid JSON ({exc.msg} at position {exc.pos})", field=what, code="not-json"
                ) from None
        kind, value = _one_of(obj, ("earliest", "timestamp", "duration", "offsets"), what)
        if kind == "earliest":
            return cls("earliest")
        if kind == "timestamp":
            return cls("timestamp", timestamp_ms=_ms_from(value, f"{what}.timestamp"))
        if kind == "duration":
            return cls("duration", duration_s=parse_duration(value, f"{what}.duration"))
        return cls("offsets", offsets=_parse_offsets(value, f"{what}.offsets"))

    def to_json(self) -> str:
        if self.kind == "earliest":
            body: dict[str, Any] = {"type": "earliest"}
        elif self.kind == "timestamp":
            body = {"type": "timestamp", "timestamp": self.timestamp_ms}
        elif self.kind == "duration":
            body = {"type": "duration", "duration": self.duration_s}
        else:
            body = {
                "type": "offsets",
                "offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in self.offsets.items()},
            }
        return json.dumps(body, separators=(",", ":"))

    def lookup_timestamp(self, now_ms: int) -> int | None:
        """The timestamp to look up with `offsets_for_times`, or None when the spec is not time-based."""
        if self.kind == "timestamp":
            return self.timestamp_ms
        if self.kind == "duration":
            assert self.duration_s is not None
            return now_ms - int(self.duration_s * 1000)
        return None


@dataclass(frozen=True)
class EndSpec:
    """An optional bounded end: the end offsets at bootstrap (`snapshot`), a timestamp, or explicit offsets."""

    kind: EndKind
    timestamp_ms: int | None = None
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, obj: Any, what: str = "end") -> "EndSpec":
        if isinstance(obj, str) and obj.strip().startswith(("{", "[", '"')):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise SpecError(
                    f"{what}: not valid JSON ({exc.msg} at position {exc.pos})", field=what, code="not-json"
                ) from None
        kind, value = _one_of(obj, ("snapshot", "timestamp", "offsets"), what)
        if kind == "snapshot":
            return cls("snapshot")
        if kind == "timestamp":
            return cls("timestamp", timestamp_ms=_ms_from(value, f"{what}.timestamp"))
        return cls("offsets", offsets=_parse_offsets(value, f"{what}.offsets"))

    def to_json(self) -> str:
        if self.kind == "snapshot":
            body: dict[str, Any] = {"type": "snapshot"}
        elif self.kind == "timestamp":
            body = {"type": "timestamp", "timestamp": self.timestamp_ms}
        else:
            body = {
                "type": "offsets",
                "offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in self.offsets.items()},
            }
        return json.dumps(body, separators=(",", ":"))


@dataclass(frozen=True)
class PartitionFacts:
    """What Kafka said about one partition when the start was decided (the operator's plan and the worker's
    bootstrap read the same facts)."""

    topic: str
    partition: int
    #: The log-start offset (the oldest retained record).
    log_start: int
    #: The end offset (high watermark): the offset the next record will get.
    end: int
    #: `offsets_for_times(T)` for a time-based start: an offset, or -1 when no record is that new.
    time_lookup: int | None = None
    #: `offsets_for_times(T_end)` for a timestamp end, likewise.
    end_time_lookup: int | None = None
    #: The timestamp of the record `time_lookup` found, when known (the plan shows the oldest replayed time).
    time_lookup_timestamp_ms: int | None = None
    #: The timestamp of the record at `log_start`, when known (the same, for an earliest start).
    log_start_timestamp_ms: int | None = None


@dataclass(frozen=True)
class StartDecision:
    """The start (and optional end) of one partition, decided once and published."""

    topic: str
    partition: int
    offset: int
    #: True when the asked-for start was below the log start and clamping was allowed.
    clamped: bool = False
    #: The exclusive end offset when the replay is bounded and the bound is known now.
    end_offset: int | None = None
    #: A timestamp end that lies in the future: the partition ends at the first record at or after it.
    end_timestamp_ms: int | None = None
    #: True when records the start asked for may be gone to retention (clamped or not). Unclamped, the
    #: caller refuses the start with its own error: the worker `StartOlderThanRetention` (`refuse_lost_start`),
    #: the operator a RetentionExceeded condition.
    retention_risk: bool = False
    #: The timestamp of the first record replayed, when the facts knew it.
    oldest_timestamp_ms: int | None = None
    #: The offset the spec asked for, when it named one (what a retention message quotes).
    requested: int | None = None

    @property
    def lost(self) -> bool:
        """Records asked for are gone and the start was not clamped: the caller must refuse it."""
        return self.retention_risk and not self.clamped


def decide_start(spec: StartSpec, facts: PartitionFacts, allow_clamp: bool) -> StartDecision:
    """The start offset of one partition, with the retention risk (never raised: each caller picks its error).

    SpecError when the spec cannot be applied to this partition: explicit offsets must name every partition
    of the replayed topics (one left out fails, rather than silently replaying nothing of it) and may not lie
    beyond the partition's end."""
    t, p = facts.topic, facts.partition
    if spec.kind == "earliest":
        oldest = facts.log_start_timestamp_ms if facts.end > facts.log_start else None
        return StartDecision(t, p, facts.log_start, oldest_timestamp_ms=oldest)
    if spec.kind == "offsets":
        if t not in spec.offsets or p not in spec.offsets[t]:
            raise SpecError(
                f"start.offsets has no offset for {t}[{p}]: give one for every partition of the topics",
                field="start.offsets",
                code="missing-partition-offset",
            )
        wanted = spec.offsets[t][p]
        if wanted > facts.end:
            raise SpecError(
                f"start.offsets: {t}[{p}]={wanted} is beyond the partition's end offset {facts.end}",
                field="start.offsets",
                code="offset-beyond-end",
            )
        if wanted < facts.log_start:
            if allow_clamp:
                return StartDecision(t, p, facts.log_start, clamped=True, retention_risk=True, requested=wanted)
            return StartDecision(t, p, wanted, retention_risk=True, requested=wanted)
        return StartDecision(t, p, wanted, requested=wanted)
    # Time-based: the earliest offset whose timestamp is >= T.
    found = facts.time_lookup
    if found is None or found < 0:
        # No record is that new: start at the end (nothing of this partition is replayed).
        return StartDecision(t, p, facts.end)
    oldest = facts.time_lookup_timestamp_ms
    if found == facts.log_start and facts.log_start > 0:
        # Every retained record is newer than T, and older ones were deleted: some of the asked-for
        # records may be gone. Say so unless the user accepted it.
        return StartDecision(t, p, found, clamped=allow_clamp, retention_risk=True, oldest_timestamp_ms=oldest)
    return StartDecision(t, p, max(found, facts.log_start), oldest_timestamp_ms=oldest)


def refuse_lost_start(decision: StartDecision, facts: PartitionFacts) -> StartDecision:
    """The worker's choice: a start whose records are gone and that was not clamped is
    `StartOlderThanRetention` (the conformance vectors' `start-older-than-retention`)."""
    if decision.lost:
        what = "explicit offset" if decision.requested is not None else "the start time"
        raise StartOlderThanRetention(decision.topic, decision.partition, decision.requested, facts.log_start, what)
    return decision


def decide_end(spec: EndSpec | None, facts: PartitionFacts, now_ms: int) -> tuple[int | None, int | None]:
    """(end offset, end timestamp) of one partition; both None when unbounded."""
    if spec is None:
        return None, None
    if spec.kind == "snapshot":
        return facts.end, None
    if spec.kind == "offsets":
        t, p = facts.topic, facts.partition
        if t not in spec.offsets or p not in spec.offsets[t]:
            raise SpecError(
                f"end.offsets has no offset for {t}[{p}]: give one for every partition of the topics",
                field="end.offsets",
                code="missing-partition-offset",
            )
        return spec.offsets[t][p], None
    assert spec.timestamp_ms is not None
    found = facts.end_time_lookup
    if found is not None and found >= 0:
        return found, None
    if spec.timestamp_ms <= now_ms:
        # No record is that new yet, and the time has passed: the end is the end offset now.
        return facts.end, None
    # The end time is in the future: decided per record (the first record at or after it ends the partition).
    return None, spec.timestamp_ms


def decide_partition(
    start: StartSpec,
    end: EndSpec | None,
    facts: PartitionFacts,
    *,
    allow_clamp: bool,
    now_ms: int,
    committed: int | None = None,
) -> StartDecision:
    """Start and end of one partition. A partition that already has a committed offset in the replay group
    keeps it: the replay resumes there, and that is what the published start must say."""
    if committed is not None and committed >= 0:
        decision = StartDecision(facts.topic, facts.partition, committed)
    else:
        decision = refuse_lost_start(decide_start(start, facts, allow_clamp), facts)
    end_offset, end_ts = decide_end(end, facts, now_ms)
    if end_offset is not None and end_offset < decision.offset:
        end_offset = decision.offset
    return replace(decision, end_offset=end_offset, end_timestamp_ms=end_ts)
