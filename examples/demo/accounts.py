"""The demo's accounts service: a live consumer of `users` that embeds Reprise's handover guard, and the
handler its replay consumers call. It stands for the service a team already runs.

    python -m examples.demo.accounts BOOTSTRAP GROUP TOPIC      # the live service (the guard wraps its consumer)
    REPRISE_HANDLER=examples.demo.accounts:handle                # what the replay consumers call, in batches

Both "store the user's locale" (here: count it and log now and then), so the demo shows one code path run
by two groups, each record from the handover boundary on by exactly one of them.
"""

from __future__ import annotations

import json
import logging
import signal
import sys

from replay_worker.guard import GuardedConsumer

log = logging.getLogger("accounts")
_seen = {"records": 0}


def apply(message) -> None:
    """The service's own logic: read the user event and keep its locale."""
    body = json.loads(message.value())
    _ = body.get("locale")
    _seen["records"] += 1
    if _seen["records"] % 20_000 == 0:
        log.info("processed %d user events", _seen["records"])


def handle(messages) -> None:
    """The replay consumers' entry point (REPRISE_HANDLER): the same logic, in batches."""
    for message in messages:
        apply(message)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s accounts %(message)s")
    bootstrap, group, topic = sys.argv[1:4]
    running = {"yes": True}
    signal.signal(signal.SIGTERM, lambda *_: running.update(yes=False))
    consumer = GuardedConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        while running["yes"]:
            messages = [m for m in consumer.consume(500, 0.5) if m.error() is None]
            for message in messages:
                apply(message)
            if messages:
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
