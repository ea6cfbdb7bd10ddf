"""Which days to write, in which groups and slices, and how fast: pure decisions, no Spark.

A run counts the records of every day in range first (one aggregation over the lake). From those counts
and the progress of earlier attempts, `plan_writes()` makes the write units:

- days an earlier attempt finished are skipped (their `done` marker exists);
- the remaining days, oldest first, are grouped while a group stays within `max_records_per_write` records
  (a larger day is a unit of its own): one Spark job per unit, one resume point per unit;
- a day an earlier attempt started but did not finish may be partly in the topic: its unit is marked to
  leave out the records already there (job.py reads them back by their headers);
- with a rate limit a unit is cut into slices of about `rate x slice_seconds` records (disjoint sets of
  keys, so per-key order holds) and `Pacer` waits after each slice until the job is back under the rate.

Pacing is done by the driver between Spark jobs, not inside tasks: the job keeps Spark's own Kafka sink
with no Python in the executors, and the limit holds for the whole job whatever the executor count.
Within a slice the sink runs at full speed, so the rate holds over windows of `slice_seconds` and longer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Collection, Mapping


@dataclass(frozen=True)
class WriteUnit:
    """Consecutive days to write in one go."""

    days: tuple[str, ...]
    records: int
    """Input records of these days (before leaving out those already in the topic)."""
    slices: int
    """Spark jobs the unit is written in (1 without a rate limit)."""
    resume: tuple[str, ...]
    """Days an earlier attempt started: their records already in the topic are left out."""


@dataclass(frozen=True)
class ReplayPlan:
    units: tuple[WriteUnit, ...]
    already_written: tuple[str, ...]
    """Days in range that earlier attempts finished."""

    @property
    def records(self) -> int:
        return sum(u.records for u in self.units)


def plan_writes(
    day_counts: Mapping[str, int],
    done: Collection[str],
    started: Collection[str],
    *,
    max_records_per_write: int,
    max_records_per_second: int = 0,
    slice_seconds: float = 5.0,
) -> ReplayPlan:
    """The write units for the days in `day_counts` (day -> input records) that are not `done`."""
    if max_records_per_write < 1:
        raise ValueError("max_records_per_write must be at least 1")
    finished = set(done)
    pending = [(day, count) for day, count in sorted(day_counts.items()) if day not in finished and count > 0]
    groups: list[list[tuple[str, int]]] = []
    for day, count in pending:
        if groups and sum(c for _, c in groups[-1]) + count <= max_records_per_write:
            groups[-1].append((day, count))
        else:
            groups.append([(day, count)])
    started_set = set(started)
    units = tuple(
        WriteUnit(
            days=tuple(d for d, _ in group),
            records=sum(c for _, c in group),
            slices=slices_for(sum(c for _, c in group), max_records_per_second, slice_seconds),
            resume=tuple(d for d, _ in group if d in started_set),
        )
        for group in groups
    )
    return ReplayPlan(units=units, already_written=tuple(sorted(d for d in day_counts if d in finished)))


def slices_for(records: int, max_records_per_second: int, slice_seconds: float) -> int:
    """How many paced Spark jobs `records` are written in: 1 without a limit."""
    if max_records_per_second <= 0 or records <= 0:
        return 1
    per_slice = max(1, int(max_records_per_second * slice_seconds))
    return max(1, math.ceil(records / per_slice))


class Pacer:
    """Keeps the records written since the first write at or below `rate` per second, by waiting between writes."""

    def __init__(
        self, rate: int, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._began: float | None = None
        self.written = 0
        self.waited = 0.0

    def begin(self) -> None:
        """Mark the start of writing (the first call counts; later ones are ignored)."""
        if self._began is None:
            self._began = self._clock()

    def wrote(self, records: int) -> float:
        """Account for `records` just written; wait until they fit the rate. Returns the seconds waited."""
        self.begin()
        self.written += records
        if self.rate <= 0:
            return 0.0
        assert self._began is not None
        due = self._began + self.written / self.rate
        wait = due - self._clock()
        if wait > 0:
            self._sleep(wait)
            self.waited += wait
            return wait
        return 0.0
