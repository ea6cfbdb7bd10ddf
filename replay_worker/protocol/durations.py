"""Durations: the one grammar Reprise reads a length of time in, and the one way it writes one.

A duration is a run of `<number><unit>` parts (`1h30m`, `1.5s`, `250ms`), Go's `time.ParseDuration` form,
which is what Kubernetes users write. Units: ns, us, ms, s, m, h, and the worker also reads d and w.

Two readers share that grammar and differ only in what else they accept, because each side is pinned
by something outside this module:

- `parse_go_duration` (the API): exactly Go's form, the pattern the CRDs admit (`GO_DURATION`), zero allowed.
- `parse_duration` (the worker's `REPRISE_START` and the conformance vectors, HANDOVER.md section 5.1):
  the same parts plus days and weeks, bare seconds (`90`) and ISO-8601 (`PT2H`), positive only.

`format_duration` writes the shortest Go form. Pure: no I/O.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from .spec_error import SpecError

#: Go's `time.ParseDuration` units, without signs (a negative wait means nothing here).
GO_DURATION = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+)$"

_UNIT_SECONDS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
    "d": Decimal(86400),
    "w": Decimal(604800),
}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h|d|w)")
_GO = re.compile(GO_DURATION)
_ISO = re.compile(
    r"P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)
#: The units the worker's form reads (Go's sub-millisecond units are not part of it: see the vectors).
_WORKER_UNITS = ("ms", "s", "m", "h", "d", "w")


def _parts_seconds(text: str, units: tuple[str, ...]) -> Decimal | None:
    """Seconds of a run of `<number><unit>` parts that is exactly `text`, else None."""
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text or any(u not in units for _, u in parts):
        return None
    return sum((Decimal(n) * _UNIT_SECONDS[u] for n, u in parts), Decimal(0))


def parse_go_duration(value: str | timedelta) -> timedelta:
    """A Go-style duration (`720h`, `1h30m`, `1.5s`, `250ms`, `0`) as a timedelta: the API's form.

    >>> parse_go_duration("1h30m")
    datetime.timedelta(seconds=5400)
    """
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError("a duration must not be negative")
        return value
    if not isinstance(value, str) or not _GO.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a duration: use a number with a unit, such as 30s, 15m, 720h or 1h30m "
            "(units ns, us, ms, s, m, h)"
        )
    seconds = Decimal(0) if value == "0" else _parts_seconds(value, ("ns", "us", "ms", "s", "m", "h"))
    assert seconds is not None  # the pattern above admits only such parts
    return timedelta(microseconds=int((seconds * 1_000_000).to_integral_value()))


def format_duration(value: timedelta) -> str:
    """The shortest Go-style text of a duration: `1h30m`, `720h`, `45s`, `1.5s`, `250ms`, `0s`."""
    micros = round(value.total_seconds() * 1_000_000)
    if micros < 0:
        raise ValueError("a duration must not be negative")
    if micros == 0:
        return "0s"
    if micros < 1_000_000:
        if micros % 1000 == 0:
            return f"{micros // 1000}ms"
        return f"{micros}us"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    text = ""
    if hours:
        text += f"{hours}h"
    if minutes:
        text += f"{minutes}m"
    if seconds or fraction:
        text += f"{seconds}" + (f".{fraction:06d}".rstrip("0") if fraction else "") + "s"
    return text


def parse_duration(value: Any, what: str = "duration") -> float:
    """Seconds from a number (seconds), `90s`/`15m`/`2h`/`7d`/`1h30m`, or ISO-8601 `PT2H`/`P1D`: the
    worker's form (conformance vectors, `replay_start.json` `parse`). SpecError names `what`."""
    if isinstance(value, bool):
        raise SpecError(f"{what}: {value!r} is not a duration", field=what, code="bad-duration")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        iso = _ISO.fullmatch(text.upper()) if text.upper().startswith("P") else None
        if iso and any(iso.groupdict().values()):
            found = iso.groupdict()
            seconds = float(sum(Decimal(found[u] or 0) * _UNIT_SECONDS[u] for u in ("w", "d", "h", "m", "s")))
        elif re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            parts = _parts_seconds(text, _WORKER_UNITS)
            if parts is None:
                raise SpecError(
                    f"{what}: {value!r} is not a duration (use e.g. 90s, 15m, 2h, 7d, 1h30m or PT2H)",
                    field=what,
                    code="bad-duration",
                )
            seconds = float(parts)
    else:
        raise SpecError(f"{what}: {value!r} is not a duration", field=what, code="bad-duration")
    if seconds <= 0:
        raise SpecError(f"{what}: must be positive, got {value!r}", field=what, code="duration-not-positive")
    return seconds
