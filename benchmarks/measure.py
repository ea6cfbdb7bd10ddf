"""How the benchmarks measure: each loop in a process of its own, its CPU time from getrusage, the broker's
CPU time from /proc, wall time; rounds interleaved; the median and the spread of the rounds. Not a benchmark.

Why this way: on a shared two-core machine throughput moves with the neighbours, but the CPU a process spends
per record barely does. So a loop runs as its own process and is reaped with `os.wait4`, whose rusage is
that process's user + system time over all its threads (librdkafka's included); the broker's share is the
difference of its `/proc/<pid>/stat` times across the run. A ratio is taken per round (the contenders of a
round ran next to each other, under the same load) and the median of the per-round ratios is the figure; a
target is met on the median. Rounds alternate the order of the contenders so neither always goes first.

Two ways to run a contender: `run_processes` (a pipeline of processes, reaped with `os.wait4`; a `Sample`) for
the Python worker's and the end-to-end loops, and `measured_run` (one process to its end, its last stdout line as
JSON; a dict) for the Go and Java libraries, whose programs report their own start-up and steady-state windows.
Those runs go through `interleaved_runs`, are summarised with `summary` and `compared`, and judged by
`verdict_line`.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

_TICK = os.sysconf("SC_CLK_TCK")


def stat_cpu(stat_file: str) -> float | None:
    """User + system CPU seconds in a /proc stat file (a process's or a thread's); None when it is gone."""
    try:
        stat = Path(stat_file).read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat(5))


def process_cpu(pid: int | None) -> float:
    """User + system CPU seconds of a running process (all its threads) from /proc; 0 when it is gone."""
    return (stat_cpu(f"/proc/{pid}/stat") or 0.0) if pid is not None else 0.0


def thread_cpu(pid: int | None) -> dict[int, tuple[str, float]]:
    """Each live thread of `pid`: its name and its CPU seconds so far (user + system, from /proc). A thread that
    ended since an earlier reading is missing: a difference of two readings is a lower bound."""
    found: dict[int, tuple[str, float]] = {}
    if pid is None:
        return found
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        cpu = stat_cpu(str(task / "stat"))
        if cpu is not None:
            found[int(task.name)] = (name, cpu)
    return found


@dataclass
class Sample:
    """One run of one contender."""

    records: int
    #: Seconds from the process's start to its exit.
    wall: float
    #: User + system seconds of the measured process(es), from getrusage.
    cpu: float
    #: The broker's CPU seconds over the same span.
    broker_cpu: float
    #: What the process reported about itself (its own timings, counts).
    reported: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu_per_record_us(self) -> float:
        return self.cpu / self.records * 1e6

    @property
    def total_cpu_per_record_us(self) -> float:
        """The process's and the broker's CPU per record: the machine's cost of the work."""
        return (self.cpu + self.broker_cpu) / self.records * 1e6

    def figures(self) -> dict[str, Any]:
        return {
            "wall_s": round(self.wall, 3),
            "cpu_s": round(self.cpu, 3),
            "broker_cpu_s": round(self.broker_cpu, 3),
            "cpu_us_per_record": round(self.cpu_per_record_us, 2),
            "total_cpu_us_per_record": round(self.total_cpu_per_record_us, 2),
            **self.reported,
        }


class ProcessFailed(RuntimeError):
    pass


def run_processes(
    argvs: Sequence[Sequence[str]],
    records: int,
    *,
    env: Mapping[str, str] | None = None,
    broker_pid: int | None = None,
    timeout: float = 3600,
    log: Path | None = None,
    pipe: bool = False,
    cwd: Path | None = None,
    on_start: Callable[[list[subprocess.Popen]], None] | None = None,
) -> Sample:
    """Run the processes (with `pipe`, each one's stdout into the next one's stdin) to their exit and measure
    them. The last process's stdout is kept; its last JSON line, if any, becomes `reported`. The others'
    output, and every stderr, go to `log`."""
    sink = open(log, "ab") if log is not None else subprocess.DEVNULL
    processes: list[subprocess.Popen] = []
    out_path = log.with_suffix(".out") if log is not None else Path(os.devnull)
    out = open(out_path, "wb")
    try:
        broker_before = process_cpu(broker_pid)
        began = time.monotonic()
        previous = None
        for index, argv in enumerate(argvs):
            last = index == len(argvs) - 1
            stdout = out if last else (subprocess.PIPE if pipe else sink)
            process = subprocess.Popen(
                list(argv),
                env=dict(env) if env is not None else None,
                stdin=previous,
                stdout=stdout,
                stderr=sink,
                cwd=cwd,
                start_new_session=True,
            )
            if previous is not None:
                previous.close()
            previous = process.stdout if pipe and not last else None
            processes.append(process)
        if on_start is not None:
            on_start(processes)
        cpu = 0.0
        codes = {}
        deadline = began + timeout
        while len(codes) < len(processes):
            for process in processes:
                if process.pid in codes:
                    continue
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    codes[pid] = os.waitstatus_to_exitcode(status)
                    process.returncode = codes[pid]
                    cpu += usage.ru_utime + usage.ru_stime
            if time.monotonic() > deadline:
                raise ProcessFailed(f"{argvs[0][:4]} did not finish within {timeout:.0f} s")
            time.sleep(0.02)
        wall = time.monotonic() - began
        broker_cpu = process_cpu(broker_pid) - broker_before
    finally:
        for process in processes:
            if process.returncode is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
        out.close()
        if log is not None:
            sink.close()  # type: ignore[union-attr]
    failed = {p.args[0] if isinstance(p.args, list) else p.args: p.returncode for p in processes if p.returncode}
    if failed:
        raise ProcessFailed(f"exited with {failed}; see {log}")
    reported: dict[str, Any] = {}
    if log is not None:
        for line in reversed(out_path.read_text(errors="replace").splitlines()):
            if line.startswith("{"):
                try:
                    reported = json.loads(line)
                    break
                except ValueError:
                    continue
    return Sample(records, wall, cpu, broker_cpu, reported)


def interleaved(
    rounds: int,
    contenders: Mapping[str, Callable[[int], Sample]],
    report: Callable[[int, dict[str, Sample]], None] | None = None,
) -> dict[str, list[Sample]]:
    """Run every contender once per round, the order turned by one each round and reversed every other round
    (so none is always first or always after the same one). `contender(round)` returns its Sample."""
    names = list(contenders)
    results: dict[str, list[Sample]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        order = names[shift:] + names[:shift]
        if index % 2:
            order.reverse()
        this_round = {}
        for name in order:
            this_round[name] = contenders[name](index)
            results[name].append(this_round[name])
        if report is not None:
            report(index, this_round)
    return results


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, lowest, highest, and the spread (highest - lowest) / median."""
    median = statistics.median(values)
    low, high = min(values), max(values)
    return {
        "median": round(median, 4),
        "min": round(low, 4),
        "max": round(high, 4),
        "spread": round((high - low) / median, 3) if median else 0.0,
        "rounds": len(values),
    }


def speed_ratio(
    baseline: Sequence[Sample], measured: Sequence[Sample], cost: Callable[[Sample], float]
) -> dict[str, float]:
    """Per round, the baseline's cost over the measured one's (1.0: as fast; 0.9: the measured costs 11% more),
    summarised by `spread`."""
    return spread([cost(b) / cost(m) for b, m in zip(baseline, measured)])


def overhead(
    baseline: Sequence[Sample], measured: Sequence[Sample], cost: Callable[[Sample], float]
) -> dict[str, float]:
    """Per round, how much more the measured costs than the baseline (0.05: 5% more), summarised by `spread`."""
    return spread([cost(m) / cost(b) - 1 for b, m in zip(baseline, measured)])


def per_record_cpu(sample: Sample) -> float:
    """The measured process's own CPU per record: the steadiest figure (the broker's CPU moves with its
    garbage collection and housekeeping, and is reported beside it)."""
    return sample.cpu_per_record_us


def per_record_cpu_with_broker(sample: Sample) -> float:
    return sample.total_cpu_per_record_us


def per_record_wall(sample: Sample) -> float:
    return sample.wall / sample.records


def verdict(value: float, target: float, at_least: bool) -> str:
    met = value >= target if at_least else value <= target
    return f"{'ok  ' if met else 'MISS'} {value:.3f} ({'>=' if at_least else '<='} {target:g})"


# -- one process per run, its own report: the Go and Java libraries' benchmarks (issue 16's method)


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
    broker_before = process_cpu(broker_pid)
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
    broker = process_cpu(broker_pid) - broker_before
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


def interleaved_runs(
    loops: Mapping[str, Callable[[], dict[str, Any]]],
    rounds: int,
    describe: Callable[[str, dict[str, Any]], str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Each loop once per round, the order reversed every other round (a b c, c b a, ...); returns every run
    per loop. With `describe`, prints a line per round."""
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
    """Median, min, max and spread ((max - min) / median) of one figure over the rounds, and the rounds' values."""
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


def verdict_line(label: str, value: float, target: float, *, at_most: bool, unit: str = "") -> tuple[bool, str]:
    """(met, one line naming the figure next to its target)."""
    met = value <= target if at_most else value >= target
    shown = f"{value:.1%}" if unit == "%" else f"{value:.3f}x"
    goal = f"{target:.0%}" if unit == "%" else f"{target}x"
    return met, f"{label}: {shown} (target {'<=' if at_most else '>='} {goal}) {'met' if met else 'MISSED'}"
