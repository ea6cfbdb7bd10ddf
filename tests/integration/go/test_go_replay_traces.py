"""The Go ReplayBook (go/protocol/replay_book.go) passes every replay trace: the one trace runner drives the Go
testee (go/cmd/reprise-replay-testee) over stdin/stdout, as it drives the Python and Java ones
(conformance/REPLAY_TRACES.md). The testee is built outside the repository (pytest's tmp_path; Go's caches)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.unit.conformance.replay_trace_runner import run_process
from tests.unit.conformance.vectors import load

from .test_go_suite import ROOT, _go


def test_go_book_passes_every_replay_trace(tmp_path: Path) -> None:
    testee = tmp_path / "reprise-replay-testee"
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    build = subprocess.run(
        [_go(), "build", "-o", str(testee), "./cmd/reprise-replay-testee"],
        cwd=ROOT / "go",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    count, failures = run_process([str(testee)])
    scenarios = load("replay_traces.json")["scenarios"]
    assert count >= sum(len(s["steps"]) for s in scenarios)
    assert not failures, f"{len(failures)} runs failed:\n" + "\n".join(map(str, failures[:5]))
