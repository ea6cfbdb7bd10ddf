"""Java guard benchmark: a `KafkaConsumer` loop through the Java `GuardedConsumer` with no replay active,
against the same loop on a bare `KafkaConsumer`, on one broker of the local platform, in one run (issue 12).

The topic is the worker benchmark's (default 1,000,000 records of 1 KiB in 12 partitions); the handover topic exists,
as the operator creates it. Both loops call the same no-op handler on every record and commit after every poll. The
Java side (`io.reprise.kafka.bench.GuardOverhead`, in the library's test sources) runs each loop in a JVM of its own,
as a service runs one (in one JVM the two loops shared the JIT's profiles and compiled code of the client), with a
fixed, pre-touched heap. Each JVM warms its loop up uncounted with full runs until the JIT compilers are quiet (at most
1% of a run's CPU, 3 to 12 runs), one JVM after the other; then the two JVMs' runs are interleaved (ABBA) for `ROUNDS`
rounds. Each run reports the JVM's CPU time by kind of thread (the loop's, the JIT compilers', the collector's, the
guard's own) and the broker's (/proc) from just before the consumer is built to its last record, and its throughput
from first record to last.

Target (issue 16's method): the guard's overhead in **CPU per record in the steady state** (from the record at a
tenth of the topic to the last: a live service pays its start-up once per process), every thread of the JVM but the
JIT compilers', the guarded loop's median over the bare loop's - 1, at most 5%. Why without the compilers: C2 still
compiled for seconds after one warm-up run each (0 to 0.6 us per record in a counted run, against ~1.1 us of the
loop's work), on no schedule tied to the run it falls in (both loops run the same client code), which made the
per-round ratios swing from 0.74 to 1.78; their share is printed beside it, as are the figure with them, the loop
thread's alone, the collector's share, the guard's threads' CPU per second (its handover-topic tail: a cost per
second, not per record), the per-round ratios and their spread, the figure with start-up, throughput and the
broker's CPU. `python -m benchmarks.guard_path` measures the guard's per-record path apart from Kafka.

    python -m benchmarks java_guard       # REPRISE_BENCH_RECORDS=N, REPRISE_BENCH_ROUNDS=N, or REPRISE_BENCH_QUICK=1

Maven builds the classes into the cache (`$REPRISE_CACHE/build/java-bench`), with its dependencies in `~/.m2`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from local_platform.cache import cache_root
from local_platform.kafka_broker import KafkaBroker

from . import measure
from .worker import PARTITIONS, RECORD_BYTES, fill, records_setting

REPO = Path(__file__).resolve().parents[1]
ROUNDS = int(os.environ.get("REPRISE_BENCH_ROUNDS") or 5)
TARGETS = {"guard_overhead": 0.05}
#: A fixed, pre-touched heap: a heap that grows over the runs makes the garbage collector's share per record fall
#: from the first rounds to the last (the young generation grows), whichever loop runs then.
JVM = ("-Xms1g", "-Xmx1g", "-XX:+AlwaysPreTouch")


def classpath() -> str:
    build = cache_root() / "build" / "java-bench"
    build.mkdir(parents=True, exist_ok=True)
    listing = build / "test-classpath.txt"
    log = build / "mvn.log"
    with log.open("w") as out:
        done = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                f"-Dreprise.build.dir={build}",
                "test-compile",
                "dependency:build-classpath",
                f"-Dmdep.outputFile={listing}",
                "-Dmdep.includeScope=test",
            ],
            cwd=REPO / "java",
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=900,
        )
    if done.returncode != 0:
        raise RuntimeError(f"building the Java classes failed; see {log}")
    return os.pathsep.join([str(build / "test-classes"), str(build / "classes"), listing.read_text().strip()])


class JavaLoop:
    """One JVM running one loop (`GuardOverhead ... bare|guarded`): warmed up once, then one run per `run(n)`."""

    def __init__(self, cp: str, args: list[str], log: Path) -> None:
        self.log = log.open("w")
        self.process = subprocess.Popen(
            ["java", *JVM, "-cp", cp, "io.reprise.kafka.bench.GuardOverhead", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**os.environ, "JAVA_TOOL_OPTIONS": "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"},
        )

    def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"GuardOverhead exited with {self.process.wait()}; see its log above")
        return json.loads(line)

    def warm(self) -> int:
        return int(self._line()["warm_runs"])

    def run(self, n: int) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"run {n}\n")
        self.process.stdin.flush()
        return self._line()

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def run(records: int | None = None) -> dict:
    records = records_setting(records)
    cp = classpath()
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-java-"))
    broker = KafkaBroker(workdir / "kafka", heap="1g")
    try:
        broker.start()
        source = broker.create_topic("bench-source", PARTITIONS)
        broker.create_topic("reprise.handover", 1, config={"cleanup.policy": "compact"})
        print(f"writing {records:,} records of {RECORD_BYTES} B into {PARTITIONS} partitions", flush=True)
        fill_rate = fill(broker.bootstrap, source, records)
        measured: list[dict[str, Any]] = []
        warm_runs: dict[str, list[int]] = {"bare": [], "guarded": []}
        for n in range(ROUNDS):
            # A fresh pair of JVMs each round: how well C2 happens to compile the client differs from one JVM to the
            # next by up to 10% of the CPU per record (one JVM per loop for five rounds put the guarded loop 10%
            # under the bare one, every round), so a round samples that too.
            jvms: dict[str, JavaLoop] = {}
            try:
                for loop in ("bare", "guarded"):  # warmed up one after the other, not side by side
                    args = [broker.bootstrap, source, str(records), loop, str(broker.pid or 0)]
                    jvms[loop] = JavaLoop(cp, args, workdir / f"{loop}-{n}.log")
                    warm_runs[loop].append(jvms[loop].warm())
                for loop in ("bare", "guarded") if n % 2 == 0 else ("guarded", "bare"):
                    measured.append(jvms[loop].run(n))
            finally:
                for jvm in jvms.values():
                    jvm.stop()
                for log in sorted(workdir.glob(f"*-{n}.log")):
                    print("\n".join(line for line in log.read_text().splitlines() if line.startswith("round")))
        reported: dict[str, Any] = {"warm_runs": warm_runs}
        per_loop: dict[str, list[dict[str, float]]] = {"bare": [], "guarded": []}
        for r in measured:
            per_loop[r["loop"]].append(
                {
                    "cpu_us": r["cpu_s"] / r["records"] * 1e6,
                    "broker_cpu_us": r["broker_cpu_s"] / r["records"] * 1e6,
                    # The target's figure: every thread but the JIT compilers' (a warm-up cost of the process, charged
                    # to whichever run it falls in; its share is printed beside it).
                    "steady_cpu_us": (r["steady_cpu_s"] - r["steady_jit_cpu_s"]) / r["steady_records"] * 1e6,
                    "steady_all_threads_cpu_us": r["steady_cpu_s"] / r["steady_records"] * 1e6,
                    "steady_loop_thread_cpu_us": r["steady_loop_cpu_s"] / r["steady_records"] * 1e6,
                    "steady_jit_cpu_us": r["steady_jit_cpu_s"] / r["steady_records"] * 1e6,
                    "steady_gc_cpu_us": r["steady_gc_cpu_s"] / r["steady_records"] * 1e6,
                    "guard_threads_cpu_ms_per_s": r["steady_guard_threads_cpu_s"] / r["steady_s"] * 1e3,
                    "steady_broker_cpu_us": r["steady_broker_cpu_s"] / r["steady_records"] * 1e6,
                    "rate": r["records"] / r["window_s"],
                    "startup_s": r["startup_s"],
                }
            )
        bare, guarded = per_loop["bare"], per_loop["guarded"]
        cpu = measure.compared([g["steady_cpu_us"] for g in guarded], [b["steady_cpu_us"] for b in bare])
        all_threads = measure.compared(
            [g["steady_all_threads_cpu_us"] for g in guarded], [b["steady_all_threads_cpu_us"] for b in bare]
        )
        loop_thread = measure.compared(
            [g["steady_loop_thread_cpu_us"] for g in guarded], [b["steady_loop_thread_cpu_us"] for b in bare]
        )
        with_startup = measure.compared([g["cpu_us"] for g in guarded], [b["cpu_us"] for b in bare])
        with_broker = measure.compared(
            [g["steady_cpu_us"] + g["steady_broker_cpu_us"] for g in guarded],
            [b["steady_cpu_us"] + b["steady_broker_cpu_us"] for b in bare],
        )
        throughput = measure.compared([g["rate"] for g in guarded], [b["rate"] for b in bare])
        overhead = cpu["ratio"] - 1
        met, line = measure.verdict_line(
            "java guard overhead (steady CPU/record, medians)",
            overhead,
            TARGETS["guard_overhead"],
            at_most=True,
            unit="%",
        )
        figures: dict[str, Any] = {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "rounds": ROUNDS,
            "warm_up_runs": reported["warm_runs"],
            "fill_records_per_second": round(fill_rate),
            "per_loop": {
                name: {key: measure.summary([f[key] for f in found], 3) for key in found[0]}
                for name, found in per_loop.items()
            },
            "guarded_vs_bare": {
                "steady_cpu_per_record": cpu,
                "steady_cpu_all_threads_per_record": all_threads,
                "steady_loop_thread_cpu_per_record": loop_thread,
                "cpu_per_record": with_startup,
                "steady_cpu_with_broker_per_record": with_broker,
                "throughput": throughput,
            },
            "guard_overhead": round(overhead, 4),
            "targets": TARGETS,
            "meets_target": met,
        }
        print(line, flush=True)
        print(
            f"    per-round guarded/bare CPU {cpu['paired']['rounds']} (median {cpu['paired']['median']}, spread "
            f"{cpu['paired']['spread']}); with start-up {with_startup['ratio']:.3f}; throughput guarded/bare "
            f"{throughput['ratio']:.3f}x; CPU with broker {with_broker['ratio']:.3f}",
            flush=True,
        )
        loops = figures["per_loop"]
        print(
            f"    steady, medians: all threads (JIT too) {all_threads['ratio']:.3f}, the loop's thread "
            f"{loop_thread['ratio']:.3f}; us/record JIT bare {loops['bare']['steady_jit_cpu_us']['median']:.3f} "
            f"guarded {loops['guarded']['steady_jit_cpu_us']['median']:.3f}, GC bare "
            f"{loops['bare']['steady_gc_cpu_us']['median']:.3f} guarded {loops['guarded']['steady_gc_cpu_us']['median']:.3f}; "
            f"the guard's threads {loops['guarded']['guard_threads_cpu_ms_per_s']['median']:.1f} ms CPU/s; "
            f"warm-up runs {reported['warm_runs']}",
            flush=True,
        )
        print(
            f"    CPU us/record (median, with start-up / steady): bare {loops['bare']['cpu_us']['median']:.2f} / "
            f"{loops['bare']['steady_cpu_us']['median']:.2f}, guarded {loops['guarded']['cpu_us']['median']:.2f} / "
            f"{loops['guarded']['steady_cpu_us']['median']:.2f}; start-up s (median): bare "
            f"{loops['bare']['startup_s']['median']:.2f}, guarded {loops['guarded']['startup_s']['median']:.2f}",
            flush=True,
        )
        return figures
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
