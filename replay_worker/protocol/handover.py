"""The handover topic's state: `HandoverView`, what its records add up to, per replay and per partition. Pure.

The records themselves (keys, values, decoding) are `wire`; the guard's rules are `guard_rules`; the replay's
finish rules are `finish_rules`; the commit marks are `commit_marks`. HANDOVER.md beside this file is the
specification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping

from .filters import FilterSpecError, RecordFilter, published_filter
from .guard_rules import ActiveHandover
from .record_values import SchemaSource
from .wire import (
    AckInfo,
    GuardInfo,
    HandoverFormatError,
    HandoverInfo,
    HandoverRecord,
    ProgressInfo,
    RecordKey,
    ReplayInfo,
    ResultInfo,
    StartInfo,
    TopicPartitionKey,
    decode,
    decode_key,
)

#: Kinds whose unreadable value stops the guard from acting on the replay (the others are advisory).
GOVERNING_KINDS = ("replay", "start", "handover")
#: (kind, topic, partition) of a record key; topic and partition are None for replay-wide kinds.
KeySlot = tuple[str, str | None, int | None]


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
    #: Keys of governing kinds whose latest value could not be read, with the reason (a `wire` error code).
    #: Such a key hides what it held before: nobody may act on a value a reader cannot see.
    unreadable: dict[KeySlot, str] = field(default_factory=dict)

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
        self.unreadable.pop((key.kind, key.topic, key.partition), None)
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


class HandoverView:
    """The state of every replay, built by applying the handover topic's records in log order."""

    def __init__(self, schema_sources: Callable[[str], SchemaSource] | None = None) -> None:
        self.replays: dict[str, ReplayHandover] = {}
        #: The schema source of a registry URL, for published filters over Avro or Protobuf values; without
        #: one such a filter cannot be compiled, and the guard skips nothing for its replay (safe, not exact).
        self._schema_sources = schema_sources
        self._applied = 0
        self._filters: dict[str, tuple[Mapping[str, Any], RecordFilter]] = {}
        #: Malformed records seen (skipped, never fatal: one bad writer must not stop every guard).
        self.malformed = 0

    def apply(self, raw_key: bytes | None, raw_value: bytes | None) -> str | None:
        """Apply one message; the wire code (`malformed-key`, `too-large`, ...) when it is malformed, else None."""
        try:
            key, record = decode(raw_key, raw_value)
        except HandoverFormatError as exc:
            self.malformed += 1
            self._unreadable(raw_key, exc.code)
            return exc.code
        self._applied += 1
        replay = self.replays.get(key.replay_id)
        if replay is None:
            if record is None:
                return None
            replay = self.replays[key.replay_id] = ReplayHandover(key.replay_id, order=self._applied)
        if key.kind == "replay" and record is not None and replay.replay is None:
            replay.order = self._applied
        replay.apply(key, raw_key or b"", record)
        if not replay.live_keys:
            del self.replays[key.replay_id]
        return None

    def _unreadable(self, raw_key: bytes | None, code: str) -> None:
        """A governing record that cannot be read (malformed, or written by a newer version) hides what its key
        held: the guard stops acting on that replay (or partition) and says why (HANDOVER.md, Bad input).
        A record whose key cannot be read is only counted: it belongs to no replay."""
        try:
            key = decode_key(raw_key)
        except HandoverFormatError:
            return
        if key.kind not in GOVERNING_KINDS or (key.kind == "replay") != (key.topic is None):
            return
        self._applied += 1
        replay = self.replays.get(key.replay_id)
        if replay is None:
            replay = self.replays[key.replay_id] = ReplayHandover(key.replay_id, order=self._applied)
        replay.unreadable[(key.kind, key.topic, key.partition)] = code
        replay.live_keys.add(raw_key or b"")

    def apply_all(self, messages: Iterable[tuple[bytes | None, bytes | None]]) -> "HandoverView":
        for k, v in messages:
            self.apply(k, v)
        return self

    def replay(self, replay_id: str) -> ReplayHandover:
        return self.replays.get(replay_id) or ReplayHandover(replay_id)

    def _filter_of(self, info: ReplayInfo) -> RecordFilter:
        cached = self._filters.get(info.replay_id)
        if cached is None or cached[0] != info.filter:
            body = dict(info.filter)
            registry = body.get("registry")
            schemas = self._schema_sources(registry) if self._schema_sources and isinstance(registry, str) else None
            compiled = published_filter(body, schemas)
            cached = self._filters[info.replay_id] = (info.filter, compiled)
        return cached[1]

    def active_for(self, live_group: str) -> dict[TopicPartitionKey, ActiveHandover]:
        """Per partition, the Handover-mode replay whose guard is `live_group` (the earliest if several).

        A replay the guard cannot follow (an unreadable `replay`, `start` or `handover` record, or a filter it
        cannot evaluate) still holds its partitions, as an entry with `problem` set: the guard skips nothing
        for it, and a later replay does not take those partitions over."""
        result: dict[TopicPartitionKey, ActiveHandover] = {}
        for replay in sorted(self.replays.values(), key=lambda r: r.order):
            info = replay.replay
            replay_problem = replay.unreadable.get(("replay", None, None))
            if replay_problem is not None:
                # Whose replay it is cannot be read: it may be this group's, unless an earlier readable value
                # said it is not (a replay record is written once; a changed one is a writer's fault anyway).
                if info is not None and (info.mode != "Handover" or info.live_group != live_group):
                    continue
                problem: str | None = f"unreadable-replay-record:{replay_problem}"
                matcher = None
            elif info is None or info.mode != "Handover" or info.live_group != live_group:
                continue
            else:
                try:
                    matcher, problem = self._filter_of(info), None
                except FilterSpecError as exc:
                    matcher, problem = None, f"unevaluable-filter:{exc.code}"
            slots = {key: None for key, part in replay.partitions.items() if part.start is not None}
            slots.update({(t, p): None for kind, t, p in replay.unreadable if t is not None and p is not None})
            for key in slots:
                if key in result:
                    continue
                part = replay.partitions.get(key)
                start = part.start.offset if part is not None and part.start is not None else None
                part_problem = problem
                for kind in ("start", "handover"):
                    code = replay.unreadable.get((kind, key[0], key[1]))
                    if part_problem is None and code is not None:
                        part_problem = f"unreadable-{kind}-record:{code}"
                if part_problem is not None:
                    result[key] = ActiveHandover(replay.replay_id, start, None, None, part_problem)
                elif start is not None and matcher is not None:
                    result[key] = ActiveHandover(
                        replay.replay_id, start, part.handover_offset if part else None, matcher
                    )
        return result
