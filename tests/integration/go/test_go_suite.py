"""The Go module (`go/`) and the Go example service (`examples/seed003-go/`) under `make test`.

`go test ./...` runs in each module against the session's real Kafka broker (`REPRISE_TEST_BOOTSTRAP`): the
conformance vectors, the guard and the replay role on the broker, and the seed 003 demonstration. Go's own
test runner does the work; this wrapper starts the broker, streams the `go test -json` events to a file (its
path is in the failure message), and asserts the run passed and that the tests it must contain ran. The Go
build cache stays in GOCACHE / GOMODCACHE (outside the repository).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.unit.conformance.replay_trace_runner import run_process

ROOT = Path(__file__).resolve().parents[3]
GO_MODULES = {
    "go": (
        "TestConformanceWire",
        "TestConformanceFilters",
        "TestConformanceCommitMarks",
        "TestConformanceGuardTraces",
        "TestConformanceReplayStart",
        "TestConformanceReplayFinish",
        "TestGuardSkipsSeeksBackCommitsMarksAndAcknowledges",
        "TestBootstrapResolvesStartOnce",
        "TestDrainWithReplicasJoiningAndLeaving",
        "TestReplicasStartingTogether",
        "TestHandoverExactlyOnceWithTheGuard",
        "TestPoisonRecordsAreDeadLetteredOrSkipped",
        "TestSettingsErrorsNameTheVariable",
        "TestGuardWithBadInputSkipsNothingAndSaysWhy",
        "TestPoisonRecords",
    ),
    "examples/seed003-go": ("TestSeedBugShownAndFixed",),
}
#: A bound for one module's run (the first build of confluent-kafka-go's cgo part takes minutes).
GO_TEST_TIMEOUT_S = 1800


def _go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if found is None:
        pytest.fail("the Go toolchain is not installed (https://go.dev/dl/): the Go module's tests need `go` on PATH")
    return found


@pytest.mark.parametrize("module", sorted(GO_MODULES))
def test_go_suite(module: str, kafka, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["REPRISE_TEST_BOOTSTRAP"] = kafka.bootstrap
    env.setdefault("GOFLAGS", "-buildvcs=false")
    events = tmp_path / "go-test.jsonl"
    with events.open("w") as out:
        proc = subprocess.Popen(
            [_go(), "test", "-json", "-count=1", "-p", "1", "-timeout", "25m", "./..."],
            cwd=ROOT / module,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=GO_TEST_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"go test in {module} did not finish within {GO_TEST_TIMEOUT_S}s; events in {events}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    outcomes: Counter[str] = Counter()
    top_level: dict[str, str] = {}
    failed_output: list[str] = []
    for line in events.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            failed_output.append(line)  # build errors are plain text
            continue
        action, test = event.get("Action"), event.get("Test")
        if test and action in ("pass", "fail", "skip"):
            outcomes[action] += 1
            if "/" not in test:
                top_level[test] = action
        if action == "output" and ("FAIL" in event.get("Output", "") or "_test.go" in event.get("Output", "")):
            failed_output.append(event["Output"].rstrip())
    detail = "\n".join(failed_output[-60:])
    assert code == 0, f"go test in {module} exited {code}: {dict(outcomes)}; events in {events}\n{detail}"
    assert outcomes["fail"] == 0 and outcomes["skip"] == 0, f"{dict(outcomes)}\n{detail}"
    missing = [name for name in GO_MODULES[module] if top_level.get(name) != "pass"]
    assert not missing, f"tests that must run and pass in {module} did not: {missing} (ran: {sorted(top_level)})"
    assert outcomes["pass"] >= len(GO_MODULES[module])


# -- the replay traces, run by the one trace runner through the Go testee (conformance/REPLAY_TRACES.md)

GO_REPLAY_TESTEE = ROOT / "go" / "cmd" / "reprise-replay-testee"


@pytest.mark.timeout(900)
def test_the_go_replay_book_passes_every_replay_trace(tmp_path: Path) -> None:
    if not GO_REPLAY_TESTEE.is_dir():
        pytest.skip(f"no Go replay testee yet ({GO_REPLAY_TESTEE.relative_to(ROOT)}): the Go ReplayBook is not ported")
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    binary = tmp_path / "reprise-replay-testee"  # built outside the checkout
    built = subprocess.run(
        [_go(), "build", "-o", str(binary), "./cmd/reprise-replay-testee"],
        cwd=ROOT / "go",
        env=env,
        capture_output=True,
        text=True,
        timeout=GO_TEST_TIMEOUT_S,
        check=False,
    )
    assert built.returncode == 0, f"building the Go replay testee failed:\n{built.stdout}{built.stderr}"
    count, failures = run_process([str(binary)])
    assert not failures, f"{len(failures)} replay-trace runs failed in Go:\n" + "\n".join(map(str, failures[:10]))
    assert count > 1000, f"only {count} replay-trace steps ran"
