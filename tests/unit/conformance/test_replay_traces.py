"""The Python ReplayBook passes every replay trace (conformance/vectors/replay_traces.json), run by the one trace
runner that runs the Java and Go testees too; and the runner's process protocol works, on the Python testee run
as a process."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from replay_worker.conformance.replay_traces import BookTestee

from .replay_trace_runner import run_process, run_scenario
from .vectors import ids, load

TRACES = load("replay_traces.json")


@pytest.mark.parametrize("scenario", TRACES["scenarios"], ids=ids(TRACES["scenarios"]))
def test_python_book_passes_the_trace(scenario: dict[str, Any]) -> None:
    count, failures = run_scenario(BookTestee().send, scenario)
    assert count >= len(scenario["steps"])
    assert not failures, "\n".join(map(str, failures))


def test_every_scenario_has_a_crash_run_after_most_steps() -> None:
    for scenario in TRACES["scenarios"]:
        after = {crash["after_step"] for crash in scenario["crashes"]}
        assert len(after) * 2 >= len(scenario["steps"]), scenario["name"]


def test_the_process_protocol_on_the_python_testee() -> None:
    count, failures = run_process([sys.executable, "-m", "replay_worker.conformance.replay_testee"])
    assert count > 1000
    assert not failures, "\n".join(map(str, failures[:5]))
