"""`go test ./...` on a fresh clone, without a broker, skips nothing silently: a package with broker tests fails
with one line saying how to run them; `go test -short` leaves them out by name and runs the rest."""

from __future__ import annotations

import json
import os
import subprocess

from .test_go_suite import ROOT, _go

BROKER_TEST, PURE_TEST = "TestBootstrapResolvesStartOnce", "TestSettingsErrorsNameTheVariable"


def _go_test(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REPRISE_TEST_BOOTSTRAP"}
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return subprocess.run(
        [_go(), "test", "-count=1", *args, "-run", f"^({BROKER_TEST}|{PURE_TEST})$", "./replay/"],
        cwd=ROOT / "go",
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_without_a_broker_the_package_fails_with_one_line_saying_how_to_run_it() -> None:
    run = _go_test()
    assert run.returncode != 0, run.stdout
    lines = [line for line in run.stdout.splitlines() if "REPRISE_TEST_BOOTSTRAP is not set" in line]
    assert lines == [lines[0]] and lines[0].startswith("FAIL: 1 broker tests not run"), run.stdout
    assert "pytest tests/integration/go" in lines[0] and "go test -short" in lines[0]


def test_with_short_the_broker_tests_are_skipped_by_name_and_the_rest_run() -> None:
    run = _go_test("-short", "-json")
    assert run.returncode == 0, run.stdout[-3000:]
    outcome = {
        event["Test"]: event["Action"]
        for event in map(json.loads, run.stdout.splitlines())
        if event.get("Test") and "/" not in event["Test"] and event.get("Action") in ("pass", "fail", "skip")
    }
    assert outcome == {BROKER_TEST: "skip", PURE_TEST: "pass"}
