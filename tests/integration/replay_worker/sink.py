"""A replay handler for the tests: appends `R <topic> <partition> <offset>` per record to a file of its own.

The file is `$REPRISE_TEST_SINK_DIR/replay-<member>-<pid>.log`, written with one `write()` per batch on an
O_APPEND descriptor, so a `kill -9` leaves at most a torn last line (which the checks ignore). Records whose
value is `poison` raise, to exercise the dead-letter path.
"""

from __future__ import annotations

import os

_fd: int | None = None


def _open() -> int:
    global _fd
    if _fd is None:
        folder = os.environ["REPRISE_TEST_SINK_DIR"]
        member = os.environ.get("REPRISE_MEMBER_NAME", "worker")
        _fd = os.open(
            os.path.join(folder, f"replay-{member}-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
        )
    return _fd


def record(messages) -> None:
    for message in messages:
        if message.value() == b"poison":
            raise ValueError("poison record")
    lines = "".join(f"R {m.topic()} {m.partition()} {m.offset()}\n" for m in messages)
    if lines:
        os.write(_open(), lines.encode())
