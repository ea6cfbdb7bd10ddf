"""The error every spec reader of the replay contract raises (start, end, durations, filters' neighbours).

Its own module so that the grammars (`durations`, `start_position`) can share it without importing each
other; `field` and `code` are the same in every language (the conformance vectors compare them).
"""

from __future__ import annotations


class SpecError(ValueError):
    """A start or end spec that cannot be understood; the message says what is accepted. `field` names the
    part at fault and `code` what is wrong, the same in every language (the conformance vectors)."""

    def __init__(self, message: str, *, field: str = "", code: str = "invalid") -> None:
        super().__init__(message)
        self.field = field
        self.code = code
