"""Test harness for the replay worker: real processes (so `kill -9` is real), producers, and the checks.

Every process is started in its own session through `local_platform.processes` and stopped by its PID,
also when a test fails (`Processes.stop_all` in a `finally`).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from local_platform import processes

REPO = Path(__file__).resolve().parents[3]
Offset = tuple[str, int, int]


def python_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'operator'}", "PYTHONUNBUFFERED": "1"}
    env.update(extra or {})
    return env


@dataclass
class Processes:
    """The processes one test started; `stop_all` stops every one by its PID."""

    log_dir: Path
    started: list[processes.ManagedProcess] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> processes.ManagedProcess:
        process = processes.start(name, argv, self.log_dir / f"{name}.log", env=python_env(env), cwd=REPO)
        self.started.append(process)
        return process

    def worker(self, name: str, env: Mapping[str, str]) -> processes.ManagedProcess:
        return self.start(name, [sys.executable, "-m", "replay_worker"], {**env, "REPRISE_MEMBER_NAME": name})

    def live(
        self, name: str, bootstrap: str, group: str, topic: str, out_dir: Path, handover_topic: str, batch: int = 200
    ) -> processes.ManagedProcess:
        return self.start(
            name,
            [
                sys.executable,
                "-m",
                "tests.integration.replay_worker.live_service",
                bootstrap,
                group,
                topic,
                str(out_dir),
                handover_topic,
            ],
            {"LIVE_BATCH": str(batch)},
        )

    @staticmethod
    def kill9(process: processes.ManagedProcess) -> None:
        """A crash: SIGKILL to the process (by PID), no chance to commit or leave the group."""
        if process.alive():
            os.kill(process.pid, signal.SIGKILL)
            process.popen.wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.started:
            process.stop(timeout=20)


class ProducerThread(threading.Thread):
    """Writes records to `topic` at about `rate` records/s until `total` are written or `stop()`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, total: int, seed: int = 0) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.topic, self.partitions, self.rate, self.total = topic, partitions, rate, total
        self.written = 0
        self._halt = threading.Event()
        self.random = random.Random(seed)
        self.error: str | None = None

    def run(self) -> None:
        began = time.monotonic()
        try:
            while self.written < self.total and not self._halt.is_set():
                due = int((time.monotonic() - began) * self.rate) + 1
                while self.written < min(due, self.total):
                    n = self.written
                    value = json.dumps({"n": n, "kind": "even" if n % 2 == 0 else "odd"}).encode()
                    self.producer.produce(
                        self.topic, value=value, key=str(n % 97).encode(), partition=n % self.partitions
                    )
                    self.written += 1
                self.producer.poll(0)
                time.sleep(0.005)
            self.producer.flush(30)
        except Exception as exc:  # surfaced by the test
            self.error = repr(exc)

    def stop(self) -> None:
        self._halt.set()
        self.join(60)


def produce(bootstrap: str, topic: str, partitions: int, count: int, value_of=None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for n in range(count):
        value = value_of(n) if value_of else json.dumps({"n": n, "kind": "even" if n % 2 == 0 else "odd"}).encode()
        while True:
            try:
                producer.produce(topic, value=value, key=str(n % 97).encode(), partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reprise-test-probe"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, tuple[int, str | None]]:
    """The group's committed offsets and metadata; retried while the group coordinator loads or moves."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
                return {tp.partition: (tp.offset, tp.metadata) for tp in found}
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def read_log_lines(folder: Path, prefix: str) -> Counter[Offset]:
    """Counts of `(topic, partition, offset)` in every `<prefix>*.log` of `folder`; a torn last line is skipped."""
    counts: Counter[Offset] = Counter()
    for path in sorted(folder.glob(f"{prefix}*.log")):
        for line in path.read_text().split("\n"):
            parts = line.split(" ")
            if len(parts) == 4 and parts[3].isdigit():
                counts[(parts[1], int(parts[2]), int(parts[3]))] += 1
    return counts


def wait_for(condition, timeout: float, what: str, interval: float = 0.25, processes_to_watch: Iterable = ()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        for process in processes_to_watch:
            if not process.alive() and process.popen.returncode not in (0, None, -9):
                raise AssertionError(f"{process.name} exited with {process.popen.returncode}:\n{process.log_tail(40)}")
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@dataclass
class SplitReport:
    """The outcome of a handover run, per the spec's checks."""

    lost: list[Offset]
    #: Offsets at or after the first skipped offset processed more than once (by either or both groups).
    duplicates: Counter[Offset]
    #: Offsets at or after the first skipped offset processed by both groups.
    both: list[Offset]
    first_skipped: dict[int, int | None]
    handover: dict[int, int]
    replay_count: int
    live_count: int

    def summary(self) -> str:
        return (
            f"lost={len(self.lost)} duplicates={sum(self.duplicates.values()) - len(self.duplicates)} "
            f"both={len(self.both)} first_skipped={self.first_skipped} handover={self.handover} "
            f"replay={self.replay_count} live={self.live_count}"
        )


def check_split(
    topic: str,
    partitions: int,
    starts: Mapping[int, int],
    live_from: Mapping[int, int],
    handover: Mapping[int, int],
    ends: Mapping[int, int],
    live: Counter[Offset],
    replay: Counter[Offset],
) -> SplitReport:
    """Check the Handover split on every partition.

    - Lost: an offset the live group had to process (from its committed offset at the start of the test on)
      or the replay had to (from S on) that nobody processed.
    - F(p), the first skipped offset, is the first offset >= S(p) and >= the live group's start that the live
      group never processed; from F on every offset must be processed exactly once across both groups.
    """
    lost: list[Offset] = []
    duplicates: Counter[Offset] = Counter()
    both: list[Offset] = []
    first: dict[int, int | None] = {}
    for p in range(partitions):
        low = min(starts[p], live_from.get(p, starts[p]))
        f = None
        for o in range(max(starts[p], live_from.get(p, 0)), ends[p]):
            if live[(topic, p, o)] == 0:
                f = o
                break
        first[p] = f
        for o in range(low, ends[p]):
            key = (topic, p, o)
            total = live[key] + replay[key]
            if total == 0:
                lost.append(key)
            elif f is not None and o >= f:
                if total > 1:
                    duplicates[key] = total
                if live[key] and replay[key]:
                    both.append(key)
    return SplitReport(lost, duplicates, both, first, dict(handover), sum(replay.values()), sum(live.values()))


def settle(
    bootstrap: str,
    handover_topic: str,
    replay_id: str,
    topic: str,
    partitions: int,
    live_group: str,
    lives: list,
    workers: list,
) -> tuple[dict[int, int | None], dict[int, int | None], dict[int, int]]:
    """After a replay handed every partition over: wait for the live group to reach the end and stop every
    process. (S per partition, H per partition, as the handover topic holds them; the end offsets)"""
    from replay_worker.topic.handover_topic import HandoverTopic

    ends = end_offsets(bootstrap, topic, partitions)
    wait_for(
        lambda: all(committed(bootstrap, live_group, topic, partitions)[p][0] >= ends[p] for p in range(partitions)),
        120,
        "the live service at the end",
        processes_to_watch=lives,
    )
    for process in lives + workers:
        process.stop()
    reader = HandoverTopic(bootstrap, handover_topic)
    try:
        final = reader.read_replay(replay_id)
    finally:
        reader.close()
    starts = {p: final.partitions[(topic, p)].start_offset for p in range(partitions)}
    handovers = {p: final.partitions[(topic, p)].handover_offset for p in range(partitions)}
    return starts, handovers, ends


def settle_and_check(
    bootstrap: str,
    handover_topic: str,
    replay_id: str,
    topic: str,
    partitions: int,
    live_group: str,
    live_from: Mapping[int, int],
    out_dir: Path,
    lives: list,
    workers: list,
) -> tuple[SplitReport, dict[int, int]]:
    """`settle`, then check the split of the ledgers at the S and H the handover topic holds. (the report, H per
    partition)"""
    starts, handovers, ends = settle(
        bootstrap, handover_topic, replay_id, topic, partitions, live_group, lives, workers
    )
    report = check_split(
        topic,
        partitions,
        starts,
        live_from,
        handovers,
        ends,
        read_log_lines(out_dir, "live"),
        read_log_lines(out_dir, "replay"),
    )
    print(report.summary())
    return report, handovers
