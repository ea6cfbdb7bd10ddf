"""Go module benchmark: the Go guard's overhead and the Go replay role's throughput, as ratios to a bare
confluent-kafka-go loop measured in the same run.

One broker of the local platform, one source topic (default 1,000,000 records of 1 KiB in 12 partitions, the
worker benchmark's `fill`). `go/cmd/reprise-bench` reads the whole topic in a fresh group, calling the same
no-op handler per record, in three ways:

- **bare**: a plain confluent-kafka-go `Poll` loop;
- **guard**: the same loop through `guard.NewConsumer`, no replay active;
- **replay**: the Go replay role (`replay.Run`, Drain mode, exit when done: bootstrap included).

Targets: guard overhead <= 5% (1 - guard/bare), replay role >= 0.8x the bare loop. Every loop runs `ROUNDS`
times, interleaved, and the best of each counts (the machine is shared; the best run is the least disturbed).

    python -m benchmarks.go        # REPRISE_BENCH_RECORDS=N, or REPRISE_BENCH_QUICK=1
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from local_platform.kafka_broker import KafkaBroker

from .worker import PARTITIONS, RECORD_BYTES, _size, fill

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 3
TARGETS = {"guard_overhead": 0.05, "replay_vs_bare": 0.8}
LOOPS = ("bare", "guard", "replay")


def _go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if found is None:
        raise RuntimeError("the Go toolchain is not installed: the Go benchmark needs `go` on PATH")
    return found


def build(workdir: Path) -> Path:
    binary = workdir / "reprise-bench"
    subprocess.run([_go(), "build", "-o", str(binary), "./cmd/reprise-bench"], cwd=REPO / "go", check=True,
                   timeout=1800, env={**os.environ, "GOFLAGS": "-buildvcs=false"})
    return binary


def measure(binary: Path, bootstrap: str, topic: str, records: int, loop: str) -> float:
    done = subprocess.run([str(binary), "-bootstrap", bootstrap, "-topic", topic, "-records", str(records),
                           "-loop", loop], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"reprise-bench -loop {loop} exited {done.returncode}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["records"] != records:
        raise RuntimeError(f"reprise-bench -loop {loop} handled {result['records']} of {records} records")
    return float(result["records_per_second"])


def run(records: int | None = None) -> dict:
    records = records or _size()
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-go-"))
    broker = KafkaBroker(workdir / "kafka", heap="1g")
    try:
        binary = build(workdir)
        broker.start()
        bootstrap = broker.bootstrap
        source = broker.create_topic("bench-go-source", PARTITIONS)
        print(f"writing {records:,} records of {RECORD_BYTES} B into {PARTITIONS} partitions", flush=True)
        fill_rate = fill(bootstrap, source, records)
        rates: dict[str, list[float]] = {loop: [] for loop in LOOPS}
        for attempt in range(ROUNDS):
            order = LOOPS if attempt % 2 == 0 else tuple(reversed(LOOPS))
            for loop in order:
                rates[loop].append(measure(binary, bootstrap, source, records, loop))
            print(f"  round {attempt + 1}: " + ", ".join(f"{loop} {rates[loop][-1]:,.0f}/s" for loop in LOOPS), flush=True)
        best = {loop: max(values) for loop, values in rates.items()}
        figures: dict[str, Any] = {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "fill_records_per_second": round(fill_rate),
            "bare_loop_records_per_second": round(best["bare"]),
            "guarded_loop_records_per_second": round(best["guard"]),
            "replay_role_records_per_second": round(best["replay"]),
            "all_runs": {loop: [round(r) for r in values] for loop, values in rates.items()},
            "guard_overhead": round(max(0.0, 1 - best["guard"] / best["bare"]), 4),
            "replay_vs_bare": round(best["replay"] / best["bare"], 3),
            "targets": TARGETS,
        }
        figures["meets_target"] = (figures["guard_overhead"] <= TARGETS["guard_overhead"]
                                   and figures["replay_vs_bare"] >= TARGETS["replay_vs_bare"])
        print(f"go: guard overhead {figures['guard_overhead']:.1%} (<= {TARGETS['guard_overhead']:.0%}), replay role "
              f"{figures['replay_vs_bare']}x the bare loop (>= {TARGETS['replay_vs_bare']})", flush=True)
        return figures
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
