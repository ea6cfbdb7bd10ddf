"""Java guard benchmark: a `KafkaConsumer` loop through the Java `GuardedConsumer` with no replay active,
against the same loop on a bare `KafkaConsumer`, on one broker of the local platform, in one run.

The topic is the worker benchmark's (default 1,000,000 records of 1 KiB in 12 partitions). Both loops call the
same no-op handler on every record and commit after every poll; the Java side (`io.reprise.kafka.bench.
GuardOverhead`, in the library's test sources) interleaves the runs and keeps the best of each, printing one
JSON line with every run. Target: the guard's overhead at most 5% (HANDOVER.md's guard, issue 12).

    python -m benchmarks java_guard       # REPRISE_BENCH_RECORDS=N, or REPRISE_BENCH_QUICK=1

Maven builds the classes into the cache (`$REPRISE_CACHE/build/java-bench`), with its dependencies in `~/.m2`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from local_platform.cache import cache_root
from local_platform.kafka_broker import KafkaBroker

from .worker import PARTITIONS, RECORD_BYTES, _size, fill

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 3
TARGETS = {"guard_overhead": 0.05}


def classpath() -> str:
    build = cache_root() / "build" / "java-bench"
    build.mkdir(parents=True, exist_ok=True)
    listing = build / "test-classpath.txt"
    log = build / "mvn.log"
    with log.open("w") as out:
        done = subprocess.run(["mvn", "-B", "-q", f"-Dreprise.build.dir={build}", "test-compile",
                               "dependency:build-classpath", f"-Dmdep.outputFile={listing}", "-Dmdep.includeScope=test"],
                              cwd=REPO / "java", stdout=out, stderr=subprocess.STDOUT, check=False, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"building the Java classes failed; see {log}")
    return os.pathsep.join([str(build / "test-classes"), str(build / "classes"), listing.read_text().strip()])


def run(records: int | None = None) -> dict:
    records = records or _size()
    cp = classpath()
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-java-"))
    broker = KafkaBroker(workdir / "kafka", heap="1g")
    try:
        broker.start()
        source = broker.create_topic("bench-source", PARTITIONS)
        print(f"writing {records:,} records of {RECORD_BYTES} B into {PARTITIONS} partitions", flush=True)
        fill_rate = fill(broker.bootstrap, source, records)
        done = subprocess.run(["java", "-Xmx1g", "-cp", cp, "io.reprise.kafka.bench.GuardOverhead", broker.bootstrap,
                               source, str(records), str(ROUNDS)],
                              capture_output=True, text=True, check=False, timeout=3600,
                              env={**os.environ, "JAVA_TOOL_OPTIONS": "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"})
        print(done.stderr[-4000:], flush=True)
        if done.returncode != 0:
            raise RuntimeError(f"GuardOverhead exited with {done.returncode}")
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        overhead = max(0.0, 1 - measured["guard_ratio"])
        figures: dict[str, Any] = {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "fill_records_per_second": round(fill_rate),
            "bare_loop_records_per_second": measured["bare_records_per_s"],
            "guarded_loop_records_per_second": measured["guarded_records_per_s"],
            "all_runs": {"bare": measured["bare_runs"], "guarded": measured["guarded_runs"]},
            "guard_overhead": round(overhead, 4),
            "targets": TARGETS,
        }
        figures["meets_target"] = overhead <= TARGETS["guard_overhead"]
        return figures
    finally:
        broker.stop()


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
