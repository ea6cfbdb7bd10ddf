"""The end-of-run check, seed 002's "row counts per time bucket vs. expected values": pure comparison.

For every day (the time bucket), the records the lake holds in range after the filter are compared with the
records of that day in the topic (found by their `reprise-origin` header), and the topic is checked for
duplicates (the same key and sequence number twice) and for records of a key out of order. Any difference
fails the job with one line per day, so a LakeReplay never reports success over a wrong backfill topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping


@dataclass(frozen=True)
class DayInTopic:
    records: int
    duplicates: int = 0
    out_of_order: int = 0


@dataclass(frozen=True)
class DayCheck:
    day: str
    expected: int
    found: DayInTopic

    @property
    def ok(self) -> bool:
        return self.found.records == self.expected and self.found.duplicates == 0 and self.found.out_of_order == 0

    def describe(self) -> str:
        problems = []
        difference = self.found.records - self.expected
        if difference:
            problems.append(f"{abs(difference)} {'more' if difference > 0 else 'fewer'} than in the lake")
        if self.found.duplicates:
            problems.append(f"{self.found.duplicates} duplicate(s)")
        if self.found.out_of_order:
            problems.append(f"{self.found.out_of_order} record(s) out of per-key order")
        status = "; ".join(problems) if problems else "ok"
        return f"day {self.day}: lake {self.expected} records, topic {self.found.records}: {status}"


class ValidationFailed(RuntimeError):
    """The topic does not hold exactly the lake's records; `checks` are the days that differ."""

    def __init__(self, checks: list[DayCheck], topic: str) -> None:
        self.checks = checks
        lines = [f"validation failed: {len(checks)} day(s) of topic {topic} differ from the lake"]
        lines.extend("  " + c.describe() for c in checks)
        super().__init__("\n".join(lines))


def compare(expected: Mapping[str, int], found: Mapping[str, DayInTopic]) -> list[DayCheck]:
    """Every day in either side, in order; a day missing from one side counts as 0 records there."""
    days = sorted(set(expected) | set(found))
    return [DayCheck(day, expected.get(day, 0), found.get(day, DayInTopic(0))) for day in days]


def failures(checks: Iterable[DayCheck]) -> list[DayCheck]:
    return [c for c in checks if not c.ok]
