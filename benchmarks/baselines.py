"""The same work written by hand: the plain confluent-kafka loops Reprise's replay is measured against. Not a
benchmark; each loop runs as its own process so that `measure` can take its CPU time.

    python -m benchmarks.baselines read    --bootstrap B --topic T --records N --group G
    python -m benchmarks.baselines copy    ... --target T2            # filter, produce the matching records
    python -m benchmarks.baselines handler ... --handler benchmarks.handlers:noop
    python -m benchmarks.baselines guarded ... --handover-topic H      # `read` through GuardedConsumer
    python -m benchmarks.baselines serve   ... --handover-topic H      # a guarded live service, until SIGTERM

Every loop reads the topic from the start until it has seen `records` records, touching each value as a
service would, and prints one JSON line: records read, records matched, and the seconds from the first record
to the end. What a user would write: `consume()` in batches, automatic commits, and the filter and producer
settings the replay uses (the filter is Reprise's own compiled predicate, so the comparison measures the
machinery around it, not two filters; the producer is idempotent with the forward's linger, batch size and
compression, `ForwardDelivery.TUNING`).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer, Producer

from replay_worker.connection import kafka_clients
from replay_worker.connection.kafka_clients import FETCH_TUNING
from replay_worker.replay.delivery import ForwardDelivery, load_handler
from replay_worker.protocol.filters import compile_filter

#: The filter of every benchmark: half of the records match.
FILTER = {"json": [{"path": "kind", "equals": "even"}]}
#: The worker's fetch settings, so the loops and the worker compare code, not fetch tuning (librdkafka's
#: default `fetch.queue.backoff.ms` of 1 s alone made a bare loop slower than the worker). From `kafka_clients`,
#: not `consumer`: importing the worker's loop (metrics, settings, ...) cost a bare loop 70 ms of CPU that a
#: hand-written loop does not spend, which flattered every ratio by 3-4%.
FETCH = {
    key: FETCH_TUNING[key]
    for key in ("fetch.max.bytes", "queued.max.messages.kbytes", "fetch.queue.backoff.ms", "fetch.wait.max.ms")
}


def _consumer(args: argparse.Namespace) -> Any:
    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        **FETCH,
    }
    if args.loop in ("guarded", "serve"):
        from replay_worker.guard import GuardedConsumer

        return GuardedConsumer(config, handover_topic=args.handover_topic, member=f"bench-{args.group}")
    return Consumer(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.baselines", description=__doc__.split("\n\n")[0])
    parser.add_argument("loop", choices=["read", "copy", "handler", "guarded", "serve"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, default=0, help="records in the topic (the loop stops there)")
    parser.add_argument("--group", required=True)
    parser.add_argument("--target", help="copy: the topic the matching records go to")
    parser.add_argument("--handler", help="handler: package.module:function, called with each batch's matches")
    parser.add_argument("--handover-topic", default="bench.handover", help="guarded: the handover topic")
    parser.add_argument("--batch", type=int, default=5000, help="records per consume() (the worker's batch size)")
    args = parser.parse_args(argv)
    if args.loop == "serve":
        return serve(args)

    predicate = compile_filter(FILTER).value_predicate()
    assert predicate is not None
    producer = None
    if args.loop == "copy":
        producer = Producer(
            kafka_clients.producer_config(
                {**ForwardDelivery.TUNING, "bootstrap.servers": args.bootstrap}, partitioner="murmur2_random"
            )
        )
    handler = load_handler(args.handler) if args.loop == "handler" else None
    consumer = _consumer(args)
    consumer.subscribe([args.topic])
    seen = matched = size = 0
    began = None
    # Through the guard, records a replay covers are skipped, not returned: they count as read too.
    skipped = (lambda: consumer.stats.skipped) if args.loop == "guarded" else (lambda: 0)
    try:
        while seen + skipped() < args.records:
            messages = consumer.consume(args.batch, 1.0)
            if not messages:
                continue
            if began is None:
                began = time.monotonic()
            messages = [m for m in messages if m.error() is None]
            seen += len(messages)
            if producer is not None:
                produce = producer.produce
                for message in messages:
                    if not predicate(message.value()):
                        continue
                    while True:
                        try:
                            produce(
                                args.target,
                                message.value(),
                                message.key(),
                                message.partition(),
                                timestamp=message.timestamp()[1],
                                headers=message.headers(),
                            )
                            break
                        except BufferError:
                            producer.poll(0.05)
                    matched += 1
                producer.poll(0)
            elif handler is not None:
                matching = [message for message in messages if predicate(message.value())]
                matched += len(matching)
                handler(matching)
            else:
                for message in messages:
                    size += len(message.value())  # touch every record, as a service would
        if producer is not None:
            left = producer.flush(300)
            if left:
                raise RuntimeError(f"{left} records not delivered")
        assert began is not None
        reading = time.monotonic() - began
    finally:
        consumer.close()
    print(
        json.dumps(
            {"records": seen + skipped(), "matched": matched, "skipped": skipped(), "reading_s": round(reading, 3)}
        ),
        flush=True,
    )
    return 0


def serve(args: argparse.Namespace) -> int:
    """The live service of the end-to-end benchmark: a guarded loop with automatic commits, until SIGTERM."""
    from replay_worker import logging as worker_logging

    worker_logging.setup()  # the guard's lines (handover acknowledged) are the benchmark's marks
    running = {"yes": True}
    signal.signal(signal.SIGTERM, lambda *_: running.update(yes=False))
    consumer = _consumer(args)
    consumer.subscribe([args.topic])
    size = 0
    try:
        while running["yes"]:
            for message in consumer.consume(args.batch, 0.5):
                if message.error() is None:
                    size += len(message.value())
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
