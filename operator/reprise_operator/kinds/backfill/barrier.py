"""A Backfill's completion barrier: every downstream group past everything produced, and who is stuck.

Pure. The Backfill reconcile feeds it the produced ranges (per partition written to, the first offset
written and the end offset after writing) and each downstream group's committed offsets, once per poll;
it answers, per group and partition, how far the group still has to go, and since when a group that still
has records to pass has not moved.

A group passes a partition when its committed offset (the next record it will process) is at least the
partition's target, the last produced offset + 1. "Catching up" and "stuck" differ only in time: a
committed offset that is unchanged while records remain, for `barrier.stalledAfter`, is the seed's
"partition is stuck" alert. Because per-key order holds, the record the group is stuck on is usually an
older record of the same partition that needs an entity that was missing (seed 000's key-ordering
caveat): the Stalled message names that partition and offset so a person can look at exactly that record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Mapping, Sequence

from ...api import BarrierPartition, BarrierStatus, format_duration

TopicPartitionKey = tuple[str, int]
#: (group, topic, partition)
PositionKey = tuple[str, str, int]

#: Stalled messages name at most this many group/partition pairs (the status lists all of them).
MESSAGE_LIMIT = 5


@dataclass(frozen=True)
class ProducedRange:
    """What a backfill wrote to one partition: offsets `start` (first written) up to `end` (exclusive)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def target(self) -> int:
        """The offset a downstream group must commit: the last produced offset + 1."""
        return self.end

    @property
    def records(self) -> int:
        return max(0, self.end - self.start)


def ranges_between(topic: str, before: Mapping[int, int], after: Mapping[int, int]) -> list[ProducedRange]:
    """The ranges written while end offsets moved from `before` to `after` (partitions that did not move
    were not written to). Used when Reprise did not write the records itself (job and debezium sources)."""
    ranges = []
    for partition in sorted(after):
        start = before.get(partition, 0)
        if after[partition] > start:
            ranges.append(ProducedRange(topic, partition, start, after[partition]))
    return ranges


def ranges_from_worker(topic: str, partitions: Mapping[str, Mapping[str, int]]) -> list[ProducedRange]:
    """The ranges of the backfill worker's result (`{"2": {"first": 10, "last": 14, "count": 5}}`)."""
    ranges = [
        ProducedRange(topic, int(partition), int(entry["first"]), int(entry["last"]) + 1)
        for partition, entry in partitions.items()
        if int(entry.get("count", 1)) > 0
    ]
    return sorted(ranges, key=lambda r: r.partition)


@dataclass(frozen=True)
class GroupPosition:
    """One downstream group on one partition written to, at one observation."""

    group: str
    topic: str
    partition: int
    start: int
    target: int
    #: The group's committed offset; None when it has none for this partition.
    committed: int | None
    #: Since when this committed offset has been seen while records remained; None once passed.
    unchanged_since: datetime | None = None

    @property
    def key(self) -> PositionKey:
        return (self.group, self.topic, self.partition)

    @property
    def passed(self) -> bool:
        return self.committed is not None and self.committed >= self.target

    @property
    def remaining(self) -> int:
        """Records still to pass. Without a committed offset: everything produced (at least)."""
        position = self.start if self.committed is None else self.committed
        return max(0, self.target - position)

    def unchanged_for(self, now: datetime) -> timedelta:
        if self.passed or self.unchanged_since is None:
            return timedelta(0)
        return max(timedelta(0), now - self.unchanged_since)

    def stalled(self, now: datetime, after: timedelta) -> bool:
        return not self.passed and self.unchanged_since is not None and self.unchanged_for(now) >= after


def observe(
    ranges: Sequence[ProducedRange],
    groups: Sequence[str],
    committed: Mapping[str, Mapping[TopicPartitionKey, int]],
    previous: Mapping[PositionKey, GroupPosition],
    now: datetime,
) -> list[GroupPosition]:
    """Every group on every range, with the unchanged-since clock carried over from `previous`.

    The clock starts when a committed offset is first seen (with records remaining) and keeps running
    while later observations see the same offset; any move, or passing, resets it.
    """
    positions = []
    for group in groups:
        found = committed.get(group) or {}
        for r in ranges:
            offset = found.get((r.topic, r.partition))
            position = GroupPosition(group, r.topic, r.partition, r.start, r.target, offset)
            if position.passed:
                positions.append(position)
                continue
            before = previous.get(position.key)
            since = now
            if before is not None and before.committed == offset and before.unchanged_since is not None:
                since = before.unchanged_since
            positions.append(GroupPosition(group, r.topic, r.partition, r.start, r.target, offset, since))
    return positions


@dataclass(frozen=True)
class BarrierView:
    """The barrier at one observation."""

    positions: tuple[GroupPosition, ...]
    groups: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.positions)

    def group_passed(self, group: str) -> bool:
        return all(p.passed for p in self.positions if p.group == group)

    @property
    def groups_passed(self) -> int:
        return sum(1 for g in self.groups if self.group_passed(g))

    def remaining(self, group: str | None = None) -> int:
        return sum(p.remaining for p in self.positions if group is None or p.group == group)

    def stalled(self, now: datetime, after: timedelta) -> list[GroupPosition]:
        return [p for p in self.positions if p.stalled(now, after)]

    def slowest(self) -> dict[TopicPartitionKey, int | None]:
        """Per partition, the lowest committed offset over the groups (None if any group has none)."""
        by_partition: dict[TopicPartitionKey, list[int | None]] = {}
        for p in self.positions:
            by_partition.setdefault((p.topic, p.partition), []).append(p.committed)
        return {
            key: (None if any(c is None for c in offsets) else min(c for c in offsets if c is not None))
            for key, offsets in by_partition.items()
        }


def view_of(positions: Iterable[GroupPosition], groups: Sequence[str]) -> BarrierView:
    return BarrierView(tuple(sorted(positions, key=lambda p: p.key)), tuple(groups))


def describe(position: GroupPosition, now: datetime) -> str:
    """One stuck group/partition in words: which partition, which offset, how long."""
    waited = format_duration(timedelta(seconds=int(position.unchanged_for(now).total_seconds())))
    where = f"{position.topic} partition {position.partition}"
    if position.committed is None:
        return (
            f"group {position.group} has no committed offset on {where} (it must commit at least "
            f"{position.target}; nothing for {waited})"
        )
    return (
        f"group {position.group} is stuck on {where} at offset {position.committed} for {waited} "
        f"(it must commit at least {position.target}; {position.remaining} records to go)"
    )


def stalled_message(stalled: Sequence[GroupPosition], now: datetime) -> str:
    """The Stalled condition's message: the first few stuck partitions and the key-ordering caveat."""
    parts = [describe(p, now) for p in stalled[:MESSAGE_LIMIT]]
    more = len(stalled) - MESSAGE_LIMIT
    if more > 0:
        parts.append(f"and {more} more (see status.barrier.partitions)")
    return (
        "; ".join(parts) + ". The record at the committed offset is not being processed: if it needs an entity this "
        "Backfill re-emits later in the same partition (key ordering), skip that record or backfill it too"
    )


def barrier_status(view: BarrierView, now: datetime) -> dict:
    """`status.barrier`, built with the API's `BarrierStatus` model. `stalledSince` only once an offset was
    seen unchanged twice."""
    return BarrierStatus(
        partitions=[
            BarrierPartition(
                group=p.group,
                topic=p.topic,
                partition=p.partition,
                target_offset=p.target,
                remaining=p.remaining,
                committed_offset=p.committed,
                stalled_since=p.unchanged_since if p.unchanged_since is not None and p.unchanged_since < now else None,
            )
            for p in view.positions
        ],
        groups_passed=view.groups_passed,
        groups_total=len(view.groups),
        remaining=view.remaining(),
    ).as_status()


def previous_from_status(recorded: BarrierStatus | None) -> dict[PositionKey, GroupPosition]:
    """The last observation as the status recorded it (after an operator restart)."""
    found: dict[PositionKey, GroupPosition] = {}
    for entry in recorded.partitions if recorded else []:
        position = GroupPosition(
            entry.group,
            entry.topic,
            entry.partition,
            0,
            entry.target_offset,
            entry.committed_offset,
            entry.stalled_since,
        )
        found[position.key] = position
    return found
