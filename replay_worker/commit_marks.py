"""Commit marks: the JSON both groups attach to a committed offset's metadata, so that what a side did is
recorded atomically with the offset itself (HANDOVER.md section 3). Pure.

Metadata that is not Reprise's (another library's, a person's note) is not a mark: decoding it gives None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .wire import FORMAT_VERSION


@dataclass(frozen=True)
class CommitMark:
    """Metadata on a committed offset, recording what a side did atomically with the offset itself.

    - replay group, `finished`: this partition is finished at the committed offset (= its H / stop offset).
    - live group, `skip_from` F: matching records in [F, committed) were skipped, not processed.
    - live group, `reread_until` U: records in [committed, U) that do not match were processed already.
    """

    replay_id: str
    finished: str | None = None
    skip_from: int | None = None
    reread_until: int | None = None

    def encode(self) -> str:
        body: dict[str, Any] = {"reprise": FORMAT_VERSION, "replay": self.replay_id}
        if self.finished is not None:
            body["finished"] = self.finished
        if self.skip_from is not None:
            body["skip_from"] = self.skip_from
        if self.reread_until is not None:
            body["reread_until"] = self.reread_until
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, text: str | None) -> "CommitMark | None":
        """The mark in a committed offset's metadata; None when there is none (or it is someone else's)."""
        if not text or not text.startswith("{"):
            return None
        try:
            body = json.loads(text)
        except ValueError:
            return None
        if not isinstance(body, dict) or "reprise" not in body or not isinstance(body.get("replay"), str):
            return None
        return cls(body["replay"], body.get("finished"), _opt_int(body.get("skip_from")), _opt_int(body.get("reread_until")))


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
