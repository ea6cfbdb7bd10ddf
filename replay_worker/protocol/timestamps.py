"""Instants on the wire: the one place that formats and parses the RFC 3339 times Reprise writes.

Status fields, conditions, Leases, the plan and the CLI all write UTC with a `Z`; Kafka speaks epoch
milliseconds. Every conversion between the three lives here so that two fields meaning the same instant
always print the same text (a second-precision status time and a millisecond record time differ only
in precision, never in zone or format). Pure: no I/O, no Kafka client.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def rfc3339(moment: datetime) -> str:
    """Second precision, as Kubernetes writes `lastTransitionTime`: `2024-05-01T12:00:00Z`."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micros(moment: datetime) -> str:
    """Microsecond precision, as a Lease's `renewTime` (MicroTime) is written: `2024-05-01T12:00:00.250000Z`."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_exact(moment: datetime) -> str:
    """Full precision, without a zero fraction: a seam decided at an exact instant is shown at that instant."""
    return rfc3339_micros(moment).replace(".000000Z", "Z")


def rfc3339_ms(epoch_ms: int) -> str:
    """A Kafka record time (epoch milliseconds) at millisecond precision: `2024-05-01T12:00:00.250Z`."""
    return from_epoch_ms(epoch_ms).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 / ISO-8601 time as an aware datetime; a time without a zone is UTC."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def epoch_ms(moment: datetime) -> int:
    """Epoch milliseconds, truncated (what `offsets_for_times` and record timestamps use)."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_epoch_ms(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
