"""Java replay role benchmark: the role (`ReplayRole`, Drain mode) calling a no-op handler, against a bare
`KafkaConsumer` loop (poll, handle, commit asynchronously) calling the same handler (issue 12's target: >= 0.8x).

On one broker of the local platform, in one run, on the same source topic (default 1,000,000 records of 1 KiB
in 12 partitions): both loops run in a JVM of their own (`ReplayBenchMain`, from the Java library's test classes)
with `max.poll.records` = the role's batch size, so they compare the loop, not fetch tuning. Throughput counts from
the first batch the handler gets to the last; the role's start-up (bootstrap transaction, handover topic, group
join) is reported apart as wall time. `ROUNDS` interleaved runs each, the best of each counts (a shared machine's
spread between two runs of one loop is larger than the difference measured); all runs are kept in the figures.

    python -m benchmarks java_replay       # REPRISE_BENCH_RECORDS=N, or REPRISE_BENCH_QUICK=1
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from local_platform.kafka_broker import KafkaBroker

from .worker import PARTITIONS, RECORD_BYTES, _size, fill

ROUNDS = 3
TARGETS = {"replay_vs_bare": 0.8}


def _classpath() -> str:
    from tests.integration.java.jvm_classpath import java_classpath

    return java_classpath()


def java_loop(classpath: str, mode: str, bootstrap: str, topic: str, records: int, group: str, handover_topic: str,
              workdir: Path) -> dict[str, Any]:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH (run `make platform`)")
    log = workdir / f"{group}.log"
    with open(log, "wb") as err:
        result = subprocess.run([java, "-cp", classpath, "io.reprise.kafka.replay.ReplayBenchMain", mode, bootstrap,
                                 topic, str(records), group, handover_topic],
                                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"{mode} run failed ({result.returncode}): see {log}\n{log.read_text()[-2000:]}")
    return json.loads(result.stdout.decode().strip().splitlines()[-1])


def run(records: int | None = None) -> dict:
    records = records or _size()
    classpath = _classpath()
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-java-replay-"))
    broker = KafkaBroker(workdir / "kafka", heap="1g")
    try:
        broker.start()
        bootstrap = broker.bootstrap
        handover_topic = "bench.handover"
        source = broker.create_topic("bench-source", PARTITIONS)
        broker.create_topic(handover_topic, 1, config={"cleanup.policy": "compact"})
        print(f"writing {records:,} records of {RECORD_BYTES} B into {PARTITIONS} partitions", flush=True)
        fill_rate = fill(bootstrap, source, records)
        runs: dict[str, list[dict[str, Any]]] = {"bare": [], "replay": []}
        for attempt in range(ROUNDS):
            order = ("bare", "replay") if attempt % 2 == 0 else ("replay", "bare")
            for mode in order:
                runs[mode].append(java_loop(classpath, mode, bootstrap, source, records, f"bench-{mode}-{attempt}",
                                            handover_topic, workdir))
            print(f"  round {attempt + 1}: bare loop {runs['bare'][-1]['rate']:,.0f}/s, "
                  f"replay role {runs['replay'][-1]['rate']:,.0f}/s", flush=True)
        bare = max(runs["bare"], key=lambda r: r["rate"])
        replay = max(runs["replay"], key=lambda r: r["rate"])
        figures: dict[str, Any] = {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "fill_records_per_second": round(fill_rate),
            "bare_loop_records_per_second": round(bare["rate"]),
            "replay_role_records_per_second": round(replay["rate"]),
            "replay_role_wall_seconds": replay["wall_seconds"],
            "bare_loop_wall_seconds": bare["wall_seconds"],
            "all_runs": {mode: [round(r["rate"]) for r in found] for mode, found in runs.items()},
            "replay_vs_bare": round(replay["rate"] / bare["rate"], 3),
            "targets": TARGETS,
        }
        figures["meets_target"] = figures["replay_vs_bare"] >= TARGETS["replay_vs_bare"]
        print(json.dumps(figures, indent=2), flush=True)
        return figures
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    run()
