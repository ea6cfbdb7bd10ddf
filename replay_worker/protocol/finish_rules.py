"""When the replay stops a partition: per mode (HANDOVER.md section 1), and where a bounded replay ends. Pure."""

from __future__ import annotations

from typing import Literal

FinishReason = Literal["end-bound", "end-of-partition", "live-offset", "caught-up", "forced", "not-in-plan"]


def replay_finish(
    mode: str,
    position: int,
    *,
    end_offset: int | None = None,
    end_timestamp_ms: int | None = None,
    at_end: bool = False,
    live_committed: int | None = None,
) -> FinishReason | None:
    """Whether the replay stops this partition now, at `position` (the next offset it would process).

    `at_end` means the consumer reported the end of the partition since the last decision and has
    processed everything before it (nothing new arrived). The records below `position` are processed.
    """
    if end_offset is not None and position >= end_offset:
        return "end-bound"
    bounded = end_offset is not None or end_timestamp_ms is not None
    if mode == "Drain":
        return "end-of-partition" if at_end and not bounded else None
    if mode == "Parallel":
        if live_committed is not None and position >= live_committed:
            return "live-offset"
        return "end-of-partition" if at_end and not bounded else None
    if mode == "Handover":
        if live_committed is not None and position >= live_committed:
            return "caught-up"
        return "end-of-partition" if at_end else None
    raise ValueError(f"unknown mode {mode!r}")


def record_ends_partition(
    end_offset: int | None, end_timestamp_ms: int | None, offset: int, timestamp_ms: int | None
) -> bool:
    """A bounded replay stops before this record: at the end offset, or at the first record at/after the end time."""
    if end_offset is not None and offset >= end_offset:
        return True
    return end_timestamp_ms is not None and timestamp_ms is not None and timestamp_ms >= end_timestamp_ms
