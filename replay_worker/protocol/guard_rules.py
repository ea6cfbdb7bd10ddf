"""The guard's rules for one partition of the live group (HANDOVER.md section 6). Pure.

`GuardPartition` decides, per record, whether the live service processes it or the replay covers it (skip);
when the handover offset H becomes known (or the replay disappears) whether to seek back and re-read; and
which commit mark a commit of an offset carries. `ack_due` says when the live side may acknowledge H.
`guard_book.GuardBook` keeps the offsets around these rules; `guard.GuardedConsumer` is the I/O.

Notation (as in HANDOVER.md): S = replay start, H = handover offset, F = first skipped offset, U = the
guard's seen-until offset (one past the last record it saw).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Sequence

from .commit_marks import CommitMark
from .filters import Headers, RecordFilter, SchemaUnavailable, Undecodable


@dataclass(frozen=True)
class ActiveHandover:
    """What a guard needs of the Handover-mode replay that covers one of its partitions.

    With `problem` set the guard cannot follow this replay on the partition (a record it cannot read, a
    filter it cannot evaluate): it skips nothing for it and reports the problem; `start` and `filter` may
    then be None."""

    replay_id: str
    start: int | None
    handover: int | None
    filter: RecordFilter | None
    #: `<what>:<code>`, e.g. `unreadable-handover-record:newer-version`, `unevaluable-filter:unknown-field`.
    problem: str | None = None


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
    #: `matcher` as a function of the value alone, when the filter reads neither key nor headers (else None):
    #: lets `skips_by_value` judge a run of records at once.
    value_matcher: Callable[[bytes | None], bool] | None = None
    #: Set once the guard committed the handover offset itself (a quiet partition) or saw it committed.
    floor_committed: bool = False
    #: Records skipped since the assignment (for metrics).
    skipped: int = 0
    #: (replay id, problem) the handover view reports for this partition: the guard follows no replay here.
    view_problem: tuple[str, str] | None = None
    #: (replay id, problem) of the commit mark found at assignment when it could not be used.
    mark_problem: tuple[str, str] | None = None
    #: The committed mark could not be read: the previous owner may have skipped any covered record below
    #: the committed offset, so the first replay adopted counts as skipped from its start (F := S).
    unknown_skips: bool = False

    # -- assignment

    def restore(self, committed: int | None, mark: CommitMark | None) -> None:
        """Resume from the live group's committed offset and the mark the previous owner left on it."""
        if committed is not None and committed >= 0:
            self.seen_until = committed
        if mark is None:
            return
        if not mark.usable:
            # A newer (or broken) guard wrote it: what it skipped below C is unknown. Assume the worst that
            # the replay can cover (everything from S), so that H brings a re-read instead of a loss.
            self.mark_problem = (mark.replay_id, f"unusable-commit-mark:{mark.problem}")
            self.unknown_skips = committed is not None and committed > 0
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
        self.view_problem = (active.replay_id, active.problem) if active is not None and active.problem else None
        if self.view_problem is not None:
            # A replay the guard cannot follow covers nothing as far as it can prove: as if it were gone.
            active = None
        # (`filter` is set whenever `problem` is not: `handover.active_handovers` builds them together.)
        if (
            self.reread_until is not None
            and self.reread_matcher is None
            and active is not None
            and active.filter is not None
            and active.replay_id == self.reread_replay
        ):
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
        assert active.start is not None and active.filter is not None
        self.replay_id = active.replay_id
        self.start = active.start
        self.matcher = active.filter.matches
        self.value_matcher = active.filter.value_predicate()
        if active.handover is None:
            self.handover = None
        if self.unknown_skips:
            self.unknown_skips = False
            if self.first_skipped is None and self.seen_until is not None and self.seen_until > active.start:
                self.first_skipped = active.start

    def _abandon(self) -> int | None:
        """The replay went away. If it went before publishing H, nobody covers what was skipped: re-read it."""
        seek = None
        if (
            self.handover is None
            and self.first_skipped is not None
            and self.seen_until is not None
            and self.seen_until > self.first_skipped
        ):
            seek = self._reread(self.first_skipped, self.seen_until, self.replay_id, self.matcher)
        self.replay_id = self.start = self.handover = self.matcher = self.first_skipped = None
        self.value_matcher = None
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
        """The record's verdict; `SchemaUnavailable` (the filter could not get the value's schema) leaves the
        rules as they were, so the same record is judged again once the registry answers."""
        seen = self.seen_until
        try:
            return self._verdict(offset, key, headers, value)
        except SchemaUnavailable:
            self.seen_until = seen  # the matcher is asked before any other state changes
            raise

    def _verdict(self, offset: int, key: bytes | None, headers: Headers, value: bytes | None) -> Verdict:
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

    def skips_by_value(self, offsets: Sequence[int], values: list[bytes | None]) -> list[bool] | None:
        """`verdict` for a run of this partition's records at once (offsets ascending): per record True when
        it is skipped, with the same state afterwards as `verdict` record by record. Only where the rules
        hold alike for the whole run and need the values alone: no re-read window, and the run wholly
        before S, from S with H unknown, between S and H, or from H on. Else (or when a value cannot be
        decoded) None, having changed nothing: judge each record with `verdict`."""
        if not offsets or self.reread_until is not None:
            return None
        first, last = offsets[0], offsets[-1]
        start, handover = self.start, self.handover
        if start is None or last < start or (handover is not None and first >= handover):
            self.seen_until = last + 1
            return [False] * len(offsets)
        by_value = self.value_matcher
        if by_value is None or first < start or (handover is not None and last >= handover):
            return None
        try:
            covered = list(map(by_value, values))
        except Undecodable:
            return None  # the record-by-record rules count it as covered; `verdict` does that
        self.seen_until = last + 1
        count = covered.count(True)
        if count:
            self.skipped += count
            if handover is None and self.first_skipped is None:
                self.first_skipped = offsets[covered.index(True)]
        return covered

    def _skip(self) -> Verdict:
        self.skipped += 1
        return Verdict.SKIP

    # -- commits

    def commit_mark(self, offset: int) -> CommitMark | None:
        """The mark a commit of `offset` for this partition must carry now (None: a plain commit)."""
        if self.reread_until is not None and offset < self.reread_until and self.reread_replay is not None:
            return CommitMark(self.reread_replay, reread_until=self.reread_until)
        if (
            self.handover is None
            and self.first_skipped is not None
            and offset > self.first_skipped
            and self.replay_id is not None
        ):
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
    def problem(self) -> tuple[str, str] | None:
        """(replay id, problem) to report for this partition, or None."""
        return self.view_problem or self.mark_problem

    @property
    def pending_ack(self) -> bool:
        return self.handover is not None and self.replay_id is not None


def ack_due(handover_offset: int, committed: int | None, mark: CommitMark | None) -> bool:
    """The live group owns the partition from H on: its committed offset is >= H, with no skip pending."""
    if committed is None or committed < handover_offset:
        return False
    return mark is None or (mark.usable and mark.skip_from is None and mark.reread_until is None)
