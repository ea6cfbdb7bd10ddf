"""Java replay role benchmark: the role (`ReplayRole`, Drain mode) calling a no-op handler, against a bare
`KafkaConsumer` loop (poll, handle, commit asynchronously) calling the same handler (issue 12's target: >= 0.8x).

On one broker of the local platform, in one run, on the same source topic (default 1,000,000 records of 1 KiB in 12
partitions), a handover topic made before each run as the operator does. Each run is a JVM of its own
(`ReplayBenchMain`, from the Java library's test classes); both loops read with the role's consumer settings
(read_committed, cooperative rebalancing, `max.poll.records` = the role's batch size), so they compare the loop, not
fetch tuning.

Method (issue 16): `ROUNDS` rounds, the two loops interleaved. Each run reports the JVM's CPU (every thread) and the
broker's (/proc) from the start of `main` to the last record: start-up work counts (the role's bootstrap transaction,
its handover-topic reads, the JIT of its code), waiting does not. The target is on **CPU per record**: the bare loop's
median over the role's, at least 0.8x (the per-round ratios and their spread beside it). Reported beside it:
throughput (first batch to last), the start-up's wall time and CPU (from `main` to the first batch handed to the
handler), the steady state's CPU (from the batch that reaches a tenth of the topic), CPU with the broker's, and the
whole JVM's CPU (getrusage of the child, JVM start and exit included).

    python -m benchmarks java_replay       # REPRISE_BENCH_RECORDS=N, REPRISE_BENCH_ROUNDS=N, or REPRISE_BENCH_QUICK=1
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from local_platform.kafka_broker import KafkaBroker

from . import measure
from .worker import PARTITIONS, RECORD_BYTES, fill, records_setting

ROUNDS = int(os.environ.get("REPRISE_BENCH_ROUNDS") or 5)
TARGETS = {"replay_vs_bare": 0.8}
HANDOVER_TOPIC = "bench.handover"


def _classpath() -> str:
    from tests.integration.java.jvm_classpath import java_classpath

    return java_classpath()


def per_run(run: dict[str, Any], records: int) -> dict[str, float]:
    r = run["report"]
    if r["records"] < records:
        raise RuntimeError(f"{r['mode']} handled {r['records']} of {records} records")
    return {
        "cpu_us": r["cpu_s"] / records * 1e6,
        "broker_cpu_us": r["broker_cpu_s"] / records * 1e6,
        "steady_cpu_us": r["steady_cpu_s"] / r["steady_records"] * 1e6,
        "rate": r["rate"],
        "startup_s": r["startup_s"],
        "startup_cpu_s": r["startup_cpu_s"],
        "process_cpu_us": run["cpu_s"] / records * 1e6,
        "process_wall_s": run["wall_s"],
    }


def run(records: int | None = None) -> dict:
    records = records_setting(records)
    classpath = _classpath()
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH (run `make platform`)")
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-java-replay-"))
    broker = KafkaBroker(workdir / "kafka", heap="1g")
    try:
        broker.start()
        bootstrap = broker.bootstrap
        source = broker.create_topic("bench-source", PARTITIONS)
        print(f"writing {records:,} records of {RECORD_BYTES} B into {PARTITIONS} partitions", flush=True)
        fill_rate = fill(bootstrap, source, records)
        count = {"bare": 0, "replay": 0}

        def loop(mode: str):
            def once() -> dict[str, Any]:
                count[mode] += 1
                group = f"bench-{mode}-{count[mode]}"
                # A handover topic per run, made before it as the operator does: the role reads the whole topic at
                # start, and one shared by the rounds would make each round read the records of every earlier
                # round's replay (which the operator tombstones once a replay is cleaned up).
                handover_topic = f"{HANDOVER_TOPIC}.{mode}-{count[mode]}"
                broker.create_topic(handover_topic, 1, config={"cleanup.policy": "compact"})
                return measure.measured_run(
                    [
                        java,
                        "-cp",
                        classpath,
                        "io.reprise.kafka.replay.ReplayBenchMain",
                        mode,
                        bootstrap,
                        source,
                        str(records),
                        group,
                        handover_topic,
                        str(broker.pid or 0),
                    ],
                    broker_pid=broker.pid,
                    log=workdir / f"{group}.log",
                )

            return once

        def describe(mode: str, result: dict[str, Any]) -> str:
            f = per_run(result, records)
            return f"{mode} {f['cpu_us']:.1f} us/rec {f['rate']:,.0f}/s"

        runs = measure.interleaved_runs({"bare": loop("bare"), "replay": loop("replay")}, ROUNDS, describe)
        figures = {mode: [per_run(r, records) for r in found] for mode, found in runs.items()}
        bare, replay = figures["bare"], figures["replay"]

        def of(runs: list[dict[str, float]], key: str) -> list[float]:
            return [f[key] for f in runs]

        # bare / replay for CPU (>= 1 when the role is cheaper), replay / bare for throughput
        cpu = measure.compared(of(bare, "cpu_us"), of(replay, "cpu_us"))
        with_broker = measure.compared(
            [b["cpu_us"] + b["broker_cpu_us"] for b in bare], [r["cpu_us"] + r["broker_cpu_us"] for r in replay]
        )
        throughput = measure.compared(of(replay, "rate"), of(bare, "rate"))
        process = measure.compared(of(bare, "process_cpu_us"), of(replay, "process_cpu_us"))
        steady = measure.compared(of(bare, "steady_cpu_us"), of(replay, "steady_cpu_us"))
        met, line = measure.verdict_line(
            "java replay role vs bare loop (CPU/record, medians)",
            cpu["ratio"],
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
            "replay_vs_bare_detail": {
                "cpu_per_record": cpu,
                "steady_cpu_per_record": steady,
                "cpu_with_broker_per_record": with_broker,
                "throughput": throughput,
                "process_cpu_per_record": process,
            },
            "replay_vs_bare": round(cpu["ratio"], 3),
            "targets": TARGETS,
            "meets_target": met,
        }
        print(line, flush=True)
        print(
            f"    per-round bare/replay CPU {cpu['paired']['rounds']} (median {cpu['paired']['median']}, spread "
            f"{cpu['paired']['spread']}); steady state {steady['ratio']:.3f}x; throughput replay/bare "
            f"{throughput['ratio']:.3f}x; CPU with broker "
            f"{with_broker['ratio']:.3f}x; whole JVM {process['ratio']:.3f}x",
            flush=True,
        )
        print(
            f"    CPU us/record (median): bare {result['per_loop']['bare']['cpu_us']['median']:.2f}, replay "
            f"{result['per_loop']['replay']['cpu_us']['median']:.2f}; start-up s (median): bare "
            f"{result['per_loop']['bare']['startup_s']['median']:.2f}, replay "
            f"{result['per_loop']['replay']['startup_s']['median']:.2f}; start-up CPU s (median): bare "
            f"{result['per_loop']['bare']['startup_cpu_s']['median']:.2f}, replay "
            f"{result['per_loop']['replay']['startup_cpu_s']['median']:.2f}",
            flush=True,
        )
        return result
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
