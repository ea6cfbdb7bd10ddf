"""`python -m replay_worker.conformance.replay_testee`: the Python ReplayBook as a testee process of the one replay
trace runner (conformance/REPLAY_TRACES.md, "Testees"): one JSON step per line in, one JSON line of outputs out,
until stdin ends. The runner drives the Python book in-process; this is the same testee over the protocol that
the Java and Go testees speak, so the protocol itself is tested."""

from __future__ import annotations

import sys
from typing import Iterable, TextIO

from .replay_traces import BookTestee


def serve(lines: Iterable[str], out: TextIO) -> None:
    testee = BookTestee()
    for text in lines:
        if text.strip():
            out.write(testee.line(text) + "\n")
            out.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
