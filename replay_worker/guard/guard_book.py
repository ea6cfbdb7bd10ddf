"""The guard's bookkeeping, pure: per assigned partition, the protocol rules plus what the service was handed
and has stored, and from that what the guard stores and commits, with which mark.

`guard.GuardedConsumer` is the thin I/O around this (confluent-kafka calls only); the model tests drive this
class directly against a simulated log with crashes. The rules per record are `guard_rules.GuardPartition`;
this class decides the offsets:

- A partition is held from its assignment until the handover view is current (`ticket`), then released.
- With automatic offset storing (the service's `enable.auto.offset.store`, default true), every handed
  record is stored as librdkafka would; otherwise the service stores what it processed.
- Skipped records at the tail of a batch are stored, with the mark that says they were skipped, once the
  service has stored everything it was handed; the guard commits those itself (`take_guard_commits`),
  because a service that commits only after handling records would never commit them.
- librdkafka commits a stored offset only when it is above the committed one (an equal or lower stored
  offset is silently not committed, whatever its metadata). After a seek back, the re-read's progress is
  below what was committed, and at the end of a re-read the offset is equal but the mark changes: the
  guard commits those stores itself too, explicitly.
- A quiet partition past H gets the floor commit (`floor_commits`) so that it can be acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import not_
from typing import Callable, Mapping, Sequence

from ..protocol.commit_marks import CommitMark
from ..protocol.filters import Headers
from ..protocol.guard_rules import ActiveHandover, GuardPartition, Verdict

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class Store:
    """An offset to store (or commit) for one partition, with its commit metadata."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None


@dataclass(frozen=True)
class SkipReport:
    """What a `guard` record says: the guard is skipping a partition for a replay."""

    replay_id: str
    topic: str
    partition: int
    first_skipped: int
    seen_until: int


@dataclass(frozen=True)
class ProblemReport:
    """What a `guard` record with `problem` says: the guard cannot follow a replay on a partition and skips
    nothing for it (HANDOVER.md section 6, Bad input)."""

    replay_id: str
    topic: str
    partition: int
    problem: str
    first_skipped: int | None
    seen_until: int | None


@dataclass
class PartitionBook:
    rules: GuardPartition
    #: Sync ticket the handover view must reach before the partition is released; None once released.
    ticket: int | None = None
    #: Offset after the last record handed to the service.
    handed_until: int | None = None
    #: Highest offset stored or committed for this partition (by the service or the guard).
    stored_until: int | None = None
    #: A store the guard commits itself (skipped tail, or one librdkafka would not commit); see the module doc.
    guard_commit: Store | None = None
    #: The highest offset stored in this session (at first the committed one): librdkafka commits a stored
    #: offset only above what it committed, which is at most this.
    high_water: int | None = None
    reported_seen: int | None = None
    reported_problem: tuple[str, str] | None = None


@dataclass
class GuardBook:
    """All assigned partitions of one guarded consumer."""

    auto_store: bool = True
    parts: dict[TopicPartitionKey, PartitionBook] = field(default_factory=dict)

    # -- assignment

    def assign(self, key: TopicPartitionKey, committed: int | None, mark: CommitMark | None, ticket: int) -> None:
        rules = GuardPartition(key[0], key[1])
        rules.restore(committed, mark)
        self.parts[key] = PartitionBook(rules, ticket=ticket, stored_until=committed, high_water=committed)

    def drop(self, key: TopicPartitionKey) -> None:
        self.parts.pop(key, None)

    def release(self, key: TopicPartitionKey, active: ActiveHandover | None) -> int | None:
        """The view is current for this partition: apply it; returns an offset to seek to, or None."""
        part = self.parts[key]
        part.ticket = None
        return self._update(part, active)

    def apply(self, snapshot: Mapping[TopicPartitionKey, ActiveHandover]) -> dict[TopicPartitionKey, int]:
        """The view changed: apply it to every released partition; returns the seeks to do."""
        seeks = {}
        for key, part in self.parts.items():
            if part.ticket is None:
                target = self._update(part, snapshot.get(key))
                if target is not None:
                    seeks[key] = target
        return seeks

    @staticmethod
    def _update(part: PartitionBook, active: ActiveHandover | None) -> int | None:
        target = part.rules.update(active)
        if target is not None:
            # Reading again from `target`: what is stored from now on starts there and carries the re-read
            # mark. (The offset committed so far stays valid: its skip mark leads a new owner to the same
            # re-read.) Anything stored above `target` must not be committed without that mark.
            part.stored_until = target
            part.handed_until = None
            part.guard_commit = None
        return target

    @property
    def guarded(self) -> bool:
        """Some partition needs per-record decisions (else the batch is handed as it is)."""
        return any(
            p.ticket is not None or p.rules.start is not None or p.rules.reread_until is not None
            for p in self.parts.values()
        )

    # -- per batch

    def judge(
        self, key: TopicPartitionKey, offset: int, record_key: bytes | None, headers: Headers, value: bytes | None
    ) -> bool:
        """True when the record goes to the service."""
        part = self.parts[key]
        if part.rules.verdict(offset, record_key, headers, value) is Verdict.PROCESS:
            part.handed_until = offset + 1
            return True
        return False

    def judge_run(
        self, key: TopicPartitionKey, offsets: Sequence[int], values: list[bytes | None]
    ) -> list[bool] | None:
        """`judge` for a run of one partition's records at once (True: to the service), when the rules allow
        (`GuardPartition.skips_by_value`); None: judge each record."""
        part = self.parts[key]
        skips = part.rules.skips_by_value(offsets, values)
        if skips is None:
            return None
        handed = list(map(not_, skips))  # in C: a comprehension was a Python step per record
        if True in handed:
            part.handed_until = offsets[len(handed) - 1 - handed[::-1].index(True)] + 1
        return handed

    def handed_unguarded(self, positions: Mapping[TopicPartitionKey, int]) -> list[Store]:
        """No replay active: every record was handed. `positions` are the consumer's positions (the offset
        after the last record returned, per partition); with automatic storing, those that moved are stored."""
        stores = []
        for key, position in positions.items():
            part = self.parts.get(key)
            if part is None or position < 0 or position == part.handed_until:
                continue
            part.handed_until = position
            part.rules.seen_until = position
            if self.auto_store:
                part.stored_until = position
                stores.append(Store(key[0], key[1], position))
        return stores

    def after_batch(self, key: TopicPartitionKey) -> Store | None:
        """What to store for a partition the batch touched (None: nothing)."""
        part = self.parts[key]
        rules = part.rules
        seen = rules.seen_until
        if self.auto_store and part.handed_until is not None:
            part.stored_until = max(part.stored_until or 0, part.handed_until)
        everything_stored = part.handed_until is None or (part.stored_until or 0) >= part.handed_until
        target = part.stored_until
        tail = False
        if everything_stored and seen is not None and (target is None or seen > target):
            target, tail = seen, True
        if target is None or (not self.auto_store and not tail):
            return None
        mark = rules.commit_mark(target)
        store = Store(key[0], key[1], target, mark.encode() if mark else None)
        self._note(part, store, tail)
        part.stored_until = target
        return store

    @staticmethod
    def _note(part: PartitionBook, store: Store, tail: bool) -> None:
        """Record a store; make it a guard commit when the service's commit would not carry it."""
        below = part.high_water is not None and store.offset <= part.high_water
        part.guard_commit = store if tail or below else None
        part.high_water = store.offset if part.high_water is None else max(part.high_water, store.offset)

    # -- the service stores or commits

    def service_store(self, topic: str, partition: int, offset: int, metadata: str | None = None) -> Store:
        """An offset the service stores or commits, with the guard's mark attached."""
        part = self.parts.get((topic, partition))
        if part is None or offset < 0:
            return Store(topic, partition, offset, metadata)
        mark = part.rules.commit_mark(offset)
        part.stored_until = max(part.stored_until or 0, offset)
        store = Store(topic, partition, offset, mark.encode() if mark else metadata)
        self._note(part, store, tail=False)
        return store

    def stored_offsets(self) -> list[Store]:
        """What a plain `commit()` of the service commits: every partition's stored offset with its mark,
        explicitly (librdkafka would skip those not above its committed offset; see the module doc)."""
        stores = []
        for key, part in self.parts.items():
            if part.stored_until is None or part.ticket is not None:
                continue
            mark = part.rules.commit_mark(part.stored_until)
            stores.append(Store(key[0], key[1], part.stored_until, mark.encode() if mark else None))
            part.guard_commit = None
            part.high_water = max(part.high_water or 0, part.stored_until)
        return stores

    # -- periodic

    def take_guard_commits(self) -> list[Store]:
        """Stores the guard commits itself. By calling consume() again the service is done with what it was
        handed before (the assumption librdkafka's automatic offset store makes)."""
        commits = [p.guard_commit for p in self.parts.values() if p.guard_commit is not None]
        for part in self.parts.values():
            part.guard_commit = None
        return commits  # type: ignore[return-value]

    def floor_commits(self, position_of: Callable[[TopicPartitionKey], int | None]) -> list[Store]:
        """Partitions past H whose committed offset may still be below H (quiet ones): commit the position.
        Call `floor_done` for each once the commit succeeded."""
        result = []
        for key, part in self.parts.items():
            if part.ticket is not None or part.rules.handover is None or part.rules.floor_committed:
                continue
            if part.handed_until is not None and (part.stored_until or 0) < part.handed_until:
                continue  # the service still works on records it was handed
            position = part.rules.seen_until
            if position is None:
                position = position_of(key)
            target = part.rules.floor_commit(position)
            if target is not None:
                result.append(Store(key[0], key[1], target))
        return result

    def floor_done(self, store: Store) -> None:
        part = self.parts.get((store.topic, store.partition))
        if part is not None:
            part.stored_until = max(part.stored_until or 0, store.offset)
            part.high_water = max(part.high_water or 0, store.offset)
            part.rules.floor_committed = True

    def skip_reports(self) -> list[SkipReport]:
        """Partitions being skipped whose seen-until moved since the last report."""
        reports = []
        for key, part in self.parts.items():
            rules = part.rules
            if (
                part.ticket is None
                and rules.handover is None
                and rules.first_skipped is not None
                and rules.replay_id is not None
                and rules.seen_until is not None
                and rules.seen_until != part.reported_seen
            ):
                reports.append(SkipReport(rules.replay_id, key[0], key[1], rules.first_skipped, rules.seen_until))
                part.reported_seen = rules.seen_until
        return reports

    def problem_reports(self) -> list[ProblemReport]:
        """Released partitions whose problem appeared or changed since the last report (each reported once)."""
        reports = []
        for key, part in self.parts.items():
            problem = part.rules.problem
            if part.ticket is not None or problem == part.reported_problem:
                continue
            part.reported_problem = problem
            if problem is not None:
                reports.append(
                    ProblemReport(
                        problem[0], key[0], key[1], problem[1], part.rules.first_skipped, part.rules.seen_until
                    )
                )
        return reports

    def pending_acks(self) -> dict[TopicPartitionKey, tuple[str, int]]:
        """Partitions whose handover offset is known: (replay id, H) to acknowledge once committed past H."""
        return {
            key: (part.rules.replay_id, part.rules.handover)  # type: ignore[misc]
            for key, part in self.parts.items()
            if part.ticket is None and part.rules.pending_ack
        }
