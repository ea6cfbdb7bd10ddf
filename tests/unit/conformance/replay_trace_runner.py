"""The one runner of replay_traces.json (conformance/REPLAY_TRACES.md): it feeds every run of every scenario to a
testee, one JSON step per line, and compares each answer with the step's `expect`. The step semantics live in
the testees' books and in that document; this file only drives and compares, the same way for every port.

    python -m tests.unit.conformance.replay_trace_runner -- <testee command...>

runs every trace against a testee process and prints each failing step and the counts (exit 1 on a failure).
The Python testee runs in-process (`replay_worker.conformance.replay_traces.BookTestee`, or as a process:
`python -m replay_worker.conformance.replay_testee`); the Java and Go suites
(tests/integration/java, tests/integration/go) call `run_process` with their testee's command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from .vectors import load

Send = Callable[[dict[str, Any]], dict[str, Any]]

#: A key absent from an answer equals its empty value.
EMPTY: tuple[Any, ...] = ([], False, None)


@dataclass(frozen=True)
class Failure:
    scenario: str
    run: str
    index: int
    step: dict[str, Any]
    expected: dict[str, Any]
    actual: dict[str, Any]

    def __str__(self) -> str:
        return (
            f"{self.scenario} [{self.run}] step {self.index}: {json.dumps(self.step)}\n"
            f"  expected {json.dumps(self.expected, sort_keys=True)}\n"
            f"  actual   {json.dumps(self.actual, sort_keys=True)}"
        )


def normalised(outputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in outputs.items() if k != "note" and v not in EMPTY}


def runs(scenario: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Every run of a scenario: the script, then each crash run (the first `after_step` steps, then its own)."""
    yield "no crash", scenario["steps"]
    for crash in scenario["crashes"]:
        yield f"crash after step {crash['after_step']}", scenario["steps"][: crash["after_step"]] + crash["steps"]


def run_scenario(send: Send, scenario: dict[str, Any]) -> tuple[int, list[Failure]]:
    """Run every run of one scenario through `send`; the count of steps run and the failures (the first of each
    run: after a wrong answer the testee's state differs, and later steps say nothing new)."""
    failures, count = [], 0
    for name, steps in runs(scenario):
        answer = send({"op": "scenario", "config": scenario["config"]})
        if "error" in answer:
            failures.append(Failure(scenario["name"], name, -1, {"op": "scenario"}, {}, answer))
            continue
        for index, step in enumerate(steps):
            count += 1
            sent = {k: v for k, v in step.items() if k not in ("expect", "note")}
            actual = normalised(send(sent))
            expected = normalised(step["expect"])
            if actual != expected:
                failures.append(Failure(scenario["name"], name, index, sent, expected, actual))
                break
    return count, failures


def run_all(send: Send, document: dict[str, Any] | None = None) -> tuple[int, list[Failure]]:
    document = document if document is not None else load("replay_traces.json")
    total, failures = 0, []
    for scenario in document["scenarios"]:
        count, found = run_scenario(send, scenario)
        total += count
        failures += found
    return total, failures


class ProcessTestee:
    """A testee process: one JSON line in, one out (conformance/REPLAY_TRACES.md, "Testees")."""

    def __init__(self, command: Sequence[str], cwd: str | None = None) -> None:
        self.process = subprocess.Popen(
            list(command), cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
        )

    def send(self, step: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(step, separators=(",", ":")) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the testee exited (code {self.process.poll()}) at {json.dumps(step)[:200]}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=60)


def run_process(command: Sequence[str], cwd: str | None = None) -> tuple[int, list[Failure]]:
    """Every trace against a testee process; the step count and the failures."""
    testee = ProcessTestee(command, cwd)
    try:
        return run_all(testee.send)
    finally:
        code = testee.close()
        if code != 0:
            raise RuntimeError(f"the testee exited with code {code}")


def main(argv: list[str]) -> int:
    command = argv[1:] if argv and argv[0] == "--" else argv
    if not command:
        print("usage: python -m tests.unit.conformance.replay_trace_runner -- <testee command...>", file=sys.stderr)
        return 2
    count, failures = run_process(command)
    for failure in failures:
        print(failure)
    print(f"{count} steps run, {len(failures)} runs failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
