"""A handler for the LakeReplay tests: the service code the drain and continuation consumers call.

`record(messages)` appends one JSON line per record, `[topic, partition, offset, key, value, headers, wall_ns]`,
to `$REPRISE_TEST_SINK_DIR/lake-<member>-<pid>.jsonl`, with one `write()` per batch on an O_APPEND descriptor
(a killed process leaves at most a torn last line, which `lake_scenario.Sink` ignores). The value is decoded
JSON; `wall_ns` says when the record was processed, so a test can check that every lake record was processed
before the first Kafka record.
"""

from __future__ import annotations

import json
import os
import time

_fd: int | None = None


def _open() -> int:
    global _fd
    if _fd is None:
        folder = os.environ["REPRISE_TEST_SINK_DIR"]
        member = os.environ.get("REPRISE_MEMBER_NAME", "worker")
        _fd = os.open(
            os.path.join(folder, f"lake-{member}-{os.getpid()}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
        )
    return _fd


def record(messages) -> None:
    now = time.time_ns()
    lines = []
    for m in messages:
        key = m.key().decode() if m.key() is not None else None
        value = json.loads(m.value()) if m.value() is not None else None
        headers = {k: (v.decode() if v is not None else None) for k, v in m.headers() or []}
        lines.append(json.dumps([m.topic(), m.partition(), m.offset(), key, value, headers, now]) + "\n")
    if lines:
        os.write(_open(), "".join(lines).encode())
