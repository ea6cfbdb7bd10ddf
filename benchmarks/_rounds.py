"""Measured runs in interleaved rounds: CPU per record, wall time, and the broker's CPU, summarised as a median
and a spread (issue 16's method), for the benchmarks of the Go and Java libraries.

On a shared machine throughput swings by 2x between two runs of the same loop; the CPU time a loop spends per
record does not. So each run is one process whose CPU is read with `getrusage` (`os.wait4` on the child), with the
broker's CPU read from `/proc/<pid>/stat` over the same run. The measured program may also print its own figures
for the steady-state window (first record handed to last), which leaves out start-up (group join, a bootstrap
transaction, a guard's handover-topic catch-up); both are kept, and each benchmark says which one its target uses.

Loops run in rounds, interleaved (a b c, c b a, a b c, ...), so the neighbours' load falls on each loop alike. A
target is judged on the medians: the subject's median over the baseline's (`compared`), with the per-round ratios
and the spread ((max - min) / median) beside it to say how far to trust it.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a running process (all its threads), from /proc; 0.0 when it is not there."""
    if not pid:
        return 0.0
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15 of proc(5)


def measured_run(
    argv: Sequence[str],
    *,
    broker_pid: int | None,
    log: Path,
    timeout: float = 3600,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run `argv` to the end, its stderr appended to `log`. Returns its last stdout line parsed as JSON under
    "report", and over the whole process: "wall_s", "cpu_s" (getrusage: user + system of every thread) and
    "broker_cpu_s" (the broker's CPU meanwhile)."""
    # RUSAGE_CHILDREN grows by a child's rusage when it is reaped; runs are sequential, so the difference is
    # this child's own.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_before = process_cpu_seconds(broker_pid)
    began = time.monotonic()
    with (
        open(log, "ab") as err,
        subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env else None,
            cwd=cwd,
        ) as child,
    ):
        try:
            out, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise RuntimeError(f"{argv[0]} did not finish in {timeout:.0f} s; see {log}") from None
    wall = time.monotonic() - began
    broker = process_cpu_seconds(broker_pid) - broker_before
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"{' '.join(argv[:2])} ... exited {child.returncode}; see {log}\n{tail}")
    lines = [line for line in out.decode().splitlines() if line.strip()]
    if not lines:
        raise RuntimeError(f"{argv[0]} printed no result; see {log}")
    return {
        "report": json.loads(lines[-1]),
        "wall_s": wall,
        "broker_cpu_s": broker,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    }


def interleaved(
    loops: Mapping[str, Callable[[], dict[str, Any]]],
    rounds: int,
    describe: Callable[[str, dict[str, Any]], str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Each loop once per round, the order reversed every other round; returns every run per loop."""
    names = list(loops)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for n in range(rounds):
        order = names if n % 2 == 0 else list(reversed(names))
        for name in order:
            runs[name].append(loops[name]())
        if describe:
            print(
                f"  round {n + 1}/{rounds}: " + "; ".join(describe(name, runs[name][-1]) for name in names), flush=True
            )
    return runs


def summary(values: Sequence[float], digits: int = 4) -> dict[str, Any]:
    """Median, min, max and spread ((max - min) / median) of one figure over the rounds."""
    median = statistics.median(values)
    return {
        "median": round(median, digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "spread": round((max(values) - min(values)) / median, 3) if median else None,
        "rounds": [round(v, digits) for v in values],
    }


def compared(subject: Sequence[float], baseline: Sequence[float]) -> dict[str, Any]:
    """A subject's figure against a baseline's over the same rounds: "ratio", the subject's median over the
    baseline's (each loop's median shrugs off a run the neighbours disturbed; the target is judged on it), and
    "paired", the per-round ratios summarised (their spread shows how much one round's load differed between the
    two runs)."""
    return {
        "ratio": round(statistics.median(subject) / statistics.median(baseline), 4),
        "paired": summary(paired_ratios(subject, baseline)),
    }


def paired_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Per-round ratios (round n of one loop against round n of the other: the neighbours' load was alike)."""
    return [a / b for a, b in zip(numerators, denominators, strict=True) if b]


def verdict(label: str, value: float, target: float, *, at_most: bool, unit: str = "") -> tuple[bool, str]:
    """(met, one line naming the figure next to its target)."""
    met = value <= target if at_most else value >= target
    shown = f"{value:.1%}" if unit == "%" else f"{value:.3f}x"
    goal = f"{target:.0%}" if unit == "%" else f"{target}x"
    return met, f"{label}: {shown} (target {'<=' if at_most else '>='} {goal}) {'met' if met else 'MISSED'}"
