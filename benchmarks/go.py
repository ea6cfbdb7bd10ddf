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
waiting (group join) costs no CPU, and closing is left out. The targets are on **CPU per record**: the subject's median
over the baseline's (CPU per record is steady on a shared machine, throughput is not), with the per-round ratios
and their spread beside it. The guard's target is on the steady state (from the record at a tenth of the topic to
the last: a live service pays its start-up once per process, not per record); the replay role's includes its
start-up (a replay is a finite job, its bootstrap is part of its cost). Both figures are printed for both. Beside them: throughput
from the first record handed to the handler to the last (steady state), the start-up's wall time (loop start to
first record), CPU with the broker's added, and the whole process's CPU (getrusage of the child, closing
included).

- guard overhead = guard CPU/record / bare CPU/record - 1 in the steady state, target <= 5%;
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

from . import measure
from .worker import PARTITIONS, RECORD_BYTES, fill, records_setting

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
    subprocess.run(
        [_go(), "build", "-o", str(binary), "./cmd/reprise-bench"],
        cwd=REPO / "go",
        check=True,
        timeout=1800,
        env={**os.environ, "GOFLAGS": "-buildvcs=false"},
    )
    return binary


def per_run(run: dict[str, Any], records: int) -> dict[str, float]:
    """One run's figures per record (microseconds) and rates."""
    r = run["report"]
    if r["records"] != records:
        raise RuntimeError(f"reprise-bench -loop {r['loop']} handled {r['records']} of {records} records")
    return {
        "cpu_us": r["cpu_s"] / records * 1e6,
        "broker_cpu_us": r["broker_cpu_s"] / records * 1e6,
        "steady_cpu_us": r["steady_cpu_s"] / r["steady_records"] * 1e6,
        "steady_broker_cpu_us": r["steady_broker_cpu_s"] / r["steady_records"] * 1e6,
        "rate": r["records_per_second"],
        "window_s": r["window_s"],
        "startup_s": r["startup_s"],
        "process_cpu_us": run["cpu_s"] / records * 1e6,
        "process_broker_cpu_us": run["broker_cpu_s"] / records * 1e6,
        "process_wall_s": run["wall_s"],
    }


def compare(figures: dict[str, list[dict[str, float]]], subject: str, baseline: str) -> dict[str, Any]:
    """subject against baseline over the rounds (measure.compared): CPU per record (the loop's process; with the
    broker's added; the whole process), and throughput."""

    def of(name: str, key: str) -> list[float]:
        return [f[key] for f in figures[name]]

    def with_broker(name: str) -> list[float]:
        return [f["cpu_us"] + f["broker_cpu_us"] for f in figures[name]]

    return {
        "cpu_per_record": measure.compared(of(subject, "cpu_us"), of(baseline, "cpu_us")),
        "steady_cpu_per_record": measure.compared(of(subject, "steady_cpu_us"), of(baseline, "steady_cpu_us")),
        "cpu_with_broker_per_record": measure.compared(with_broker(subject), with_broker(baseline)),
        "process_cpu_per_record": measure.compared(of(subject, "process_cpu_us"), of(baseline, "process_cpu_us")),
        "throughput": measure.compared(of(subject, "rate"), of(baseline, "rate")),
    }


def run(records: int | None = None) -> dict:
    records = records_setting(records)
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
            return lambda: measure.measured_run(
                [
                    str(binary),
                    "-bootstrap",
                    bootstrap,
                    "-topic",
                    source,
                    "-records",
                    str(count),
                    "-loop",
                    name,
                    "-broker-pid",
                    str(broker.pid or 0),
                    "-handover-topic",
                    HANDOVER_TOPIC,
                ],
                broker_pid=broker.pid,
                log=workdir / f"{name}.log",
            )

        loop("bare", max(1000, records // 10))()  # warm-up, not counted

        def describe(name: str, result: dict[str, Any]) -> str:
            f = per_run(result, records)
            return f"{name} {f['cpu_us']:.1f} us/rec {f['rate']:,.0f}/s"

        runs = measure.interleaved_runs({name: loop(name) for name in LOOPS}, ROUNDS, describe)
        figures = {name: [per_run(r, records) for r in found] for name, found in runs.items()}
        guard = compare(figures, "guard", "bare")
        replay = compare(figures, "replay", "batch")
        overhead = guard["steady_cpu_per_record"]["ratio"] - 1
        replay_ratio = 1 / replay["cpu_per_record"]["ratio"]  # batch CPU / replay CPU: >= 1 when the role is cheaper
        guard_met, guard_line = measure.verdict_line(
            "go guard overhead (steady CPU/record, medians)",
            overhead,
            TARGETS["guard_overhead"],
            at_most=True,
            unit="%",
        )
        replay_met, replay_line = measure.verdict_line(
            "go replay role vs bare batch loop (CPU/record, medians)",
            replay_ratio,
            TARGETS["replay_vs_bare"],
            at_most=False,
        )
        result: dict[str, Any] = {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "rounds": ROUNDS,
            "fill_records_per_second": round(fill_rate),
            "per_loop": {
                name: {key: measure.summary([f[key] for f in found], 3) for key in found[0]}
                for name, found in figures.items()
            },
            "guard_vs_bare": guard,
            "replay_vs_batch": replay,
            "guard_overhead": round(overhead, 4),
            "replay_vs_bare": round(replay_ratio, 3),
            "targets": TARGETS,
            "meets_target": guard_met and replay_met,
        }
        paired = guard["steady_cpu_per_record"]["paired"]
        print(guard_line, flush=True)
        print(
            f"    per-round guard/bare {paired['rounds']} (median {paired['median']}, spread {paired['spread']}); "
            f"with start-up {guard['cpu_per_record']['ratio']:.3f}; "
            f"throughput guard/bare {guard['throughput']['ratio']:.3f}x; CPU with broker "
            f"{guard['cpu_with_broker_per_record']['ratio']:.3f}; whole process "
            f"{guard['process_cpu_per_record']['ratio']:.3f}",
            flush=True,
        )
        paired = replay["cpu_per_record"]["paired"]
        print(replay_line, flush=True)
        print(
            f"    per-round replay/batch CPU {paired['rounds']} (median {paired['median']}, spread {paired['spread']}); "
            f"steady state {1 / replay['steady_cpu_per_record']['ratio']:.3f}x; "
            f"throughput replay/batch {replay['throughput']['ratio']:.3f}x; CPU with broker "
            f"{1 / replay['cpu_with_broker_per_record']['ratio']:.3f}x; whole process "
            f"{1 / replay['process_cpu_per_record']['ratio']:.3f}x",
            flush=True,
        )
        print(
            "    CPU us/record (median, with start-up / steady): "
            + ", ".join(
                f"{name} {result['per_loop'][name]['cpu_us']['median']:.2f} / "
                f"{result['per_loop'][name]['steady_cpu_us']['median']:.2f}"
                for name in LOOPS
            ),
            flush=True,
        )
        print(
            "    start-up s (median): "
            + ", ".join(f"{name} {result['per_loop'][name]['startup_s']['median']:.2f}" for name in LOOPS),
            flush=True,
        )
        return result
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
