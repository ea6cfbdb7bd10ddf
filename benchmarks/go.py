"""Go module benchmark: the Go guard's overhead and the Go replay role's cost, against hand-written
confluent-kafka-go loops doing the same work, measured in one run (issue 13).

One broker of the local platform, one source topic (default 1,000,000 records of 1 KiB in 12 partitions, the
worker benchmark's `fill`), the handover topic created first as the operator does. `go/cmd/reprise-bench` reads
the whole topic in a fresh group, in four loops that pair up:

- **bare** and **guard**: a live service's `Poll` loop (handler per record, librdkafka's automatic offset store
  and commit), plain and through `guard.NewConsumer` with no replay active;
- **batch** and **replay**: a hand-written at-least-once re-read (the replay role's consumer settings, batches of
  1,000, the handler per batch, each batch's offsets committed in the background), and the replay role itself
  (`replay.Run`, Drain mode) with the same handler.

Method (issue 16): every loop runs once per round, interleaved, for `ROUNDS` rounds, after one uncounted warm-up
run of the bare loop (the broker's first group and page cache). Each run reports the process's CPU time
(getrusage, every thread) and the broker's (/proc) from just before the loop creates its clients to its last
record: start-up work is counted (the replay's bootstrap transaction, the guard's handover-topic catch-up), while
waiting (group join) costs no CPU, and closing is left out. The targets are on **CPU per record**, the median of
the per-round ratios (CPU per record is steady on a shared machine, throughput is not). Beside them: throughput
from the first record handed to the handler to the last (steady state), the start-up's wall time (loop start to
first record), CPU with the broker's added, and the whole process's CPU (getrusage of the child, closing
included).

- guard overhead = guard CPU/record / bare CPU/record - 1, target <= 5%;
- replay role = batch CPU/record / replay CPU/record, target >= 0.8x.

    python -m benchmarks go        # REPRISE_BENCH_RECORDS=N, REPRISE_BENCH_ROUNDS=N, or REPRISE_BENCH_QUICK=1
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

from . import rounds
from .worker import PARTITIONS, RECORD_BYTES, _size, fill

REPO = Path(__file__).resolve().parents[1]
ROUNDS = int(os.environ.get("REPRISE_BENCH_ROUNDS") or 5)
TARGETS = {"guard_overhead": 0.05, "replay_vs_bare": 0.8}
LOOPS = ("bare", "guard", "batch", "replay")
HANDOVER_TOPIC = "reprise.handover.bench"


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


def per_run(run: dict[str, Any], records: int) -> dict[str, float]:
    """One run's figures per record (microseconds) and rates."""
    r = run["report"]
    if r["records"] != records:
        raise RuntimeError(f"reprise-bench -loop {r['loop']} handled {r['records']} of {records} records")
    return {
        "cpu_us": r["cpu_s"] / records * 1e6,
        "broker_cpu_us": r["broker_cpu_s"] / records * 1e6,
        "rate": r["records_per_second"],
        "window_s": r["window_s"],
        "startup_s": r["startup_s"],
        "process_cpu_us": run["cpu_s"] / records * 1e6,
        "process_broker_cpu_us": run["broker_cpu_s"] / records * 1e6,
        "process_wall_s": run["wall_s"],
    }


def compare(figures: dict[str, list[dict[str, float]]], subject: str, baseline: str) -> dict[str, Any]:
    """Per-round ratios subject/baseline: CPU per record (window, window + broker, whole process), throughput."""
    def ratios(key: str, invert: bool = False) -> dict[str, Any]:
        a = [f[key] for f in figures[subject]]
        b = [f[key] for f in figures[baseline]]
        return rounds.summary(rounds.paired_ratios(b, a) if invert else rounds.paired_ratios(a, b))

    with_broker = {name: [{"v": f["cpu_us"] + f["broker_cpu_us"]} for f in runs] for name, runs in figures.items()}
    return {
        "cpu_per_record": ratios("cpu_us"),
        "cpu_with_broker_per_record": rounds.summary(rounds.paired_ratios(
            [f["v"] for f in with_broker[subject]], [f["v"] for f in with_broker[baseline]])),
        "process_cpu_per_record": ratios("process_cpu_us"),
        "throughput": ratios("rate"),
    }


def run(records: int | None = None) -> dict:
    records = records or _size()
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-go-"))
    broker = KafkaBroker(workdir / "kafka", heap="1g")
    try:
        binary = build(workdir)
        broker.start()
        bootstrap = broker.bootstrap
        source = broker.create_topic("bench-go-source", PARTITIONS)
        broker.create_topic(HANDOVER_TOPIC, 1, config={"cleanup.policy": "compact"})
        print(f"writing {records:,} records of {RECORD_BYTES} B into {PARTITIONS} partitions", flush=True)
        fill_rate = fill(bootstrap, source, records)

        def loop(name: str, count: int = records):
            return lambda: rounds.measured_run(
                [str(binary), "-bootstrap", bootstrap, "-topic", source, "-records", str(count), "-loop", name,
                 "-broker-pid", str(broker.pid or 0), "-handover-topic", HANDOVER_TOPIC],
                broker_pid=broker.pid, log=workdir / f"{name}.log")

        loop("bare", max(1000, records // 10))()  # warm-up, not counted

        def describe(name: str, result: dict[str, Any]) -> str:
            f = per_run(result, records)
            return f"{name} {f['cpu_us']:.1f} us/rec {f['rate']:,.0f}/s"

        runs = rounds.interleaved({name: loop(name) for name in LOOPS}, ROUNDS, describe)
        figures = {name: [per_run(r, records) for r in found] for name, found in runs.items()}
        guard = compare(figures, "guard", "bare")
        replay = compare(figures, "replay", "batch")
        overhead = guard["cpu_per_record"]["median"] - 1
        replay_ratio = 1 / replay["cpu_per_record"]["median"]
        guard_met, guard_line = rounds.verdict("go guard overhead (CPU/record, median)", overhead,
                                               TARGETS["guard_overhead"], at_most=True, unit="%")
        replay_met, replay_line = rounds.verdict("go replay role vs bare batch loop (CPU/record, median)",
                                                 replay_ratio, TARGETS["replay_vs_bare"], at_most=False)
        result: dict[str, Any] = {
            "records": records, "record_bytes": RECORD_BYTES, "partitions": PARTITIONS, "rounds": ROUNDS,
            "fill_records_per_second": round(fill_rate),
            "per_loop": {name: {key: rounds.summary([f[key] for f in found], 3) for key in found[0]}
                         for name, found in figures.items()},
            "guard_vs_bare": guard,
            "replay_vs_batch": replay,
            "guard_overhead": round(overhead, 4),
            "replay_vs_bare": round(replay_ratio, 3),
            "targets": TARGETS,
            "meets_target": guard_met and replay_met,
        }
        print(guard_line, flush=True)
        print(f"    spread {guard['cpu_per_record']['spread']}; throughput guard/bare "
              f"{guard['throughput']['median']:.3f}x; CPU with broker {guard['cpu_with_broker_per_record']['median']:.3f}; "
              f"whole process {guard['process_cpu_per_record']['median']:.3f}", flush=True)
        print(replay_line, flush=True)
        print(f"    spread {replay['cpu_per_record']['spread']}; throughput replay/batch "
              f"{replay['throughput']['median']:.3f}x; CPU with broker "
              f"{1 / replay['cpu_with_broker_per_record']['median']:.3f}x; whole process "
              f"{1 / replay['process_cpu_per_record']['median']:.3f}x", flush=True)
        print("    start-up (s, median): " + ", ".join(
            f"{name} {result['per_loop'][name]['startup_s']['median']:.2f}" for name in LOOPS), flush=True)
        return result
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
