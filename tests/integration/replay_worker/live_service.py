"""A live service for the tests: a guarded consumer that records what it processes.

    python -m tests.integration.replay_worker.live_service BOOTSTRAP GROUP TOPIC OUT_DIR [HANDOVER_TOPIC]

Appends `L <topic> <partition> <offset>` per processed record to `OUT_DIR/live-<pid>.log` (one write per
batch), then commits synchronously, and again when partitions are revoked: at-least-once, with the batch as
the duplicate window of a crash. SIGTERM stops it after the batch. `LIVE_PAUSE_S` (default 0) sleeps after
each batch: a live service slow enough that a rewind's lag is there to be seen for a while.
`LIVE_SASL_USERNAME` and `LIVE_SASL_PASSWORD` connect as that principal over SASL/PLAIN (a team's).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

from replay_worker.guard import GuardedConsumer


def main() -> int:
    bootstrap, group, topic, out_dir = sys.argv[1:5]
    handover_topic = sys.argv[5] if len(sys.argv) > 5 else None  # else $REPRISE_HANDOVER_TOPIC, as a service does
    batch = int(os.environ.get("LIVE_BATCH", "200"))
    pause = float(os.environ.get("LIVE_PAUSE_S", "0"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s %(__dict__)s"
        if os.environ.get("LIVE_DEBUG")
        else "%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("replay_worker.librdkafka").setLevel(logging.WARNING)
    running = {"yes": True}
    signal.signal(signal.SIGTERM, lambda *_: running.update(yes=False))
    # A team's principal on the multi-tenant broker's SASL listener (tests.fixtures.tenants), from its Secret.
    sasl = (
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": os.environ["LIVE_SASL_USERNAME"],
            "sasl.password": os.environ["LIVE_SASL_PASSWORD"],
        }
        if os.environ.get("LIVE_SASL_USERNAME")
        else {}
    )
    consumer = GuardedConsumer(
        {
            **sasl,
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        },
        handover_topic=handover_topic,
        member=f"live-{os.getpid()}",
    )
    fd = os.open(os.path.join(out_dir, f"live-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def commit_on_revoke(guarded, partitions) -> None:
        # Everything consume() handed out is processed before the next consume(): commit it while it is ours,
        # so a rebalance repeats nothing (only a crash does).
        try:
            guarded.commit(asynchronous=False)
        except Exception as exc:  # nothing new to commit, or the group moved on
            print(f"commit on revoke: {exc}", file=sys.stderr, flush=True)

    consumer.subscribe([topic], on_revoke=commit_on_revoke)
    try:
        while running["yes"]:
            messages = [m for m in consumer.consume(batch, 0.2) if m.error() is None]
            if not messages:
                continue
            os.write(fd, "".join(f"L {m.topic()} {m.partition()} {m.offset()}\n" for m in messages).encode())
            try:
                consumer.commit(asynchronous=False)
            except Exception as exc:  # a commit refused during a rebalance: the batch is the duplicate window
                print(f"commit failed: {exc}", file=sys.stderr, flush=True)
            if pause:
                time.sleep(pause)
    finally:
        consumer.close()
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
