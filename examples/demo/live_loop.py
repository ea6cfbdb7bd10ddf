"""The consumer loop of the demos' live services: consume a batch, apply it, commit; stop on SIGTERM.

The order is the point: apply first, then commit (at-least-once), and commit and close on the way out, so a
service scaled down by a Rewind or a handover leaves its group with exactly what it applied. A commit the group
refuses while it rebalances (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS) is logged and the loop carries on, as
real services do: the partition's new owner reads the batch again from the last commit.
"""

from __future__ import annotations

import logging
import signal
from typing import Any, Callable

from confluent_kafka import KafkaException

log = logging.getLogger("examples.demo.live_loop")


def run_until_stopped(consumer: Any, topics: list[str], apply: Callable[[list], None], batch: int = 500) -> None:
    """Subscribe `consumer` (a confluent-kafka Consumer or the handover guard's) and loop until SIGTERM."""
    running = {"yes": True}
    signal.signal(signal.SIGTERM, lambda *_: running.update(yes=False))
    consumer.subscribe(topics)
    try:
        while running["yes"]:
            messages = [m for m in consumer.consume(batch, 0.5) if m.error() is None]
            if messages:
                apply(messages)  # apply first ...
                try:
                    consumer.commit(asynchronous=False)  # ... then commit
                except KafkaException as exc:
                    log.warning("commit failed, the partition's next owner reads these records again: %s", exc)
    finally:
        consumer.close()
