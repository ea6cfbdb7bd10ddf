"""The handover protocol as data and decisions. Pure: no Kafka calls here (those are in `handover_topic`).

HANDOVER.md beside this file is the specification; this module is its Python reading:

- the records of the compacted handover topic (keys, JSON values, tombstones) and `HandoverView`, the state
  they add up to, per replay and per partition;
- the metadata the replay group and the guarded live group attach to their committed offsets, so that what
  each side has done is recorded atomically with its offset;
- `replay_finish`: when the replay stops a partition, per mode;
- `GuardPartition`: what the live side's guard does with each record of one partition, when it seeks back,
  and what it records with its commits.

Notation (as in HANDOVER.md): S = replay start, H = handover offset, F = first skipped offset, U = the
guard's seen-until offset (one past the last record it saw).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable, Literal, Mapping

from .filters import FilterSpec, Headers, RecordFilter, Undecodable

FORMAT_VERSION = 1
Mode = Literal["Parallel", "Handover", "Drain"]
MODES: tuple[str, ...] = ("Parallel", "Handover", "Drain")
RecordKind = Literal["replay", "start", "handover", "guard", "ack", "progress", "result"]
FinishReason = Literal["end-bound", "end-of-partition", "live-offset", "caught-up", "forced", "not-in-plan"]
TopicPartitionKey = tuple[str, int]


class HandoverFormatError(ValueError):
    """A handover-topic record that does not follow the format."""


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
    first_skipped: int
    seen_until: int
    member: str = ""
    at_ms: int = 0


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
    try:
        parts = json.loads(raw) if raw is not None else None
    except (ValueError, UnicodeDecodeError):
        parts = None
    if not isinstance(parts, list) or len(parts) not in (2, 4) or not all(isinstance(p, str) for p in parts[:2]):
        raise HandoverFormatError(f"not a handover key: {raw!r}")
    if len(parts) == 4:
        if not isinstance(parts[2], str) or not isinstance(parts[3], int):
            raise HandoverFormatError(f"not a handover key: {raw!r}")
        return RecordKey(parts[0], parts[1], parts[2], parts[3])
    return RecordKey(parts[0], parts[1])


def _key_of(record: HandoverRecord) -> bytes:
    if isinstance(record, ReplayInfo):
        return encode_key(record.replay_id, "replay")
    if isinstance(record, ResultInfo):
        return encode_key(record.replay_id, "result")
    kind: RecordKind = {StartInfo: "start", HandoverInfo: "handover", GuardInfo: "guard", AckInfo: "ack", ProgressInfo: "progress"}[type(record)]  # type: ignore[assignment]
    return encode_key(record.replay_id, kind, record.topic, record.partition)  # type: ignore[union-attr]


def encode(record: HandoverRecord) -> tuple[bytes, bytes]:
    """(key, value) of a record; the value is compact JSON with `v` (format version) and `kind`."""
    if isinstance(record, ReplayInfo):
        body: dict[str, Any] = {
            "kind": "replay", "mode": record.mode, "replay_group": record.replay_group,
            "live_group": record.live_group, "topics": list(record.topics), "filter": dict(record.filter),
        }
    elif isinstance(record, StartInfo):
        body = {"kind": "start", "topic": record.topic, "partition": record.partition, "offset": record.offset,
                "end_offset": record.end_offset, "end_timestamp_ms": record.end_timestamp_ms, "clamped": record.clamped}
    elif isinstance(record, HandoverInfo):
        body = {"kind": "handover", "topic": record.topic, "partition": record.partition, "offset": record.offset,
                "reason": record.reason, "by": record.by}
    elif isinstance(record, GuardInfo):
        body = {"kind": "guard", "topic": record.topic, "partition": record.partition,
                "first_skipped": record.first_skipped, "seen_until": record.seen_until, "member": record.member}
    elif isinstance(record, AckInfo):
        body = {"kind": "ack", "topic": record.topic, "partition": record.partition, "offset": record.offset,
                "committed": record.committed, "member": record.member}
    elif isinstance(record, ProgressInfo):
        body = {"kind": "progress", "topic": record.topic, "partition": record.partition, "position": record.position,
                "at_end": record.at_end, "member": record.member}
    else:
        body = {"kind": "result", "result": dict(record.body)}
    value = {"v": FORMAT_VERSION, "replay_id": record.replay_id, **body, "at_ms": record.at_ms}
    return _key_of(record), json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode(raw_key: bytes | str | None, raw_value: bytes | str | None) -> tuple[RecordKey, HandoverRecord | None]:
    """The record of one handover-topic message; None for a tombstone."""
    key = decode_key(raw_key)
    if raw_value is None:
        return key, None
    try:
        v = json.loads(raw_value)
    except (ValueError, UnicodeDecodeError):
        raise HandoverFormatError(f"value of {key} is not JSON") from None
    if not isinstance(v, dict) or v.get("kind") != key.kind:
        raise HandoverFormatError(f"value of {key} does not say kind {key.kind!r}")
    if int(v.get("v", 0)) > FORMAT_VERSION:
        raise HandoverFormatError(f"{key} has format version {v.get('v')}, newer than {FORMAT_VERSION}")
    rid, at = key.replay_id, int(v.get("at_ms") or 0)
    try:
        if key.kind == "replay":
            return key, ReplayInfo(rid, str(v["mode"]), str(v["replay_group"]), v.get("live_group"),
                                   tuple(v.get("topics") or ()), dict(v.get("filter") or {}), at)
        if key.kind == "result":
            return key, ResultInfo(rid, dict(v.get("result") or {}), at)
        t, p = str(v["topic"]), int(v["partition"])
        if (t, p) != (key.topic, key.partition):
            raise HandoverFormatError(f"value of {key} names {t}[{p}]")
        if key.kind == "start":
            return key, StartInfo(rid, t, p, int(v["offset"]), _opt_int(v.get("end_offset")),
                                  _opt_int(v.get("end_timestamp_ms")), bool(v.get("clamped")), at)
        if key.kind == "handover":
            return key, HandoverInfo(rid, t, p, int(v["offset"]), str(v.get("reason", "")), str(v.get("by", "replay")), at)
        if key.kind == "guard":
            return key, GuardInfo(rid, t, p, int(v["first_skipped"]), int(v["seen_until"]), str(v.get("member", "")), at)
        if key.kind == "progress":
            return key, ProgressInfo(rid, t, p, int(v["position"]), bool(v.get("at_end")), str(v.get("member", "")), at)
        if key.kind == "ack":
            return key, AckInfo(rid, t, p, int(v["offset"]), int(v["committed"]), str(v.get("member", "")), at)
    except (KeyError, TypeError, ValueError) as exc:
        raise HandoverFormatError(f"value of {key} is missing or has a bad field: {exc}") from None
    raise HandoverFormatError(f"unknown record kind {key.kind!r}")


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


# ---------------------------------------------------------------------------------------------- state


PartitionState = Literal["pending", "replaying", "handed-over", "acknowledged"]


@dataclass
class PartitionHandover:
    """Everything the handover topic says about one partition of one replay."""

    topic: str
    partition: int
    start: StartInfo | None = None
    handover: HandoverInfo | None = None
    guard: GuardInfo | None = None
    ack: AckInfo | None = None
    progress: ProgressInfo | None = None

    @property
    def start_offset(self) -> int | None:
        return self.start.offset if self.start else None

    @property
    def handover_offset(self) -> int | None:
        return self.handover.offset if self.handover else None

    @property
    def acknowledged(self) -> bool:
        """The live side confirmed it owns p from H on (the ack names the current H)."""
        return self.ack is not None and self.handover is not None and self.ack.offset == self.handover.offset

    @property
    def state(self) -> PartitionState:
        if self.acknowledged:
            return "acknowledged"
        if self.handover is not None:
            return "handed-over"
        if self.start is not None:
            return "replaying"
        return "pending"


@dataclass
class ReplayHandover:
    """Everything the handover topic says about one replay id: what the operator reads."""

    replay_id: str
    replay: ReplayInfo | None = None
    partitions: dict[TopicPartitionKey, PartitionHandover] = field(default_factory=dict)
    result: ResultInfo | None = None
    #: Every key that currently has a value (what a cleanup must tombstone).
    live_keys: set[bytes] = field(default_factory=set)
    #: Position of the `replay` record in the log; the earliest replay wins when two target one partition.
    order: int = 0

    @property
    def bootstrapped(self) -> bool:
        """The start is resolved and recorded: the `replay` and `start` records come in one transaction."""
        return self.replay is not None and any(p.start is not None for p in self.partitions.values())

    def partition(self, topic: str, partition: int) -> PartitionHandover:
        key = (topic, partition)
        if key not in self.partitions:
            self.partitions[key] = PartitionHandover(topic, partition)
        return self.partitions[key]

    def start_offsets(self) -> dict[TopicPartitionKey, int]:
        return {k: p.start.offset for k, p in self.partitions.items() if p.start is not None}

    def handover_offsets(self) -> dict[TopicPartitionKey, int]:
        return {k: p.handover.offset for k, p in self.partitions.items() if p.handover is not None}

    @property
    def planned(self) -> list[PartitionHandover]:
        return [p for p in self.partitions.values() if p.start is not None]

    @property
    def all_handed_over(self) -> bool:
        """Every planned partition has a handover (stop) offset: the replay group has nothing left to do."""
        planned = self.planned
        return bool(planned) and all(p.handover is not None for p in planned)

    @property
    def complete(self) -> bool:
        """Done from the protocol's view: all handed over, and in Handover mode all acknowledged."""
        if not self.all_handed_over:
            return False
        if self.replay is not None and self.replay.mode == "Handover":
            return all(p.acknowledged for p in self.planned)
        return True

    def apply(self, key: RecordKey, raw_key: bytes, record: HandoverRecord | None) -> None:
        if record is None:
            self.live_keys.discard(raw_key)
        else:
            self.live_keys.add(raw_key)
        if key.kind == "replay":
            self.replay = record  # type: ignore[assignment]
            return
        if key.kind == "result":
            self.result = record  # type: ignore[assignment]
            return
        if key.topic is None or key.partition is None:
            return
        part = self.partition(key.topic, key.partition)
        if key.kind in ("start", "handover", "guard", "ack", "progress"):
            setattr(part, key.kind, record)
        if not (part.start or part.handover or part.guard or part.ack or part.progress):
            del self.partitions[(key.topic, key.partition)]


@dataclass(frozen=True)
class ActiveHandover:
    """What a guard needs of the Handover-mode replay that covers one of its partitions."""

    replay_id: str
    start: int
    handover: int | None
    filter: RecordFilter


class HandoverView:
    """The state of every replay, built by applying the handover topic's records in log order."""

    def __init__(self) -> None:
        self.replays: dict[str, ReplayHandover] = {}
        self._applied = 0
        self._filters: dict[str, tuple[Mapping[str, Any], RecordFilter]] = {}
        #: Malformed records seen (skipped, never fatal: one bad writer must not stop every guard).
        self.malformed = 0

    def apply(self, raw_key: bytes | None, raw_value: bytes | None) -> None:
        try:
            key, record = decode(raw_key, raw_value)
        except HandoverFormatError:
            self.malformed += 1
            return
        self._applied += 1
        replay = self.replays.get(key.replay_id)
        if replay is None:
            if record is None:
                return
            replay = self.replays[key.replay_id] = ReplayHandover(key.replay_id, order=self._applied)
        if key.kind == "replay" and record is not None and replay.replay is None:
            replay.order = self._applied
        replay.apply(key, raw_key or b"", record)
        if not replay.live_keys:
            del self.replays[key.replay_id]

    def apply_all(self, messages: Iterable[tuple[bytes | None, bytes | None]]) -> "HandoverView":
        for k, v in messages:
            self.apply(k, v)
        return self

    def replay(self, replay_id: str) -> ReplayHandover:
        return self.replays.get(replay_id) or ReplayHandover(replay_id)

    def _filter_of(self, info: ReplayInfo) -> RecordFilter:
        cached = self._filters.get(info.replay_id)
        if cached is None or cached[0] != info.filter:
            compiled = RecordFilter.compile(FilterSpec.parse(dict(info.filter)))
            cached = self._filters[info.replay_id] = (info.filter, compiled)
        return cached[1]

    def active_for(self, live_group: str) -> dict[TopicPartitionKey, ActiveHandover]:
        """Per partition, the Handover-mode replay whose guard is `live_group` (the earliest if several)."""
        result: dict[TopicPartitionKey, ActiveHandover] = {}
        for replay in sorted(self.replays.values(), key=lambda r: r.order):
            info = replay.replay
            if info is None or info.mode != "Handover" or info.live_group != live_group:
                continue
            matcher = self._filter_of(info)
            for key, part in replay.partitions.items():
                if part.start is None or key in result:
                    continue
                result[key] = ActiveHandover(replay.replay_id, part.start.offset, part.handover_offset, matcher)
        return result


# ---------------------------------------------------------------------------------------------- commit metadata


@dataclass(frozen=True)
class CommitMark:
    """Metadata on a committed offset, recording what a side did atomically with the offset itself.

    - replay group, `finished`: this partition is finished at the committed offset (= its H / stop offset).
    - live group, `skip_from` F: matching records in [F, committed) were skipped, not processed.
    - live group, `reread_until` U: records in [committed, U) that do not match were processed already.
    """

    replay_id: str
    finished: str | None = None
    skip_from: int | None = None
    reread_until: int | None = None

    def encode(self) -> str:
        body: dict[str, Any] = {"reprise": FORMAT_VERSION, "replay": self.replay_id}
        if self.finished is not None:
            body["finished"] = self.finished
        if self.skip_from is not None:
            body["skip_from"] = self.skip_from
        if self.reread_until is not None:
            body["reread_until"] = self.reread_until
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, text: str | None) -> "CommitMark | None":
        """The mark in a committed offset's metadata; None when there is none (or it is someone else's)."""
        if not text or not text.startswith("{"):
            return None
        try:
            body = json.loads(text)
        except ValueError:
            return None
        if not isinstance(body, dict) or "reprise" not in body or not isinstance(body.get("replay"), str):
            return None
        return cls(body["replay"], body.get("finished"), _opt_int(body.get("skip_from")), _opt_int(body.get("reread_until")))


# ---------------------------------------------------------------------------------------------- replay side


def replay_finish(
    mode: str,
    position: int,
    *,
    end_offset: int | None = None,
    end_timestamp_ms: int | None = None,
    at_end: bool = False,
    live_committed: int | None = None,
) -> FinishReason | None:
    """Whether the replay stops this partition now, at `position` (the next offset it would process).

    `at_end` means the consumer reported the end of the partition since the last decision and has
    processed everything before it (nothing new arrived). The records below `position` are processed.
    """
    if end_offset is not None and position >= end_offset:
        return "end-bound"
    bounded = end_offset is not None or end_timestamp_ms is not None
    if mode == "Drain":
        return "end-of-partition" if at_end and not bounded else None
    if mode == "Parallel":
        if live_committed is not None and position >= live_committed:
            return "live-offset"
        return "end-of-partition" if at_end and not bounded else None
    if mode == "Handover":
        if live_committed is not None and position >= live_committed:
            return "caught-up"
        return "end-of-partition" if at_end else None
    raise ValueError(f"unknown mode {mode!r}")


def record_ends_partition(end_offset: int | None, end_timestamp_ms: int | None, offset: int, timestamp_ms: int | None) -> bool:
    """A bounded replay stops before this record: at the end offset, or at the first record at/after the end time."""
    if end_offset is not None and offset >= end_offset:
        return True
    return end_timestamp_ms is not None and timestamp_ms is not None and timestamp_ms >= end_timestamp_ms


# ---------------------------------------------------------------------------------------------- live side


class Verdict(Enum):
    PROCESS = "process"
    SKIP = "skip"


Matcher = Callable[[bytes | None, Headers, bytes | None], bool]


def _matches(matcher: Matcher | None, key: bytes | None, headers: Headers, value: bytes | None) -> bool:
    """Does the replay cover this record? A record its filter cannot decode is the replay's (it dead-letters it)."""
    if matcher is None:
        return True
    try:
        return matcher(key, headers, value)
    except Undecodable:
        return True


@dataclass
class GuardPartition:
    """The guard's state for one assigned partition of the live group, and its rules (HANDOVER.md).

    Per record offset o, with an active Handover-mode replay covering the partition:
      - o < S: process (the replay does not cover it);
      - H unknown, o >= S, the record matches the replay's filter: skip (F = first such o);
      - H known, S <= o < H, matching: skip (the replay processed it);
      - otherwise process.
    When H becomes known and matching records >= H were skipped (U > max(H, F)), seek back to max(H, F) and
    re-read up to U: there, matching records are processed and non-matching ones are skipped (they were
    processed the first time).
    """

    topic: str
    partition: int
    replay_id: str | None = None
    start: int | None = None
    handover: int | None = None
    matcher: Matcher | None = None
    first_skipped: int | None = None
    seen_until: int | None = None
    reread_until: int | None = None
    reread_replay: str | None = None
    reread_matcher: Matcher | None = None
    #: Set once the guard committed the handover offset itself (a quiet partition) or saw it committed.
    floor_committed: bool = False
    #: Records skipped since the assignment (for metrics).
    skipped: int = 0

    # -- assignment

    def restore(self, committed: int | None, mark: CommitMark | None) -> None:
        """Resume from the live group's committed offset and the mark the previous owner left on it."""
        if committed is not None and committed >= 0:
            self.seen_until = committed
        if mark is None:
            return
        if mark.skip_from is not None and committed is not None and committed > mark.skip_from:
            self.replay_id = mark.replay_id
            self.first_skipped = mark.skip_from
        if mark.reread_until is not None and committed is not None and committed < mark.reread_until:
            self.reread_until = mark.reread_until
            self.reread_replay = mark.replay_id

    # -- the replay's state changed (or was first learned)

    def update(self, active: ActiveHandover | None) -> int | None:
        """Apply what the handover topic now says; returns an offset to seek back to, or None."""
        if self.reread_until is not None and self.reread_matcher is None and active is not None \
                and active.replay_id == self.reread_replay:
            self.reread_matcher = active.filter.matches
        if active is not None and self.replay_id is not None and active.replay_id != self.replay_id:
            # A different replay took over this partition: the old one is gone as far as this guard knows.
            seek = self._abandon()
            self._adopt(active)
            return seek
        if active is None:
            return self._abandon()
        self._adopt(active)
        if active.handover is not None and self.handover is None:
            self.handover = active.handover
            skipped_from = self.first_skipped
            self.first_skipped = None
            if skipped_from is not None:
                target = max(active.handover, skipped_from)
                if self.seen_until is not None and self.seen_until > target:
                    return self._reread(target, self.seen_until, self.replay_id, self.matcher)
        return None

    def _adopt(self, active: ActiveHandover) -> None:
        self.replay_id = active.replay_id
        self.start = active.start
        self.matcher = active.filter.matches
        if active.handover is None:
            self.handover = None

    def _abandon(self) -> int | None:
        """The replay went away. If it went before publishing H, nobody covers what was skipped: re-read it."""
        seek = None
        if self.handover is None and self.first_skipped is not None and self.seen_until is not None \
                and self.seen_until > self.first_skipped:
            seek = self._reread(self.first_skipped, self.seen_until, self.replay_id, self.matcher)
        self.replay_id = self.start = self.handover = self.matcher = self.first_skipped = None
        self.floor_committed = False
        return seek

    def _reread(self, target: int, until: int, replay_id: str | None, matcher: Matcher | None) -> int:
        self.reread_until = max(until, self.reread_until or until)
        self.reread_replay = replay_id
        self.reread_matcher = matcher
        self.seen_until = target
        return target

    # -- per record

    def verdict(self, offset: int, key: bytes | None, headers: Headers, value: bytes | None) -> Verdict:
        self.seen_until = offset + 1
        if self.reread_until is not None:
            if offset < self.reread_until:
                verdict = Verdict.PROCESS
                # Non-matching records here were processed the first time round. Without the replay's
                # filter (it vanished before this guard learned it) every record is processed again:
                # at-least-once rather than loss.
                if self.reread_matcher is not None and not _matches(self.reread_matcher, key, headers, value):
                    verdict = Verdict.SKIP
                elif self.start is not None and self.handover is not None and self.start <= offset < self.handover:
                    verdict = Verdict.SKIP
                if offset + 1 >= self.reread_until:
                    # The window is read to its end (a quiet partition may have nothing after it).
                    self.reread_until = self.reread_replay = self.reread_matcher = None
                return self._skip() if verdict is Verdict.SKIP else verdict
            self.reread_until = self.reread_replay = self.reread_matcher = None
        if self.start is None or offset < self.start:
            return Verdict.PROCESS
        if self.handover is None:
            if _matches(self.matcher, key, headers, value):
                if self.first_skipped is None:
                    self.first_skipped = offset
                return self._skip()
            return Verdict.PROCESS
        if offset < self.handover and _matches(self.matcher, key, headers, value):
            return self._skip()
        return Verdict.PROCESS

    def _skip(self) -> Verdict:
        self.skipped += 1
        return Verdict.SKIP

    # -- commits

    def commit_mark(self, offset: int) -> CommitMark | None:
        """The mark a commit of `offset` for this partition must carry now (None: a plain commit)."""
        if self.reread_until is not None and offset < self.reread_until and self.reread_replay is not None:
            return CommitMark(self.reread_replay, reread_until=self.reread_until)
        if self.handover is None and self.first_skipped is not None and offset > self.first_skipped \
                and self.replay_id is not None:
            return CommitMark(self.replay_id, skip_from=self.first_skipped)
        return None

    def floor_commit(self, position: int | None) -> int | None:
        """In a quiet partition no record past H may come for a long time, so the service never commits
        past H and the handover is never acknowledged. Once everything below the guard's position is
        processed or covered, the guard may commit that position itself; returns it, or None."""
        if self.handover is None or self.floor_committed or self.reread_until is not None:
            return None
        if position is None or position < self.handover:
            return None
        return position

    @property
    def pending_ack(self) -> bool:
        return self.handover is not None and self.replay_id is not None


def ack_due(handover_offset: int, committed: int | None, mark: CommitMark | None) -> bool:
    """The live group owns the partition from H on: its committed offset is >= H, with no skip pending."""
    if committed is None or committed < handover_offset:
        return False
    return mark is None or (mark.skip_from is None and mark.reread_until is None)

