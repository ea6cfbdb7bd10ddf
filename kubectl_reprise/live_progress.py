"""What `kubectl reprise watch` shows: per-partition bars, records/s, lag, ETA and handover state, from the
successive statuses the operator writes. Pure: statuses and times in, lines out.

The operator measures positions and lag (status.progress) and the plan's offsets (status.plan); the rate
is the one thing the plugin measures itself, as the change of `processed` over a short window of its own
samples, so it needs nothing the status does not already hold.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from .tables import duration

#: Seconds of samples the records/s rate is measured over.
RATE_WINDOW_S = 10.0
BAR_WIDTH = 28
FINISHED = ("Complete", "Failed")


@dataclass(frozen=True)
class PartitionLine:
    name: str
    processed: int
    total: int
    lag: int | None
    state: str
    handover_offset: int | None
    rate: float | None

    @property
    def fraction(self) -> float:
        if self.total <= 0:
            return 1.0 if self.state in ("HandedOver", "CaughtUp", "Drained") else 0.0
        return min(1.0, self.processed / self.total)


@dataclass(frozen=True)
class Frame:
    """One look at a replay: the summary and a line per partition."""

    ref: str
    phase: str
    mode: str
    percent: int | None
    processed: int
    total: int
    lag: int | None
    rate: float | None
    eta_seconds: int | None
    partitions: tuple[PartitionLine, ...]
    message: str = ""


@dataclass
class RateMeter:
    """records/s per key from (time, processed) samples over the last `window` seconds."""

    window: float = RATE_WINDOW_S
    samples: dict[str, deque] = field(default_factory=dict)

    def add(self, key: str, at: float, processed: int) -> float | None:
        seen = self.samples.setdefault(key, deque())
        seen.append((at, processed))
        while len(seen) > 2 and at - seen[0][0] > self.window:
            seen.popleft()
        (t0, p0), (t1, p1) = seen[0], seen[-1]
        if t1 - t0 <= 0:
            return None
        return max(0.0, (p1 - p0) / (t1 - t0))


def frame(ref: str, mode: str, body: dict, at: float, meter: RateMeter) -> Frame:
    """The replay as its status shows it at monotonic time `at`."""
    status = body.get("status") or {}
    progress = status.get("progress") or {}
    planned = {
        (p.get("topic"), p.get("partition")): p
        for p in (status.get("plan") or {}).get("partitions") or []
        if isinstance(p, dict)
    }
    measured = {(p.get("topic"), p.get("partition")): p for p in progress.get("partitions") or []}
    lines = []
    for key in sorted(set(planned) | set(measured), key=lambda k: (str(k[0]), k[1] if isinstance(k[1], int) else -1)):
        plan, now = planned.get(key, {}), measured.get(key, {})
        start = plan.get("startOffset")
        position = now.get("position")
        processed = max(0, position - start) if position is not None and start is not None else 0
        lag = now.get("lag")
        if lag is not None:
            total = processed + lag
        elif start is not None and plan.get("endOffset") is not None:
            total = plan["endOffset"] - start
        else:
            total = 0
        name = f"{key[0]}/{key[1]}" if key[0] is not None else f"partition {key[1]}"
        state = now.get("state") or ("Pending" if plan else "")
        lines.append(
            PartitionLine(name, processed, total, lag, state, now.get("handoverOffset"), meter.add(name, at, processed))
        )
    processed = int(progress.get("processed") or sum(p.processed for p in lines))
    total = int(progress.get("totalRecords") or (status.get("plan") or {}).get("totalRecords") or 0)
    rate = meter.add("", at, processed)
    eta = progress.get("etaSeconds")
    lag = progress.get("lag")
    if eta is None and rate and lag:
        eta = int(round(lag / rate))
    phase = status.get("phase") or "Pending"
    message = ""
    if phase in FINISHED:
        found = next((c for c in status.get("conditions") or [] if c.get("type") == phase), None)
        if found:
            message = f"{found.get('reason', '')}: {found.get('message', '')}"
    elif phase == "PlanReady":
        found = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Approved" and c.get("status") == "False"),
            None,
        )
        if found:
            message = "waiting for approval: kubectl reprise approve " + ref.split("/", 1)[-1]
    return Frame(ref, phase, mode, progress.get("percent"), processed, total, lag, rate, eta, tuple(lines), message)


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A bar in eighths of a cell, so slow partitions still move visibly."""
    eighths = int(round(max(0.0, min(1.0, fraction)) * width * 8))
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part and full < width else ""
    return ("█" * full + partial).ljust(width, "·")


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}/s"


def _handover(line: PartitionLine) -> str:
    return line.state + (f" at {line.handover_offset}" if line.handover_offset is not None else "")


def summary(f: Frame) -> str:
    percent = f"{f.percent}%" if f.percent is not None else "-"
    lag = "-" if f.lag is None else f"{f.lag:,}"
    text = (
        f"{f.ref}  {f.phase}  {f.mode}  {percent}  {f.processed:,}/{f.total:,} records  lag {lag}  "
        f"{_rate(f.rate)}  ETA {duration(f.eta_seconds)}"
    )
    return text + (f"  ({f.message})" if f.message else "")


def terminal_lines(f: Frame) -> list[str]:
    """The live view: the summary, then a bar per partition."""
    width = max((len(p.name) for p in f.partitions), default=0)
    out = [summary(f)]
    for p in f.partitions:
        lag = "-" if p.lag is None else f"{p.lag:,}"
        out.append(
            f"  {p.name.ljust(width)}  {bar(p.fraction)}  {p.fraction * 100:5.1f}%  "
            f"{p.processed:>9,}/{p.total:<9,}  lag {lag:>7}  {_rate(p.rate):>8}  {_handover(p)}"
        )
    return out


def plain_lines(previous: Frame | None, f: Frame, stamp: str) -> list[str]:
    """For logs without a terminal: a summary line when the numbers moved, a line per partition whose state
    changed."""
    out: list[str] = []
    moved = previous is None or (previous.phase, previous.processed, previous.lag, previous.total) != (
        f.phase,
        f.processed,
        f.lag,
        f.total,
    )
    if moved:
        out.append(f"{stamp} {summary(f)}")
    before = {p.name: p for p in (previous.partitions if previous else ())}
    for p in f.partitions:
        old = before.get(p.name)
        if old is None or _handover(old) != _handover(p):
            out.append(
                f"{stamp}   {p.name} {_handover(p)} ({p.processed:,}/{p.total:,}, lag {'-' if p.lag is None else p.lag})"
            )
    return out


def redraw(lines: Iterable[str], previous_height: int) -> str:
    """ANSI: go back to the top of the previous frame, clear below, write the new one."""
    back = f"\x1b[{previous_height}F" if previous_height else ""
    return back + "\x1b[J" + "".join(line + "\n" for line in lines)
