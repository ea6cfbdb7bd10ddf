"""Replay worker benchmark: the replay against the same work written by hand, and the guard's overhead.

All on one broker, in one run, on one source topic (default 1,000,000 records of 1 KiB in 12 partitions, half
of them matching the filter `kind == "even"`). Each contender runs as its own process (see `measure`):

- **forward** (`python -m replay_worker`, Drain, forwarding the matching half to a 12-partition topic)
  against the **bare copy loop** (`baselines copy`: consume, the same filter, produce with the same producer
  settings). Target: at least 0.9x. Second figure: against the **kcat pipe** (`kcat -C | kcat -P`, which
  copies every record, unfiltered).
- **handler mode** (the worker calling a handler with each batch's matches) against the **bare handler loop**
  (`baselines handler`, the same batch size), once with a no-op handler and once with one that writes each
  batch to SQLite (`handlers`). Target: at least 0.9x each.
- **guard**: the plain read loop through `GuardedConsumer` against the bare read loop, with no replay active
  (target: at most 5% more CPU per record) and with a Handover replay active whose H is not known yet, so the
  guard judges every record and skips the matching half (reported; the service handles half the records).
- **RSS**: the forward worker's peak resident set (VmHWM), at most 200 MiB.

A ratio is the baseline's cost per record over Reprise's, per round; the figure is the median of the rounds
(at least 5, interleaved), with the spread. The cost is CPU seconds per record of the process plus the
process's own (getrusage: steady under load); the same ratio with the broker's CPU added, and of wall time,
are printed beside it.

    python -m benchmarks.worker [--records N] [--rounds R] [--parts forward,handler,guard]
    (or REPRISE_BENCH_RECORDS, REPRISE_BENCH_ROUNDS, REPRISE_BENCH_PARTS; REPRISE_BENCH_QUICK=1: 100,000;
    REPRISE_BENCH_KEEP=1 keeps the work folder with every process's log)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks import measure
from benchmarks.baselines import FILTER
from local_platform.kafka_broker import KafkaBroker

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RECORDS = 1_000_000
QUICK_RECORDS = 100_000
RECORD_BYTES = 1024
PARTITIONS = 12
DEFAULT_ROUNDS = 5
BATCH = 5000
PARTS = ("forward", "handler", "guard")
#: (figure, target, at least?)
TARGETS = {
    "forward_vs_copy_loop": (0.9, True),
    "handler_noop_vs_loop": (0.9, True),
    "handler_sqlite_vs_loop": (0.9, True),
    "guard_idle_overhead": (0.05, False),
    "worker_rss_mib": (200.0, False),
}
HANDOVER_TOPIC = "bench.handover"
#: What the contenders import, imported once to write its bytecode before the rounds.
WARM_IMPORTS = (
    "import benchmarks.baselines, benchmarks.handlers, replay_worker.__main__, "
    "replay_worker.replay.consumer, replay_worker.guard, replay_worker.replay.bootstrap, replay_worker.logging"
)


def records_setting(given: int | None) -> int:
    if given:
        return given
    if os.environ.get("REPRISE_BENCH_RECORDS"):
        return int(os.environ["REPRISE_BENCH_RECORDS"])
    return QUICK_RECORDS if os.environ.get("REPRISE_BENCH_QUICK") else DEFAULT_RECORDS


def rounds_setting(given: int | None) -> int:
    return given or int(os.environ.get("REPRISE_BENCH_ROUNDS") or DEFAULT_ROUNDS)


def fill(bootstrap: str, topic: str, records: int) -> float:
    """Write `records` JSON records of exactly 1 KiB, half of them `"kind":"even"`; returns records/s."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1048576,
            "queue.buffering.max.kbytes": 1048576,
            "acks": "all",
        }
    )
    rng = random.Random(7)
    pads = ["".join(rng.choice("0123456789abcdef") for _ in range(RECORD_BYTES)) for _ in range(64)]
    began = time.monotonic()
    for n in range(records):
        head = '{"kind":"%s","n":%d,"pad":"' % ("even" if n % 2 == 0 else "odd", n)
        value = (head + pads[n % 64][: RECORD_BYTES - len(head) - 2] + '"}').encode()
        while True:
            try:
                producer.produce(topic, value=value, key=str(n % 10007).encode(), partition=n % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(300)
    return records / (time.monotonic() - began)


def end_total(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
            for p in range(PARTITIONS)
        )
    finally:
        consumer.close()


class RssSampler(threading.Thread):
    """Samples VmHWM (peak RSS) of a process until it exits."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kib = 0

    def run(self) -> None:
        status = Path(f"/proc/{self.pid}/status")
        while True:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            except (OSError, ValueError):
                return
            time.sleep(0.1)


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def reading_seconds(log_path: Path) -> float | None:
    """From the worker's log: its first record read to every partition finished."""
    started = finished = None
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "first records read" and started is None:
            started = entry["ts"]
        if str(entry.get("msg", "")).startswith("every partition of the replay is finished"):
            finished = entry["ts"]
    if started is None or finished is None:
        return None
    return _seconds(finished) - _seconds(started)


class Run:
    """The broker, the source topic, and how to start each contender on it."""

    def __init__(self, workdir: Path, records: int) -> None:
        self.workdir = workdir
        self.records = records
        self.broker = KafkaBroker(workdir / "kafka", heap="1g")
        self.source = "bench-source"
        # Bytecode compiled once, as the image does (`compileall` in the Dockerfile): with PYTHONDONTWRITEBYTECODE
        # (set in some shells) every contender compiled every module it imports at each start, and the worker,
        # importing more of the project than a bare loop, paid more of it (about 1-2% of a ratio).
        environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.pycache = workdir / "pycache"
        self.env = {**environ, "PYTHONPATH": f"{REPO}:{REPO / 'operator'}", "PYTHONPYCACHEPREFIX": str(self.pycache)}
        self.python = sys.executable

    def start(self) -> None:
        # The prefix holds the bytecode of every module a contender imports (the standard library's too), so
        # compile it all before the first round rather than in it.
        for argv in (["-m", "compileall", "-q", "replay_worker", "benchmarks"], ["-c", WARM_IMPORTS]):
            subprocess.run([self.python, *argv], env=self.env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        self.broker.start()
        self.broker.create_topic(self.source, PARTITIONS)
        self.broker.create_topic(HANDOVER_TOPIC, 1, config={"cleanup.policy": "compact"})
        print(f"writing {self.records:,} records of {RECORD_BYTES} B into {PARTITIONS} partitions", flush=True)
        rate = fill(self.broker.bootstrap, self.source, self.records)
        print(f"  written at {rate:,.0f} records/s", flush=True)

    def measured(
        self,
        argvs: list[list[str]],
        name: str,
        env: dict[str, str] | None = None,
        pipe: bool = False,
        on_start: Callable[[list[Any]], None] | None = None,
    ) -> measure.Sample:
        return measure.run_processes(
            argvs,
            self.records,
            env=env or self.env,
            broker_pid=self.broker.pid,
            log=self.workdir / f"{name}.log",
            pipe=pipe,
            cwd=REPO,
            on_start=on_start,
        )

    # -- the hand-written loops

    def loop(self, kind: str, name: str, *extra: str, env: dict[str, str] | None = None) -> measure.Sample:
        argv = [
            self.python,
            "-m",
            "benchmarks.baselines",
            kind,
            "--bootstrap",
            self.broker.bootstrap,
            "--topic",
            self.source,
            "--records",
            str(self.records),
            "--group",
            name,
            "--batch",
            str(BATCH),
            "--handover-topic",
            HANDOVER_TOPIC,
            *extra,
        ]
        sample = self.measured([argv], name, env)
        if sample.reported.get("records") != self.records:
            raise RuntimeError(f"{name} read {sample.reported.get('records')} records, not {self.records}")
        return sample

    # -- the replay worker

    def worker(
        self, name: str, base_env: dict[str, str] | None = None, **settings: str
    ) -> tuple[measure.Sample, float]:
        # A handover topic per run, made before it as the operator does: the worker reads the whole topic at start,
        # and one shared by the rounds made each run read the records of every earlier run's replay (which the
        # operator tombstones once a replay is cleaned up), a cost growing with the rounds that no bare loop pays.
        handover_topic = self.broker.create_topic(f"{HANDOVER_TOPIC}.{name}", 1, config={"cleanup.policy": "compact"})
        env = {
            **(base_env or self.env),
            "REPRISE_BOOTSTRAP_SERVERS": self.broker.bootstrap,
            "REPRISE_REPLAY_ID": f"bench/{name}",
            "REPRISE_TOPICS": self.source,
            "REPRISE_REPLAY_GROUP": name,
            "REPRISE_FILTER": json.dumps(FILTER),
            "REPRISE_MODE": "Drain",
            "REPRISE_EXIT_WHEN_DONE": "true",
            "REPRISE_METRICS_PORT": "0",
            "REPRISE_BATCH_SIZE": str(BATCH),
            "REPRISE_HANDOVER_TOPIC": handover_topic,
            "REPRISE_MEMBER_NAME": name,
            **settings,
        }
        samplers: list[RssSampler] = []

        def watch(processes: list[Any]) -> None:
            samplers.append(RssSampler(processes[0].pid))
            samplers[0].start()

        sample = self.measured([[self.python, "-m", "replay_worker"]], name, env, on_start=watch)
        samplers[0].join(5)
        reading = reading_seconds(self.workdir / f"{name}.log")
        if reading is None:
            raise RuntimeError(f"cannot find the worker's first record and finish in {self.workdir / name}.log")
        sample.reported["reading_s"] = round(reading, 3)
        return sample, samplers[0].peak_kib / 1024


def _round_line(index: int, samples: dict[str, measure.Sample]) -> None:
    parts = [
        f"{name} {s.total_cpu_per_record_us:.1f} us/rec cpu ({s.cpu_per_record_us:.1f} own), {s.wall:.1f} s"
        for name, s in samples.items()
    ]
    print(f"  round {index + 1}: " + "; ".join(parts), flush=True)


def bench_forward(run: Run, rounds: int) -> dict[str, Any]:
    bootstrap = run.broker.bootstrap
    expected = run.records // 2 + run.records % 2
    rss: list[float] = []

    def copy_loop(index: int) -> measure.Sample:
        target = run.broker.create_topic(f"bench-copy-{index}", PARTITIONS)
        sample = run.loop("copy", f"bench-copy-{index}", "--target", target)
        if end_total(bootstrap, target) != expected:
            raise RuntimeError(f"the copy loop wrote {end_total(bootstrap, target)} records, not {expected}")
        return sample

    def forward(index: int) -> measure.Sample:
        target = run.broker.create_topic(f"bench-forward-{index}", PARTITIONS)
        sample, peak = run.worker(f"bench-forward-{index}", REPRISE_FORWARD_TOPIC=target)
        rss.append(peak)
        if end_total(bootstrap, target) != expected:
            raise RuntimeError(f"the worker forwarded {end_total(bootstrap, target)} records, not {expected}")
        return sample

    contenders: dict[str, Callable[[int], measure.Sample]] = {"copy_loop": copy_loop, "forward": forward}
    kcat = shutil.which("kcat")
    if kcat:

        def kcat_pipe(index: int) -> measure.Sample:
            target = run.broker.create_topic(f"bench-kcat-{index}", PARTITIONS)
            sample = run.measured(
                [
                    [kcat, "-C", "-b", bootstrap, "-t", run.source, "-o", "beginning", "-e", "-q"],
                    [kcat, "-P", "-b", bootstrap, "-t", target],
                ],
                f"bench-kcat-{index}",
                pipe=True,
            )
            if end_total(bootstrap, target) != run.records:
                raise RuntimeError(f"the kcat pipe copied {end_total(bootstrap, target)} records, not {run.records}")
            return sample

        contenders["kcat_pipe"] = kcat_pipe
    else:
        print("kcat is not installed (`apt-get install kcat`): the kcat-pipe figure is left out", flush=True)
    samples = measure.interleaved(rounds, contenders, _round_line)
    figures: dict[str, Any] = {
        "forward_vs_copy_loop": measure.speed_ratio(samples["copy_loop"], samples["forward"], measure.per_record_cpu),
        "forward_vs_copy_loop_with_broker": measure.speed_ratio(
            samples["copy_loop"], samples["forward"], measure.per_record_cpu_with_broker
        ),
        "forward_vs_copy_loop_wall": measure.speed_ratio(
            samples["copy_loop"], samples["forward"], measure.per_record_wall
        ),
        "worker_rss_mib": round(max(rss), 1),
    }
    if "kcat_pipe" in samples:
        figures["forward_vs_kcat_pipe"] = measure.speed_ratio(
            samples["kcat_pipe"], samples["forward"], measure.per_record_cpu
        )
        figures["forward_vs_kcat_pipe_wall"] = measure.speed_ratio(
            samples["kcat_pipe"], samples["forward"], measure.per_record_wall
        )
    figures["runs"] = {name: [s.figures() for s in runs] for name, runs in samples.items()}
    return figures


def bench_handler(run: Run, rounds: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for handler in ("noop", "to_sqlite"):
        short = "sqlite" if handler == "to_sqlite" else handler
        spec = f"benchmarks.handlers:{handler}"

        def env_for(name: str) -> dict[str, str]:
            db = run.workdir / f"{name}.sqlite"
            db.unlink(missing_ok=True)
            return {**run.env, "BENCH_SQLITE_DB": str(db)}

        def loop(index: int, short: str = short, spec: str = spec) -> measure.Sample:
            name = f"bench-{short}-loop-{index}"
            return run.loop("handler", name, "--handler", spec, env=env_for(name))

        def worker(index: int, short: str = short, spec: str = spec) -> measure.Sample:
            name = f"bench-{short}-worker-{index}"
            return run.worker(name, env_for(name), REPRISE_HANDLER=spec)[0]

        print(f"  handler {spec}", flush=True)
        samples = measure.interleaved(rounds, {"handler_loop": loop, "handler_mode": worker}, _round_line)
        figures[f"handler_{short}_vs_loop"] = measure.speed_ratio(
            samples["handler_loop"], samples["handler_mode"], measure.per_record_cpu
        )
        figures[f"handler_{short}_vs_loop_with_broker"] = measure.speed_ratio(
            samples["handler_loop"], samples["handler_mode"], measure.per_record_cpu_with_broker
        )
        figures[f"handler_{short}_vs_loop_wall"] = measure.speed_ratio(
            samples["handler_loop"], samples["handler_mode"], measure.per_record_wall
        )
        figures[f"runs_{short}"] = {name: [s.figures() for s in runs] for name, runs in samples.items()}
    return figures


def _activate_replay(run: Run, live_group: str) -> None:
    """A Handover replay of the source topic guarded by `live_group`, started at 0, H not known yet: its guard
    skips every matching record."""
    from replay_worker.topic.handover_topic import HandoverTopic, now_ms
    from replay_worker.protocol.wire import ReplayInfo, StartInfo

    replay_id = f"bench/skipping-{live_group}"
    topic = HandoverTopic(run.broker.bootstrap, HANDOVER_TOPIC)
    try:
        topic.publish(
            ReplayInfo(replay_id, "Handover", f"{live_group}-replay", live_group, (run.source,), FILTER, now_ms()),
            *[StartInfo(replay_id, run.source, p, 0, at_ms=now_ms()) for p in range(PARTITIONS)],
        )
    finally:
        topic.close()


def bench_guard(run: Run, rounds: int) -> dict[str, Any]:
    def bare(index: int) -> measure.Sample:
        return run.loop("read", f"bench-read-{index}")

    def idle(index: int) -> measure.Sample:
        return run.loop("guarded", f"bench-guard-idle-{index}")

    def skipping(index: int) -> measure.Sample:
        group = f"bench-guard-skipping-{index}"
        _activate_replay(run, group)
        return run.loop("guarded", group)

    samples = measure.interleaved(
        rounds, {"read_loop": bare, "guard_idle": idle, "guard_skipping": skipping}, _round_line
    )
    return {
        "guard_idle_overhead": measure.overhead(samples["read_loop"], samples["guard_idle"], measure.per_record_cpu),
        "guard_idle_overhead_with_broker": measure.overhead(
            samples["read_loop"], samples["guard_idle"], measure.per_record_cpu_with_broker
        ),
        "guard_idle_overhead_wall": measure.overhead(
            samples["read_loop"], samples["guard_idle"], measure.per_record_wall
        ),
        "guard_skipping_overhead": measure.overhead(
            samples["read_loop"], samples["guard_skipping"], measure.per_record_cpu
        ),
        "guard_skipping_overhead_with_broker": measure.overhead(
            samples["read_loop"], samples["guard_skipping"], measure.per_record_cpu_with_broker
        ),
        "guard_skipping_overhead_wall": measure.overhead(
            samples["read_loop"], samples["guard_skipping"], measure.per_record_wall
        ),
        "runs": {name: [s.figures() for s in runs] for name, runs in samples.items()},
    }


def run(records: int | None = None, rounds: int | None = None, parts: list[str] | None = None) -> dict[str, Any]:
    records = records_setting(records)
    rounds = rounds_setting(rounds)
    # From the environment, the parts of other benchmarks are not this one's concern.
    parts = parts or [p for p in (os.environ.get("REPRISE_BENCH_PARTS") or "").split(",") if p in PARTS] or list(PARTS)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown part(s) {sorted(unknown)}; known: {', '.join(PARTS)}")
    workdir = Path(tempfile.mkdtemp(prefix="reprise-bench-worker-"))
    bench = Run(workdir, records)
    began = time.monotonic()
    try:
        bench.start()
        figures: dict[str, Any] = {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "rounds": rounds,
        }
        for part in parts:
            print(f"- {part}: {rounds} rounds", flush=True)
            part_began = time.monotonic()
            measured = {"forward": bench_forward, "handler": bench_handler, "guard": bench_guard}[part]
            figures[part] = measured(bench, rounds)
            figures[part]["seconds"] = round(time.monotonic() - part_began, 1)
        figures["seconds"] = round(time.monotonic() - began, 1)
        figures["meets_target"] = report(figures)
        return figures
    finally:
        bench.broker.stop()
        if os.environ.get("REPRISE_BENCH_KEEP"):
            print(f"kept {workdir} (REPRISE_BENCH_KEEP)", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def report(figures: dict[str, Any]) -> bool:
    """Print every ratio beside its target; True when every target is met on the median."""
    met = True
    print(
        f"worker ({figures['records']:,} records, {figures['rounds']} rounds; ratios of CPU per record of the "
        "measured process unless named _with_broker or _wall; median of rounds [min..max]):",
        flush=True,
    )
    for part in PARTS:
        for name, value in (figures.get(part) or {}).items():
            if not isinstance(value, dict) or "median" not in value:
                if name in TARGETS and isinstance(value, (int, float)):
                    target, at_least = TARGETS[name]
                    line = measure.verdict(value, target, at_least)
                    met &= line.startswith("ok")
                    print(f"  {name:<32} {line}", flush=True)
                continue
            spread = f"[{value['min']:.3f}..{value['max']:.3f}]"
            if name in TARGETS:
                target, at_least = TARGETS[name]
                line = measure.verdict(value["median"], target, at_least)
                met &= line.startswith("ok")
            else:
                line = f"     {value['median']:.3f} (figure)"
            print(f"  {name:<32} {line} {spread}", flush=True)
    return met


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=None, help=f"source records (default {DEFAULT_RECORDS:,})")
    parser.add_argument("--rounds", type=int, default=None, help=f"rounds (default {DEFAULT_ROUNDS})")
    parser.add_argument("--parts", default=None, help=f"comma-separated, of {', '.join(PARTS)} (default all)")
    args = parser.parse_args()
    figures = run(args.records, args.rounds, args.parts.split(",") if args.parts else None)
    print(json.dumps(figures, indent=2))
    sys.exit(0 if figures["meets_target"] else 1)


if __name__ == "__main__":
    main()
