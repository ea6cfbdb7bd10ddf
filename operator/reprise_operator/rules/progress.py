"""Replay progress: per-partition position and lag, totals, percent, ETA, and when a replay is drained.

Pure. The follow loop feeds it what Kafka and the handover topic said (`PartitionView`) and keeps a short
window of (time, remaining) samples per replay; the ETA interpolates that window, the way
kafka-lag-exporter turns offset lag into time lag (REFERENCE.md section 4).

When to look again: a replay about to move on (its last records due within two poll intervals, or only the live
side's acknowledgements or a `drainedFor` hold ending within one left) is looked at again soon rather than a
whole poll interval later (`looks_soon`), the way a controller asks to be requeued after a short delay.

"Drained" is not only "lag is zero": with transactional producers the last offset of a partition is a
commit marker that no consumer ever commits past, so `end - committed` can stay at 1 forever. A
partition whose consumer reported reaching the end of the partition also counts as drained.

Nor is it "lag is zero" while the records are still being written (a LakeReplay's backfill topic before Spark
completed, `end_final=False`): a drain that kept up with what was written so far, or a topic nothing was
written to yet, is not done. Such a partition is Pending or Replaying, the percent stays below 100 (0 while
nothing was written), and status leaves the lag out while nothing was written, rather than claim 0.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable, Literal

from ..api.common import PartitionProgress
from ..api.common import PartitionState as PartitionStateName
from ..api.common import Progress as ProgressStatus

PartitionState = Literal["Pending", "Replaying", "CaughtUp", "HandedOver", "Drained"]


@dataclass(frozen=True)
class PartitionView:
    """What is known of one partition of a running replay at one instant."""

    topic: str
    partition: int
    start: int
    end: int
    #: The replay group's position (next offset it will process); None before it committed anything.
    position: int | None
    #: Where the replay must stop: the handover offset H, or the live group's offset in Parallel mode.
    target: int | None = None
    #: The live side acknowledged the handover of this partition.
    handed_over: bool = False
    #: The replay consumer reported it reached the end of the partition (no newer record).
    at_end: bool = False
    handover_offset: int | None = None
    #: The replay published where it stopped this partition (H): it reached the live group, whether or not
    #: its latest position record has come in yet. Parallel ends here (CaughtUp); Handover waits for the ack.
    finished: bool = False
    #: The live side's guard cannot follow the replay here (its reason code): at-least-once, not exact.
    guard_problem: str | None = None
    #: `end` is where the partition ends; False while its records are still being written (the end moves on).
    end_final: bool = True

    @property
    def goal(self) -> int:
        """The offset this partition's replay is done at."""
        return self.target if self.target is not None else self.end

    @property
    def lag(self) -> int:
        position = self.start if self.position is None else self.position
        return max(0, self.goal - position)

    @property
    def processed(self) -> int:
        position = self.start if self.position is None else self.position
        return max(0, min(position, self.goal) - self.start)

    @property
    def total(self) -> int:
        return max(0, self.goal - self.start)

    @property
    def state(self) -> PartitionState:
        if self.handed_over:
            return "HandedOver"
        if self.finished:
            return "CaughtUp"
        if not self.end_final:
            return "Pending" if self.position is None else "Replaying"
        if self.position is None and self.start < self.goal:
            return "Pending"
        if self.lag == 0 or self.at_end:
            return "CaughtUp" if self.target is not None else "Drained"
        return "Replaying"

    @property
    def done(self) -> bool:
        if self.handed_over or self.finished:
            return True
        return self.end_final and (self.lag == 0 or self.at_end)


@dataclass
class EtaWindow:
    """Recent (time, remaining records) samples of one replay."""

    horizon: timedelta = timedelta(minutes=5)
    samples: deque[tuple[datetime, int]] = field(default_factory=lambda: deque(maxlen=120))

    def add(self, at: datetime, remaining: int) -> None:
        if self.samples and self.samples[-1][1] == remaining and remaining == 0:
            return
        self.samples.append((at, remaining))
        while self.samples and at - self.samples[0][0] > self.horizon:
            self.samples.popleft()

    def eta_seconds(self) -> int | None:
        """Seconds until `remaining` reaches zero at the recent rate; None while the rate is unknown."""
        if len(self.samples) < 2:
            return None
        (t0, r0), (t1, r1) = self.samples[0], self.samples[-1]
        if r1 == 0:
            return 0
        elapsed = (t1 - t0).total_seconds()
        drop = r0 - r1
        if elapsed <= 0 or drop <= 0:
            return None
        return int(round(r1 / (drop / elapsed)))


@dataclass(frozen=True)
class Progress:
    partitions: tuple[PartitionView, ...]
    eta_seconds: int | None

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def processed(self) -> int:
        return sum(p.processed for p in self.partitions)

    @property
    def total(self) -> int:
        return sum(p.total for p in self.partitions)

    @property
    def ends_final(self) -> bool:
        return all(p.end_final for p in self.partitions)

    @property
    def percent(self) -> int:
        if self.total == 0:
            return 100 if self.ends_final else 0
        percent = min(100, int(self.processed * 100 / self.total))
        return percent if self.ends_final else min(percent, 99)

    @property
    def reported_lag(self) -> int | None:
        """The lag status shows: none while nothing was written yet and more is to come (0 would say done)."""
        return None if self.total == 0 and not self.ends_final else self.lag

    @property
    def all_done(self) -> bool:
        return all(p.done for p in self.partitions)


def summarize(views: Iterable[PartitionView], window: EtaWindow, now: datetime) -> Progress:
    parts = tuple(sorted(views, key=lambda v: (v.topic, v.partition)))
    progress = Progress(parts, None)
    if progress.reported_lag is None:
        return progress  # nothing to measure a rate against yet
    window.add(now, progress.lag)
    return Progress(parts, window.eta_seconds())


def progress_status(progress: Progress, updated_at: datetime, eta: str | None = None) -> dict:
    """`status.progress`, built with the API's `Progress` model. `updated_at` is only written when something
    else changed (the caller compares without it); `eta` is etaSeconds as a Go duration, for kubectl get."""
    return ProgressStatus(
        partitions=[
            PartitionProgress(
                topic=p.topic,
                partition=p.partition,
                position=p.position,
                handover_offset=p.handover_offset,
                lag=p.lag if p.end_final or p.total else None,
                state=PartitionStateName(p.state),
                guard_problem=p.guard_problem,
            )
            for p in progress.partitions
        ],
        total_records=progress.total,
        processed=progress.processed,
        percent=progress.percent,
        lag=progress.reported_lag,
        eta_seconds=progress.eta_seconds,
        eta=eta,
        updated_at=updated_at,
    ).as_status()


@dataclass
class DrainClock:
    """Holds "drained" for `completion.drainedFor` before a replay may complete."""

    since: datetime | None = None

    def observe(self, drained: bool, now: datetime, hold: timedelta) -> bool:
        """True once drained has held continuously for `hold`."""
        if not drained:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since >= hold


#: How long after every partition was finished a replay is still looked at again soon: a guard acknowledges
#: within a second or two of its handover offset, and a live side that does not answer is left to the poll.
SETTLE_WINDOW_S = 10.0


def looks_soon(
    eta_seconds: int | None,
    poll_interval: float,
    finished_for: float | None,
    hold_left: float | None,
    following_for: float | None = None,
) -> bool:
    """Whether a replay is expected to move on before its next poll, so it is looked at again soon.

    - `hold_left`: drained, and completes when `completion.drainedFor` has held (seconds left; None while not
      drained): soon when that is within the poll interval;
    - `finished_for`: every partition finished (a handover offset recorded), since that many seconds, and
      only the live side's acknowledgements are awaited: soon for `SETTLE_WINDOW_S`;
    - else soon when the recent rate ends the remaining records within two poll intervals: the first rate of a
      replay counts its pods' start, when nothing was read yet, so an early ETA runs high (at 1M records the
      rule at one interval missed the end by a poll half of the time);
    - and soon, whatever the ETA, while the replay has been followed for less than one poll interval
      (`following_for`, seconds): there is no rate before the pods read and the first ones count their start,
      so a replay short enough to end within its first interval waited for the next poll in Running, most of
      the time from its last acknowledgement to Draining (benchmarks/end_to_end)."""
    if hold_left is not None:
        return hold_left <= poll_interval
    if finished_for is not None:
        return finished_for <= SETTLE_WINDOW_S
    if following_for is not None and following_for < poll_interval:
        return True
    return eta_seconds is not None and eta_seconds <= 2 * poll_interval
