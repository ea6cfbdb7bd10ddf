"""The guards' own per-record path with no replay active, apart from Kafka: figures the neighbours cannot move, for
an overhead too small for CPU time to show on a shared machine (issue 16). Not a benchmark (`make bench` does not
run it; `python -m benchmarks.guard_path`).

- **Go**: instructions per record, counted by callgrind, of reprise-bench's live loop over 60,000 records held in
  memory (after as many uncounted), bare and through the guard (`go/cmd/reprise-instructions`, built with the
  `instructions` tag: the guard's Poll takes its events from memory instead of librdkafka, nothing else changes).
  Only `main.counted` is collected, so librdkafka, the guard's handover-topic tail and the garbage collector's
  background workers are not in it: the difference is what the guard adds to every record. `go-process` gives the
  scale: the whole reprise-bench process's instructions per record, bare and guarded, reading from a broker.
- **Java**: `io.reprise.kafka.bench.GuardPath`: GuardOverhead's loop over fixed batches held in memory (a
  `MockConsumer` that hands them out and takes commits at once), bare and through the guard, one JVM, after a long
  warm-up, in ABBA rounds: the loop thread's CPU per record and the bytes it allocates per record (the second is
  exact). The JIT makes an instruction count of a JVM meaningless, so the CPU of one thread stands in for it; the
  guard's handover-topic tail runs against a broker of its own (an empty handover topic).

    python -m benchmarks.guard_path            # both
    python -m benchmarks.guard_path go         # or java, go-process; REPRISE_PATH_RECORDS (Java, default 1,000,000)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from local_platform.kafka_broker import KafkaBroker

from . import measure
from .go import REPO, _go, build
from .java_guard import JVM, classpath

GO_RECORDS = 60_000


def go_count(binary: Path, loop: str, folder: Path) -> tuple[float, float]:
    """Instructions per record of `loop` (bare or guard) inside main.counted, and of them those in the guard's
    progress: called every 64 records, it reads the clock and does what is due by it (the stores of handed offsets
    every 20 ms, reports every second), so its share per record depends on how fast the loop ran (under valgrind,
    some fifty times slower than natively) and would make the count move with the neighbours."""
    out = folder / f"callgrind.{loop}"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            "--collect-atstart=no",
            "--toggle-collect=main.counted",
            str(binary),
            "-loop",
            loop,
            "-records",
            str(GO_RECORDS),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Go's asynchronous preemption signals slow valgrind down and count nothing of the loop's.
        env={**os.environ, "GODEBUG": "asyncpreemptoff=1"},
        timeout=1800,
    )
    found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no instruction total in {out}")
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", str(out)], capture_output=True, text=True, check=True
    ).stdout
    paced = re.search(r"^\s*([\d,]+) .*guard\.\(\*Consumer\)\.progress \[", annotated, re.MULTILINE)
    clocked = int(paced.group(1).replace(",", "")) if paced else 0
    return int(found.group(1)) / GO_RECORDS, clocked / GO_RECORDS


def go() -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed: the Go count needs callgrind")
    with tempfile.TemporaryDirectory(prefix="reprise-guard-path-") as name:
        folder = Path(name)
        binary = folder / "reprise-instructions"
        subprocess.run(
            [_go(), "build", "-tags", "instructions", "-o", str(binary), "./cmd/reprise-instructions"],
            cwd=REPO / "go",
            check=True,
            timeout=1800,
            env={**os.environ, "GOFLAGS": "-buildvcs=false"},
        )
        counts = {loop: go_count(binary, loop, folder) for loop in ("bare", "guard")}
    bare, (guard, paced) = counts["bare"][0], counts["guard"]
    added = guard - paced - bare
    print(
        f"go guard's per-record path ({GO_RECORDS:,} records in memory, callgrind): bare loop {bare:.1f} "
        f"instructions/record, guarded {guard - paced:.1f} (+{added:.1f}), besides {paced:.1f} in what the clock paces "
        "(progress: every 64 records a clock read, offsets stored every 20 ms; per record, depends on the speed)",
        flush=True,
    )
    return {
        "records": GO_RECORDS,
        "instructions_per_record": {"bare": bare, "guard": guard - paced, "guard_clock_paced": paced},
        "added_per_record": round(added, 1),
    }


def go_process() -> dict[str, Any]:
    """Instructions per record of the whole reprise-bench process (every thread: librdkafka's fetching, the
    garbage collector, the guard's tail), bare and guarded, reading GO_PROCESS_RECORDS records of 1 KiB in 12
    partitions from a broker of its own: the scale the in-memory count is read against. Work paced by the clock
    (the guard's tail polls the handover topic every 0.1 s, librdkafka's timers) is counted per wall second of a
    run that valgrind makes some fifty times longer, so the guarded figure is an upper bound. Not repeatable: how
    many records librdkafka fetches and queues at a time follows the timing, and with it the work per record (two
    runs of the bare loop counted 16,706 and 11,113 instructions per record); a scale, not a figure to compare."""
    from .worker import PARTITIONS, fill

    records = int(os.environ.get("REPRISE_PATH_GO_RECORDS") or 200_000)
    workdir = Path(tempfile.mkdtemp(prefix="reprise-guard-path-go-"))
    broker = KafkaBroker(workdir / "kafka", heap="512m")
    try:
        binary = build(workdir)
        broker.start()
        source = broker.create_topic("bench-go-source", PARTITIONS)
        broker.create_topic("reprise.handover.bench", 1, config={"cleanup.policy": "compact"})
        fill(broker.bootstrap, source, records)
        counts = {}
        for loop in ("bare", "guard"):
            out = workdir / f"callgrind.{loop}"
            subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={out}",
                    str(binary),
                    "-bootstrap",
                    broker.bootstrap,
                    "-topic",
                    source,
                    "-records",
                    str(records),
                    "-loop",
                    loop,
                    "-handover-topic",
                    "reprise.handover.bench",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "GODEBUG": "asyncpreemptoff=1"},
                timeout=3600,
            )
            total = sum(
                int(m.group(1))
                for f in workdir.glob(f"callgrind.{loop}*")
                for m in [re.search(r"^(?:summary|totals): (\d+)", f.read_text(), re.MULTILINE)]
                if m
            )
            counts[loop] = total / records
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"go whole process ({records:,} records from a broker, callgrind, every thread): bare "
        f"{counts['bare']:,.0f} instructions/record, guarded {counts['guard']:,.0f} "
        f"({counts['guard'] / counts['bare'] - 1:+.1%})",
        flush=True,
    )
    return {"records": records, "instructions_per_record": counts}


def java() -> dict[str, Any]:
    records = int(os.environ.get("REPRISE_PATH_RECORDS") or 1_000_000)
    cp = classpath()
    workdir = Path(tempfile.mkdtemp(prefix="reprise-guard-path-java-"))
    broker = KafkaBroker(workdir / "kafka", heap="512m")
    try:
        broker.start()
        broker.create_topic("reprise.handover.path", 1, config={"cleanup.policy": "compact"})
        done = subprocess.run(
            [
                "java",
                *JVM,
                "-cp",
                cp,
                "io.reprise.kafka.bench.GuardPath",
                broker.bootstrap,
                "reprise.handover.path",
                str(records),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
            env={**os.environ, "JAVA_TOOL_OPTIONS": "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"},
        )
        if done.returncode != 0:
            print(done.stderr[-4000:], flush=True)
            raise RuntimeError(f"GuardPath exited with {done.returncode}")
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    runs = json.loads(done.stdout.strip().splitlines()[-1])["runs"]
    of = {loop: [r for r in runs if r["loop"] == loop] for loop in ("bare", "guarded")}
    cpu = measure.compared([r["cpu_ns"] for r in of["guarded"]], [r["cpu_ns"] for r in of["bare"]])
    figures = {
        loop: {
            "cpu_ns_per_record": measure.summary([r["cpu_ns"] for r in found], 2),
            "allocated_bytes_per_record": statistics.median(r["allocated_bytes"] for r in found),
        }
        for loop, found in of.items()
    }
    bare, guarded = figures["bare"], figures["guarded"]
    print(
        f"java guard's per-record path ({records:,} records in memory, {len(of['bare'])} ABBA rounds): loop thread "
        f"bare {bare['cpu_ns_per_record']['median']:.1f} ns/record, guarded {guarded['cpu_ns_per_record']['median']:.1f}"
        f" (+{guarded['cpu_ns_per_record']['median'] - bare['cpu_ns_per_record']['median']:.1f}; per-round ratios "
        f"{cpu['paired']['rounds']}); allocated bare {bare['allocated_bytes_per_record']:.1f} B/record, guarded "
        f"{guarded['allocated_bytes_per_record']:.1f}",
        flush=True,
    )
    return {"records": records, "per_loop": figures, "guarded_vs_bare": cpu}


def main(argv: list[str]) -> int:
    parts = {"go": go, "go-process": go_process, "java": java}
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.guard_path",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("parts", nargs="*", metavar="{go,go-process,java}", help="which figures (default: go java)")
    which = parser.parse_args(argv).parts or ["go", "java"]
    unknown = [name for name in which if name not in parts]
    if unknown:
        parser.error(f"invalid choice: {unknown[0]!r} (choose from {', '.join(map(repr, parts))})")
    results = {name: parts[name]() for name in which}
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
