"""The Java ReplayBook passes every replay trace (conformance/vectors/replay_traces.json): the one trace runner
drives the Java testee (`io.reprise.kafka.conformance.ReplayTraceTestee`, on the test classpath) over
stdin/stdout, as it drives the Python and Go ones (conformance/REPLAY_TRACES.md, "Testees")."""

from __future__ import annotations

import shutil

import pytest

from tests.unit.conformance.replay_trace_runner import run_process
from tests.unit.conformance.vectors import load

from .jvm_classpath import java_classpath

pytestmark = pytest.mark.integration


def test_java_book_passes_every_replay_trace() -> None:
    assert shutil.which("java"), "java (17 or newer) must be on PATH to run the Java testee"
    steps = sum(
        len(s["steps"]) + sum(c["after_step"] + len(c["steps"]) for c in s["crashes"])
        for s in load("replay_traces.json")["scenarios"]
    )
    count, failures = run_process(["java", "-cp", java_classpath(), "io.reprise.kafka.conformance.ReplayTraceTestee"])
    assert not failures, f"{len(failures)} runs failed:\n" + "\n".join(map(str, failures[:10]))
    # Every step of every run was answered (a run stops at its first wrong answer).
    assert count == steps
