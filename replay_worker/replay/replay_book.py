"""The replay side's bookkeeping, pure: per partition one replica of the replay group holds, what it has read,
processed and committed, and from that what to commit with which mark, when a partition finishes and with which
H, when a finished mark is committed again, which `progress` records to publish, and what a revoke drops.

`consumer.ReplayConsumer` is the thin I/O around this (confluent-kafka calls, the handler, the handover topic);
conformance/REPLAY_TRACES.md gives every step's rules, and `replay_traces.json` holds them for every port (the
Java and Go ReplayBooks run the same traces). The rules are HANDOVER.md sections 1 and 5:

- A batch's positions are committed once its records are durable; a commit is asynchronous while none is
  unanswered and none failed, else synchronous (a slow or failing commit never lets uncommitted batches pile up).
  A forward whose producer still sends may leave one batch for the next commit.
- A partition finishes when `finish_rules.replay_finish` says so, on what the batch held (its end-of-partition
  event) and the live offsets last known: never on an end offset read after the handler ran, which moves on
  under steady traffic. Its position is committed with the `finished` mark before H is published.
- An asynchronous commit still unanswered at a finish may land after it and erase the mark: the mark is
  committed again (re-sealed) once every commit sent before it is answered, or with the revoke's commit when
  the partition is revoked first.
- Records of a partition revoked or lost while the batch was in hand are dropped: its position was committed
  without them, and the next owner reads them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from ..protocol.commit_marks import CommitMark
from ..protocol.finish_rules import FinishReason, record_ends_partition, replay_finish

TopicPartitionKey = tuple[str, int]

#: Batches a forward may run ahead of its commit while the producer still sends.
MAX_UNCOMMITTED_BATCHES = 2


class ConsumedItem(Protocol):
    """What the consumer returns: a record, or an event (an end of partition) that has an error. confluent-kafka's
    Message has these methods; the book reads nothing else."""

    def error(self) -> object | None: ...
    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def timestamp(self) -> tuple[int, int]: ...


@dataclass(frozen=True)
class PlannedPartition:
    """A partition of the replay's plan (its `start` record): where it starts, and its end bound."""

    start: int
    end_offset: int | None = None
    end_timestamp_ms: int | None = None


@dataclass(frozen=True)
class Offset:
    """An offset to commit for one partition, with its commit metadata (a mark's `encode()`, or None)."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None


@dataclass(frozen=True)
class Commit:
    """A commit the book asks for. `id`: 1, 2, ... in the order the book made them."""

    id: int
    offsets: tuple[Offset, ...]
    sync: bool


@dataclass(frozen=True)
class Handover:
    """A `handover` record to publish: H of a finished partition, and why it finished."""

    topic: str
    partition: int
    offset: int
    reason: str


@dataclass(frozen=True)
class Progress:
    """A `progress` record to publish: the committed position, and whether the partition is at its end."""

    topic: str
    partition: int
    committed: int
    at_end: bool


@dataclass
class PartitionBook:
    """This replica's view of one assigned partition."""

    topic: str
    partition: int
    #: Next offset to process; None until the committed offset is known.
    position: int | None = None
    committed: int | None = None
    end_offset: int | None = None
    end_timestamp_ms: int | None = None
    finished: str | None = None
    #: The consumer reported the end of the partition and nothing newer was read since.
    at_end: bool = False
    #: Offset of that end-of-partition event (past any trailing transaction markers).
    end_event_offset: int | None = None
    #: A bounded replay met its end record at this offset.
    end_met: int | None = None

    @property
    def key(self) -> TopicPartitionKey:
        return (self.topic, self.partition)

    @property
    def bounded(self) -> bool:
        return self.end_offset is not None or self.end_timestamp_ms is not None

    @property
    def taken_as_it_comes(self) -> bool:
        """Its records need no look one by one: read from a known position, not finished, no end bound (so a
        batch of its records is taken whole: `ReplayBook.advance`)."""
        return self.position is not None and not self.finished and self.end_met is None and not self.bounded


@dataclass(frozen=True)
class Assigned:
    """What an assignment of one partition asks for."""

    #: The planned start committed again (the group's offset had expired), synchronously.
    start_commit: Commit | None = None
    #: H published again for a partition whose committed offset carries this replay's `finished` mark.
    handover: Handover | None = None
    #: Not read: not in the plan, or finished.
    pause: bool = False


@dataclass(frozen=True)
class Finishing:
    """Partitions that finish together: commit `commit` (synchronously), then `finished()`."""

    commit: Commit
    reasons: tuple[tuple[TopicPartitionKey, str], ...]


@dataclass
class ReplayBook:
    """Every partition one replica of the replay group holds."""

    replay_id: str
    mode: str
    plan: Mapping[TopicPartitionKey, PlannedPartition]
    #: A shadow hold (REPRISE_FOLLOW): no partition finishes here; the operator stops the workers at the cutover.
    follow: bool = False
    #: A transactional forward: offsets commit inside the delivery's transaction, never asynchronously.
    transactional: bool = False
    parts: dict[TopicPartitionKey, PartitionBook] = field(default_factory=dict)
    #: The live group's committed offsets and the guards' `seen_until`, as last read (either may be empty).
    live: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    guards: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    #: H published for this replay, as the handover topic says (by any replica).
    published: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    #: The batch in hand: what the consumer returned since the last turn (several reads for a port that polls
    #: record by record; one for this worker).
    in_hand: list[Sequence[ConsumedItem]] = field(default_factory=list)
    #: Batches delivered and not committed yet (a forward's, while its producer still sends).
    uncommitted_batches: int = 0
    #: A failed asynchronous commit: the next commit is synchronous and carries every moving position again.
    commit_failed: bool = False
    #: Asynchronous commits made and answered (their difference is the commits in flight).
    async_sent: int = 0
    async_answered: int = 0
    #: Finishing commits to make again once every asynchronous commit sent before them is answered.
    reseal: dict[TopicPartitionKey, Offset] = field(default_factory=dict)
    reseal_after: int = 0
    #: What the last `progress` records said, per partition.
    reported: dict[TopicPartitionKey, tuple[int, bool]] = field(default_factory=dict)
    #: Commits asked for so far: the next one's id is this plus one.
    commits_made: int = 0

    def _commit(self, offsets: Iterable[Offset], sync: bool) -> Commit:
        self.commits_made += 1
        ordered = tuple(sorted(offsets, key=lambda o: (o.topic, o.partition)))
        return Commit(self.commits_made, ordered, sync)

    # -- assignment

    def assign(self, topic: str, partition: int, committed: int | None, metadata: str | None) -> Assigned:
        """A rebalance gave this partition, with the group's committed offset and its metadata."""
        key = (topic, partition)
        start = self.plan.get(key)
        part = self.parts[key] = PartitionBook(topic, partition)
        if start is None:
            # Not in the replay's plan (e.g. a partition added after the start was resolved): the live group
            # owns it entirely; the replay never reads it.
            part.finished = "not-in-plan"
            return Assigned(pause=True)
        start_commit = None
        if committed is None:
            # Planned, but the group's offset is gone (offsets of a long-empty group expire): resume at the
            # published start, the same offset the bootstrap committed. Duplicates, never a loss.
            committed = start.start
            start_commit = self._commit([Offset(topic, partition, committed)], sync=True)
        part.position = part.committed = committed
        part.end_offset, part.end_timestamp_ms = start.end_offset, start.end_timestamp_ms
        mark = CommitMark.decode(metadata)
        if mark is not None and mark.finished and mark.replay_id == self.replay_id:
            part.finished = mark.finished
            # The previous owner may have died between its commit and its publish: publish again (the same H
            # under the same key: idempotent).
            return Assigned(start_commit, Handover(topic, partition, committed, mark.finished), pause=True)
        return Assigned(start_commit)

    def revoke(self, keys: Iterable[TopicPartitionKey]) -> tuple[Commit | None, list[ConsumedItem]]:
        """Partitions taken away in a rebalance: their positions to commit (synchronously), and the records of
        the batch in hand that are dropped. Forgets them whatever the commit's result."""
        keys = list(keys)
        pending = [
            Offset(p.topic, p.partition, p.position)
            for p in (self.parts.get(k) for k in keys)
            if p is not None and not p.finished and p.position is not None
        ]
        # A finished mark still to be re-sealed goes with the revoke's commit: an asynchronous commit may have
        # erased it, and once the partition is gone no re-seal would come (the next owner would read on past H).
        pending += [mark for mark in (self.reseal.pop(k, None) for k in keys) if mark is not None]
        commit = self._commit(pending, sync=True) if pending else None
        return commit, self.lost(keys)

    def lost(self, keys: Iterable[TopicPartitionKey]) -> list[ConsumedItem]:
        """Partitions lost (someone else's already): forget them, nothing committed; the records of the batch
        in hand that are dropped."""
        gone = set(keys)
        for key in gone:
            self.parts.pop(key, None)
            self.reported.pop(key, None)
            self.reseal.pop(key, None)  # someone else's now: never re-sealed from here
        dropped: list[ConsumedItem] = []
        if not self.in_hand:
            return dropped
        kept: list[Sequence[ConsumedItem]] = []
        for items in self.in_hand:
            keep = []
            for item in items:
                if (item.topic(), item.partition()) in gone:
                    if item.error() is None:
                        dropped.append(item)
                else:
                    keep.append(item)
            kept.append(keep)
        self.in_hand = kept
        return dropped

    # -- a turn: take, deliver (the caller), end positions, checkpoint, decide, re-seal

    def read(self, items: Sequence[ConsumedItem]) -> None:
        """What the consumer returned: into the batch in hand (taken at the end of the turn)."""
        self.in_hand.append(items)

    def advance(self, moved: Iterable[tuple[PartitionBook, int]]) -> None:
        """The batch in hand taken as it is (the caller checked that it holds only records of partitions taken
        as they come: held, not finished, unbounded, no event): each partition's new position."""
        self.in_hand.clear()
        for part, at in moved:
            part.at_end = False
            part.position = at

    def take(self, end_of: Callable[[ConsumedItem], bool], dropped: list[ConsumedItem] | None = None) -> list:
        """The records of the batch in hand to process, record by record; the batch in hand is emptied.
        `end_of(item)`: whether an item with an error is an end-of-partition event (the caller deals with
        other errors). Records of partitions not held or finished, or past an end bound, go to `dropped`.
        Items come in runs per partition, so the partition's state is looked up once per run."""
        parts = self.parts
        batch: list[ConsumedItem] = []
        append = batch.append
        for items in self.in_hand:
            last_topic: str | None = None
            last_partition: int | None = -1
            part: PartitionBook | None = None
            take = bounded = False
            for item in items:
                if item.error() is not None:
                    if end_of(item):
                        ended = parts.get((item.topic(), item.partition()))  # type: ignore[arg-type]
                        if ended is not None and not ended.finished:
                            ended.at_end = True
                            ended.end_event_offset = item.offset()
                    last_topic = None
                    continue
                partition = item.partition()
                topic = item.topic()
                if partition != last_partition or topic != last_topic:
                    last_topic, last_partition = topic, partition
                    part = parts.get((topic, partition))  # type: ignore[arg-type]
                    # Not ours (any more), or finished: never processed past the stop offset.
                    take = part is not None and not part.finished and part.end_met is None
                    if take:
                        assert part is not None
                        part.at_end = False
                        bounded = part.bounded
                if not take:
                    if dropped is not None:
                        dropped.append(item)
                    continue
                assert part is not None
                offset: int = item.offset()  # type: ignore[assignment]
                if bounded:
                    ts_type, ts = item.timestamp()
                    if record_ends_partition(part.end_offset, part.end_timestamp_ms, offset, ts if ts_type else None):
                        part.end_met = offset
                        take = False
                        if dropped is not None:
                            dropped.append(item)
                        continue
                part.position = offset + 1
                append(item)
        self.in_hand.clear()
        return batch

    def anything_to_deliver(self, batch: Sequence[object]) -> bool:
        """Whether the turn delivers and checkpoints: records taken, or a partition at its end or its bound."""
        return bool(batch) or any(p.at_end or p.end_met is not None for p in self.parts.values())

    def end_positions(self) -> None:
        """After the delivery: a partition at its end bound moves to it; one at its end moves past the end event
        (past trailing transaction markers no record reaches: committing it makes the replay group's lag zero)."""
        for part in self.parts.values():
            if part.end_met is not None and not part.finished:
                part.position = max(part.position or part.end_met, part.end_met)
            elif part.at_end and part.end_event_offset is not None and part.position is not None:
                part.position = max(part.position, part.end_event_offset)

    def checkpoint(self, in_flight: Callable[[], bool] = bool, force: bool = False) -> Commit | bool:
        """What to commit after a delivery: a Commit; True: make the delivery durable, nothing to commit; False:
        nothing now (a forward's batch waits for the next commit). `in_flight()`: a forward's producer still
        sends (asked only when it matters: it polls the producer). `force` (a stop): every position,
        synchronously, even those an asynchronous commit may still carry."""
        moving = [
            Offset(p.topic, p.partition, p.position)
            for p in self.parts.values()
            if not p.finished and p.position is not None and (force or p.position != p.committed)
        ]
        if not force and moving and self.uncommitted_batches + 1 < MAX_UNCOMMITTED_BATCHES and in_flight():
            self.uncommitted_batches += 1
            return False
        if not moving:
            return True
        # At most one commit on its way: if the previous one has not come back (a broker going away, a
        # coordinator moving), this one waits. A transaction commits the offsets itself: no answer ever comes.
        asynchronous = not force and not self.transactional and not self.commits_in_flight and not self.commit_failed
        self.commit_failed = False
        if asynchronous:
            self.async_sent += 1
        return self._commit(moving, sync=not asynchronous)

    def committed(self, commit: Commit, ok: bool = True) -> None:
        """A commit was made (asynchronous: sent; its answer comes to `answered`); not ok: the group refused a
        synchronous one (not a member any more). Every commit but an assignment's start commit comes here."""
        if not ok:
            return
        self.uncommitted_batches = 0
        for offset in commit.offsets:
            part = self.parts.get((offset.topic, offset.partition))
            if part is not None:
                part.committed = offset.offset

    def answered(self, failed: Iterable[TopicPartitionKey]) -> None:
        """The answer to an asynchronous commit; `failed`: its partitions that failed (none: it landed)."""
        self.async_answered += 1
        failed = list(failed)
        if not failed:
            return
        self.commit_failed = True
        for key in failed:
            part = self.parts.get(key)
            if part is not None and not part.finished:
                part.committed = None

    @property
    def commits_in_flight(self) -> int:
        return self.async_sent - self.async_answered

    def decide(self) -> Finishing | None:
        """The partitions that finish now, and their finishing commit (with the `finished` mark)."""
        if self.follow:
            return None  # a shadow hold: the operator stops the workers at the cutover; no partition finishes
        live_offsets, guards = self.live, self.guards
        finishing: list[tuple[PartitionBook, str]] = []
        for part in self.parts.values():
            if part.finished or part.position is None:
                continue
            if part.end_met is not None:
                finishing.append((part, "end-bound"))
                continue
            live = guard = None
            if live_offsets or guards:
                live = live_offsets.get(part.key)
                guard = guards.get(part.key)
            if guard is not None:
                live = max(live or 0, guard)
            reason: FinishReason | None = replay_finish(
                self.mode,
                part.position,
                end_offset=part.end_offset,
                end_timestamp_ms=part.end_timestamp_ms,
                at_end=part.at_end,
                live_committed=live,
            )
            if reason is not None:
                finishing.append((part, reason))
        if not finishing:
            return None
        offsets = [
            Offset(p.topic, p.partition, p.position, CommitMark(self.replay_id, finished=r).encode())  # type: ignore[arg-type]
            for p, r in finishing
        ]
        return Finishing(self._commit(offsets, sync=True), tuple((p.key, r) for p, r in finishing))

    def finished(self, finishing: Finishing, ok: bool = True) -> list[Handover]:
        """The finishing commit's result (after `committed`): ok, the partitions are finished; the H to publish
        (then pause them). Not ok (not a member any more): nothing; whoever gets the partitions decides again."""
        if not ok:
            return []
        if self.commits_in_flight:
            # An asynchronous commit of the same positions, without the mark, is still on its way; librdkafka
            # retries it across a broker restart, so it may land after this commit and erase the mark.
            self.reseal.update({(o.topic, o.partition): o for o in finishing.commit.offsets})
            self.reseal_after = self.async_sent
        handovers = []
        for key, reason in finishing.reasons:
            part = self.parts[key]
            part.finished = reason
            handovers.append(Handover(part.topic, part.partition, part.position or 0, reason))
        return sorted(handovers, key=lambda h: (h.topic, h.partition))

    def resealing(self) -> Commit | None:
        """The finished marks to commit again, once every asynchronous commit sent before them is answered."""
        if not self.reseal or self.async_answered < self.reseal_after:
            return None
        offsets = [o for key, o in self.reseal.items() if key in self.parts]
        self.reseal.clear()
        return self._commit(offsets, sync=True) if offsets else None

    def done(self) -> bool:
        """Every planned partition is finished: here (this replica's own) or as the handover topic says."""
        if not self.plan:
            return False
        parts = self.parts
        published = self.published
        return all(k in published or (k in parts and parts[k].finished) for k in self.plan)

    # -- progress records

    def progress(self) -> list[Progress]:
        """Partitions whose committed position (or being at the end) changed since the last report."""
        records = []
        for part in list(self.parts.values()):
            if part.committed is None:
                continue
            now = (part.committed, part.at_end)
            if self.reported.get(part.key) != now:
                records.append(Progress(part.topic, part.partition, part.committed, part.at_end))
                self.reported[part.key] = now
        return sorted(records, key=lambda r: (r.topic, r.partition))

    def progress_failed(self) -> None:
        """Publishing them failed: the next report says everything again."""
        self.reported.clear()
