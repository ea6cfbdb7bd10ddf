"""Commit marks: the JSON both groups attach to a committed offset's metadata, so that what a side did is
recorded atomically with the offset itself (HANDOVER.md section 3). Pure.

Metadata that is not Reprise's (another library's, a person's note) is not a mark: decoding it gives None.

Metadata travels as a C string: the text and one NUL byte. confluent-kafka-python writes it so (it appends the
NUL itself) and reads it back only up to the first NUL, so a writer in another language appends the NUL
(`committed_metadata`), and every reader takes the text up to the first NUL (`decode`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .json_limits import loads, too_deep

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
    #: Why a Reprise mark cannot be used (`newer-version`, `malformed`); None for a usable mark.
    problem: str | None = None

    def encode(self) -> str:
        body: dict[str, Any] = {"reprise": FORMAT_VERSION, "replay": self.replay_id}
        if self.finished is not None:
            body["finished"] = self.finished
        if self.skip_from is not None:
            body["skip_from"] = self.skip_from
        if self.reread_until is not None:
            body["reread_until"] = self.reread_until
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    def committed_metadata(self) -> str:
        """The metadata string as it is stored with the offset: the mark and one NUL (HANDOVER.md section 3).
        Python hands confluent-kafka `encode()`, which appends the NUL; clients that store the string as it is
        (Java's, Go's) are given this."""
        return self.encode() + "\0"

    @property
    def usable(self) -> bool:
        """False for a Reprise mark this reader cannot read (a newer format version, or malformed): it says
        nothing reliable about what was skipped or processed below the offset."""
        return self.problem is None

    @classmethod
    def decode(cls, text: str | None) -> "CommitMark | None":
        """The mark in a committed offset's metadata; None when there is none (or it is someone else's).

        Metadata is Reprise's when it is a JSON object with a `reprise` member. Such a mark that this reader
        cannot use comes back with `problem` set (`newer-version`, `malformed`) and no fields. The text ends
        at its first NUL, as confluent-kafka reads it."""
        if text and "\0" in text:
            text = text[: text.index("\0")]
        if not text or not text.startswith("{"):
            return None
        if too_deep(text.encode("utf-8", "surrogatepass")):
            return None  # not JSON the protocol reads (HANDOVER.md section 2, "Limits"): someone else's, as text is
        try:
            body = loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(body, dict) or "reprise" not in body:
            return None
        version, replay = body["reprise"], body.get("replay")
        replay_id = replay if isinstance(replay, str) else ""
        if type(version) is not int or version < 1:
            return cls(replay_id, problem="malformed")
        if version > FORMAT_VERSION:
            return cls(replay_id, problem="newer-version")
        finished, skip_from, reread_until = body.get("finished"), body.get("skip_from"), body.get("reread_until")
        if (
            not isinstance(replay, str)
            or not (finished is None or isinstance(finished, str))
            or not all(o is None or type(o) is int for o in (skip_from, reread_until))
        ):
            return cls(replay_id, problem="malformed")
        return cls(replay, finished, skip_from, reread_until)
