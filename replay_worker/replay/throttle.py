"""Throttling in records per second and bytes per second: two token buckets. Pure (the clock is passed in).

The replay loop asks `delay(records, bytes, now)` after reading a batch and sleeps that long before handing
it on, so a replay never pushes the handler, the target topic or the brokers harder than asked. A bucket
holds at most one second of budget, so an idle pause does not turn into a burst afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Bucket:
    rate: float
    tokens: float = 0.0
    updated: float | None = None

    def take(self, amount: float, now: float) -> float:
        """Take `amount` tokens; the seconds to wait until the balance is no longer negative."""
        if self.updated is None:
            self.tokens = self.rate
        else:
            self.tokens = min(self.rate, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        self.tokens -= amount
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


@dataclass
class Throttle:
    """Limits of `records_per_second` and `bytes_per_second`; 0 (or less) means unlimited."""

    records_per_second: float = 0.0
    bytes_per_second: float = 0.0
    _buckets: list[tuple[str, _Bucket]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.records_per_second > 0:
            self._buckets.append(("records", _Bucket(self.records_per_second)))
        if self.bytes_per_second > 0:
            self._buckets.append(("bytes", _Bucket(self.bytes_per_second)))

    @property
    def unlimited(self) -> bool:
        return not self._buckets

    def delay(self, records: int, size: int, now: float) -> float:
        """Account for a batch of `records` records of `size` bytes; seconds to wait before passing it on."""
        wait = 0.0
        for kind, bucket in self._buckets:
            wait = max(wait, bucket.take(records if kind == "records" else size, now))
        return wait
