"""Benchmark of LakeReplay's Spark job: its throughput into Kafka against the same read and transform written
to Spark's `noop` sink, in one run on `local[2]` (target: at least 0.8x, on the median of the rounds).

Both sides run the job's own code on the same generated lake (three schema versions, day partitions): list
the range's files, read them by footer schema, evolve, filter the time range, label, spread and sort per key,
build the Kafka rows. The noop side is the job's `--dry-run`; the Kafka side is a real run into a real broker
of the local platform (one node, on the same two cores), validation off, so the ratio is the cost of Spark's
Kafka sink and the per-day resume bookkeeping. Only the write phase is timed on each side: the per-day count
that precedes it is the same on both. A warm-up pass of each side (the whole range) runs first so neither side
pays for JIT, class loading or making the producer; then the two sides alternate for `rounds` rounds (at
least 5; the order turned each round), and the ratio of each round's pair is taken: the figure is their
median, with the spread. Beside the wall-time ratio, the CPU seconds of Spark's JVM and of the broker per pass
(from /proc; the whole pass, its count included), and where the JVM's went, by thread (`measure.thread_cpu`): the
executor tasks (reading, sorting, building the rows and, on the Kafka side, Spark's row-to-record conversion,
the client's append and compression), the producer's network thread, GC, JIT and the rest (driver, Py4J);
and the seconds of the Kafka write spent writing progress markers.

    python -m benchmarks.spark [rows]          # default 2,000,000 rows
    python -m benchmarks spark [--quick]       # through the runner (`make bench`); --quick: 200,000 rows
    (REPRISE_BENCH_RECORDS: rows; REPRISE_BENCH_ROUNDS: rounds, default 5)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

#: Spark's JVM threads by what they do, from the start of their names (/proc keeps 15 characters of a name).
THREAD_GROUPS = (
    ("Executor task", "tasks"),
    ("kafka-producer", "producer_io"),
    ("GC Thread", "gc"),
    ("G1 ", "gc"),
    ("C1 CompilerThre", "jit"),
    ("C2 CompilerThre", "jit"),
)
DEFAULT_ROWS = 2_000_000
QUICK_ROWS = 200_000
DEFAULT_ROUNDS = 5
TARGET_RATIO = 0.8


def run(size: int | None = None, repeats: int | None = None) -> dict[str, Any]:
    """Run the benchmark on a lake of `size` rows (default 2M; 200k with REPRISE_BENCH_QUICK=1); returns the
    figures (and prints them)."""
    from benchmarks import measure

    quick = os.environ.get("REPRISE_BENCH_QUICK", "") not in ("", "0")
    size = size or int(os.environ.get("REPRISE_BENCH_RECORDS") or 0) or (QUICK_ROWS if quick else DEFAULT_ROWS)
    repeats = repeats or int(os.environ.get("REPRISE_BENCH_ROUNDS") or DEFAULT_ROUNDS)
    from local_platform.kafka_broker import KafkaBroker
    from local_platform.spark_jars import ensure_spark_jars
    from spark_app.job import run as run_job
    from spark_app.lakegen import LATEST_SCHEMA, LakeSpec, write_lake
    from spark_app.session import local_session, stop_local_session
    from spark_app.settings import parse_settings

    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-spark-"))
    broker = KafkaBroker(workdir / "broker")
    spark = None
    try:
        broker.start()
        spark = local_session(
            {"spark.jars": ",".join(str(p) for p in ensure_spark_jars()), "spark.driver.memory": "2g"}
        )
        spark.sparkContext.setLogLevel("ERROR")
        spec = LakeSpec(rows=size, days=30, keys=max(100, size // 200))
        lake = f"file://{workdir}/lake"
        began = time.monotonic()
        write_lake(spark, spec, lake, files_per_version_day=2)
        generated = time.monotonic() - began
        schema = workdir / "latest.json"
        schema.write_text(json.dumps(LATEST_SCHEMA))

        def settings(*extra: str, topic: str = "unused"):
            return parse_settings(
                [
                    "--source",
                    lake,
                    "--partition-column",
                    "dt",
                    "--timestamp-column",
                    "ts",
                    "--key-column",
                    "user_id",
                    "--latest-schema",
                    str(schema),
                    "--to",
                    "2024-03-01T00:00:00Z",
                    "--bootstrap-servers",
                    broker.bootstrap,
                    "--topic",
                    topic,
                    "--progress",
                    f"file://{workdir}/progress-{uuid.uuid4().hex[:6]}",
                    *extra,
                ]
            )

        # Warm-up, a whole pass of each side: every schema version's code is compiled (a part of the range
        # holds only some versions; a first round after such a warm-up still spent 8 more CPU-s than the next),
        # the Kafka sink's and the producer's too, and the producer Spark caches is made.
        run_job(spark, settings("--dry-run"))
        run_job(spark, settings("--no-validate", topic=broker.create_topic("bench-lake-warm-up", 6)))
        jvm = getattr(spark.sparkContext._gateway, "proc", None)
        jvm_pid = jvm.pid if jvm is not None else None
        noop_times, kafka_times, records = [], [], 0
        noop_cpu, kafka_cpu = [], []

        noop_threads: list[dict[str, float]] = []
        kafka_threads: list[dict[str, float]] = []
        marking: list[float] = []

        def cpu() -> tuple[float, float]:
            return measure.process_cpu(jvm_pid), measure.process_cpu(broker.pid)

        for index in range(repeats):
            # Interleaved, the order turned each round: the neighbours' load moves between passes.
            for side in ("noop", "kafka") if index % 2 == 0 else ("kafka", "noop"):
                before, threads_before = cpu(), measure.thread_cpu(jvm_pid)
                if side == "noop":
                    noop_times.append(run_job(spark, settings("--dry-run")).seconds_writing)
                    after = cpu()
                    noop_cpu.append((after[0] - before[0], after[1] - before[1]))
                    noop_threads.append(
                        threads_spent(threads_before, measure.thread_cpu(jvm_pid), after[0] - before[0])
                    )
                    continue
                topic = broker.create_topic(f"bench-lake-{uuid.uuid4().hex[:8]}", 6)
                kafka = run_job(spark, settings("--no-validate", topic=topic))
                after = cpu()
                kafka_cpu.append((after[0] - before[0], after[1] - before[1]))
                kafka_threads.append(threads_spent(threads_before, measure.thread_cpu(jvm_pid), after[0] - before[0]))
                kafka_times.append(kafka.seconds_writing)
                marking.append(kafka.seconds_marking)
                records = kafka.records_in_range
                written = _end_offsets(broker, topic)
                if written != records:
                    raise RuntimeError(f"the topic holds {written} records, the job counted {records}")
            print(
                f"  round {index + 1}: noop {noop_times[-1]:.2f} s, Kafka {kafka_times[-1]:.2f} s "
                f"(ratio {noop_times[-1] / kafka_times[-1]:.3f})",
                flush=True,
            )
        ratio = measure.spread([n / k for n, k in zip(noop_times, kafka_times)])
        figures = {
            "rows": size,
            "records": records,
            "rounds": repeats,
            "lake_generated_seconds": round(generated, 1),
            "noop_seconds": [round(t, 2) for t in noop_times],
            "kafka_seconds": [round(t, 2) for t in kafka_times],
            "noop_records_per_second": round(records / statistics.median(noop_times)),
            "kafka_records_per_second": round(records / statistics.median(kafka_times)),
            "ratio": ratio["median"],
            "ratio_rounds": ratio,
            "noop_cpu_s_jvm_broker": [[round(a, 2), round(b, 2)] for a, b in noop_cpu],
            "kafka_cpu_s_jvm_broker": [[round(a, 2), round(b, 2)] for a, b in kafka_cpu],
            "cpu_ratio": measure.spread([(n[0] + n[1]) / (k[0] + k[1]) for n, k in zip(noop_cpu, kafka_cpu)]),
            "noop_jvm_cpu_s_by_thread": _medians(noop_threads),
            "kafka_jvm_cpu_s_by_thread": _medians(kafka_threads),
            "kafka_marking_seconds": [round(t, 2) for t in marking],
            "target_ratio": TARGET_RATIO,
        }
        figures["meets_target"] = figures["ratio"] >= TARGET_RATIO
        print(
            f"spark lake replay, {records:,} records ({size:,} rows, local[2], {repeats} rounds): "
            f"Kafka {figures['kafka_records_per_second']:,}/s vs noop {figures['noop_records_per_second']:,}/s "
            f"(medians)\n  lake_into_kafka_vs_noop           "
            f"{measure.verdict(ratio['median'], TARGET_RATIO, True)} [{ratio['min']:.3f}..{ratio['max']:.3f}]\n"
            f"  lake_cpu_vs_noop (JVM + broker)        {figures['cpu_ratio']['median']:.3f} (figure)\n"
            f"  CPU-s per pass (medians): noop JVM {_by_thread(figures['noop_jvm_cpu_s_by_thread'])}, "
            f"broker {statistics.median(b for _, b in noop_cpu):.2f}\n"
            f"                            Kafka JVM {_by_thread(figures['kafka_jvm_cpu_s_by_thread'])}, "
            f"broker {statistics.median(b for _, b in kafka_cpu):.2f}; progress markers "
            f"{statistics.median(marking):.2f} s of the Kafka write",
            flush=True,
        )
        return figures
    finally:
        if spark is not None:
            stop_local_session(spark)
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def threads_spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], total: float) -> dict:
    """The CPU seconds the JVM spent between two `measure.thread_cpu` readings, by THREAD_GROUPS; `other` is the
    rest of the process's `total` (threads of no group, and those that ended in between)."""
    spent = {group: 0.0 for _, group in THREAD_GROUPS}
    for tid, (name, seconds) in after.items():
        group = next((g for prefix, g in THREAD_GROUPS if name.startswith(prefix)), None)
        if group is not None:
            spent[group] += seconds - before.get(tid, (name, 0.0))[1]
    spent["other"] = max(0.0, total - sum(spent.values()))
    spent["total"] = total
    return spent


def _medians(readings: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in readings), 2) for key in readings[0]} if readings else {}


def _by_thread(spent: dict[str, float]) -> str:
    parts = ", ".join(f"{key} {value:.2f}" for key, value in spent.items() if key != "total" and value >= 0.005)
    return f"{spent.get('total', 0.0):.2f} ({parts})"


def _end_offsets(broker: Any, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-ends"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)
    finally:
        consumer.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = run(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(json.dumps(result, indent=2))
    sys.exit(0 if result["meets_target"] else 1)
