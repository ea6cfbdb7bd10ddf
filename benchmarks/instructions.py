"""Instructions per record of the replay worker's loop in handler mode and of the bare handler loop, on the same fixed
batches, counted by callgrind: a figure that stays the same whatever the neighbours do, for per-record work too
small for CPU time to show on a shared machine. Not a benchmark (`make bench` does not run it).

    python -m benchmarks.instructions                 # both loops under valgrind; prints each one's figure
    python -m benchmarks.instructions --batches 20 --run 100 --handler to_sqlite

Each loop's body runs as it does in its process, `consume()` aside: the worker's is `ReplayConsumer.run`'s (the
batch taken, filtered, handed to the handler, counted, committed, the partitions' finish decided) against a
consumer that answers positions and commits at once; the bare loop's is the handler loop of `baselines` (copied:
keep them alike). The batches are `--batches` of 5,000 records of 1 KiB as `worker` writes them, in runs of `--run`
records per partition over 12 partitions, made before the count; two more go first, uncounted. Only what runs
inside `functools.reduce` (the counted batches) is collected (`--toggle-collect`), so the figure is the loop's own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from functools import reduce
from pathlib import Path
from typing import Any, Callable

BATCH = 5000
PARTITIONS = 12
TOPIC = "bench-source"
WARM = 2


def batches(count: int, run: int) -> list[tuple[list[Any], dict[int, int]]]:
    """`count` batches and, after each, every partition's consumer position (the offset after its last record)."""
    from confluent_kafka import Message

    from benchmarks.worker import RECORD_BYTES

    rng = random.Random(7)
    pads = ["".join(rng.choice("0123456789abcdef") for _ in range(RECORD_BYTES)) for _ in range(64)]
    next_offset = [0] * PARTITIONS
    made: list[tuple[list[Any], dict[int, int]]] = []
    partition = 0
    for _ in range(count):
        batch: list[Any] = []
        while len(batch) < BATCH:
            for _ in range(min(run, BATCH - len(batch))):
                offset = next_offset[partition]
                next_offset[partition] += 1
                n = offset * PARTITIONS + partition
                head = '{"kind":"%s","n":%d,"pad":"' % ("even" if n % 2 == 0 else "odd", n)
                value = (head + pads[n % 64][: RECORD_BYTES - len(head) - 2] + '"}').encode()
                batch.append(
                    Message(topic=TOPIC, partition=partition, offset=offset, key=b"%d" % (n % 10007), value=value)
                )
            partition = (partition + 1) % PARTITIONS
        made.append((batch, dict(enumerate(next_offset))))
    return made


def bare_loop(handler_spec: str) -> Callable[[Any, tuple[list[Any], dict[int, int]]], None]:
    """The per-batch body of `baselines`' handler loop."""
    from replay_worker.replay.delivery import load_handler
    from replay_worker.protocol.filters import compile_filter

    from benchmarks.baselines import FILTER

    predicate = compile_filter(FILTER).value_predicate()
    assert predicate is not None
    handler = load_handler(handler_spec)
    counts = {"seen": 0, "matched": 0}

    def step(_: Any, item: tuple[list[Any], dict[int, int]]) -> None:
        messages = item[0]
        if not messages:
            return
        messages = [m for m in messages if m.error() is None]
        counts["seen"] += len(messages)
        matching = [message for message in messages if predicate(message.value())]
        counts["matched"] += len(matching)
        handler(matching)

    return step


def worker_loop(handler_spec: str) -> Callable[[Any, tuple[list[Any], dict[int, int]]], None]:
    """The body of `ReplayConsumer.run`'s loop, in Drain mode, with the partitions assigned from offset 0."""
    from confluent_kafka import OFFSET_INVALID, TopicPartition

    from benchmarks.baselines import FILTER
    from replay_worker.replay.consumer import ReplayConsumer
    from replay_worker.replay.delivery import DeadLetters, HandlerDelivery, load_handler
    from replay_worker.protocol.filters import compile_filter
    from replay_worker.protocol.handover import ReplayHandover
    from replay_worker.replay.metrics import WorkerMetrics
    from replay_worker.settings import WorkerSettings
    from replay_worker.protocol.wire import StartInfo

    settings = WorkerSettings.from_env(
        {
            "REPRISE_BOOTSTRAP_SERVERS": "localhost:9092",
            "REPRISE_REPLAY_ID": "bench/instructions",
            "REPRISE_TOPICS": TOPIC,
            "REPRISE_REPLAY_GROUP": "bench-instructions",
            "REPRISE_FILTER": json.dumps(FILTER),
            "REPRISE_MODE": "Drain",
            "REPRISE_EXIT_WHEN_DONE": "true",
            "REPRISE_HANDLER": handler_spec,
            "REPRISE_BATCH_SIZE": str(BATCH),
        }
    )
    delivery = HandlerDelivery(
        load_handler(handler_spec), DeadLetters(settings.replay_id, None, None), settings.handler_retries
    )
    worker = ReplayConsumer(
        settings,
        {},
        delivery,
        compile_filter(FILTER),
        WorkerMetrics(settings.replay_id, settings.member_name),
        ReplayHandover(settings.replay_id),
    )
    worker.plan = {(TOPIC, p): StartInfo(settings.replay_id, TOPIC, p, 0) for p in range(PARTITIONS)}

    class Consumer:
        """Positions as librdkafka's after the batch in hand; commits answered at once."""

        positions: dict[int, int] = {}

        def position(self, partitions: list[Any]) -> list[Any]:
            return [
                TopicPartition(tp.topic, tp.partition, self.positions.get(tp.partition, OFFSET_INVALID))
                for tp in partitions
            ]

        def commit(self, offsets: list[Any], asynchronous: bool = True) -> None:
            if asynchronous:
                worker._on_commit(None, offsets)

        def incremental_assign(self, partitions: list[Any]) -> None:
            pass

        def assign(self, partitions: list[Any]) -> None:
            pass

        def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
            return [TopicPartition(tp.topic, tp.partition, 0) for tp in partitions]

        def pause(self, partitions: list[Any]) -> None:
            pass

    consumer: Any = Consumer()
    worker._on_assign(consumer, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])

    def step(_: Any, item: tuple[list[Any], dict[int, int]]) -> None:
        messages, consumer.positions = item
        if worker._turn(consumer, messages):  # the worker loop's own turn
            raise RuntimeError("the replay finished inside the counted batches")

    return step


def count(loop: str, handler: str, count_batches: int, run: int) -> float:
    """Run this module under callgrind for `loop`; instructions per counted record."""
    with tempfile.TemporaryDirectory(prefix="reprise-instructions-") as folder:
        out = Path(folder) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                sys.executable,
                "-m",
                "benchmarks.instructions",
                "--inside",
                loop,
                "--handler",
                handler,
                "--batches",
                str(count_batches),
                "--run",
                str(run),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=os.environ,
        )
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise RuntimeError(f"no instruction total in {out}")
        return int(found.group(1)) / (count_batches * BATCH)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--handler", default="noop", help="of benchmarks.handlers: noop or to_sqlite")
    parser.add_argument("--batches", type=int, default=8, help=f"counted batches of {BATCH:,} records")
    parser.add_argument("--run", type=int, default=500, help="records of one partition in a row")
    parser.add_argument("--inside", choices=["worker", "bare"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    spec = f"benchmarks.handlers:{args.handler}"
    if args.inside is None:
        if args.handler == "to_sqlite" and "BENCH_SQLITE_DB" not in os.environ:
            os.environ["BENCH_SQLITE_DB"] = str(Path(tempfile.mkdtemp(prefix="reprise-instructions-")) / "db.sqlite")
        figures = {loop: count(loop, args.handler, args.batches, args.run) for loop in ("bare", "worker")}
        print(
            f"instructions per record, {args.batches} batches of {BATCH:,} ({args.handler}, runs of {args.run}): "
            f"bare loop {figures['bare']:.0f}, worker {figures['worker']:.0f} "
            f"(+{figures['worker'] - figures['bare']:.0f}, ratio {figures['bare'] / figures['worker']:.3f})"
        )
        return 0
    made = batches(args.batches + WARM, args.run)
    step = worker_loop(spec) if args.inside == "worker" else bare_loop(spec)
    for item in made[:WARM]:
        step(None, item)
    reduce(step, made[WARM:], None)  # the only call of reduce: what callgrind counts
    return 0


if __name__ == "__main__":
    sys.exit(main())
