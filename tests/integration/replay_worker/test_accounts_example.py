"""The example accounts service (examples/accounts_service) in a Handover replay: its SQLite ledger shows each
user event from the first skipped one on applied exactly once, by the live group or by the replay."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time

import pytest
from confluent_kafka import Producer

from replay_worker.topic.handover_topic import HandoverTopic

from .harness import committed, end_offsets, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 3
TYPES = [b"UserCreated", b"UserUpdated", b"UserLoggedIn"]


def write_events(bootstrap: str, topic: str, start: int, count: int, rate: float | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    began = time.monotonic()
    for n in range(start, start + count):
        if rate:
            while n - start > (time.monotonic() - began) * rate:
                time.sleep(0.005)
        event = {"user": f"u-{n % 500}", "locale": ["de-CH", "fr-FR", "en-GB"][n % 3], "n": n}
        producer.produce(
            topic, value=json.dumps(event).encode(), key=f"u-{n % 500}".encode(), headers=[("event-type", TYPES[n % 3])]
        )
        producer.poll(0)
    producer.flush(60)


def test_accounts_service_handover_applies_each_event_once(
    kafka, topic_name, procs, worker_env, handover_topic, tmp_path
) -> None:
    bootstrap = kafka.bootstrap
    kafka.create_topic(topic_name, PARTITIONS)
    write_events(bootstrap, topic_name, 0, 6000)
    db = tmp_path / "accounts.sqlite"
    group = f"{topic_name}-accounts"
    live_argv = [
        sys.executable,
        "-m",
        "examples.accounts_service",
        "--bootstrap-servers",
        bootstrap,
        "--group",
        group,
        "--topic",
        topic_name,
        "--db",
        str(db),
        "--handover-topic",
        handover_topic,
        "--batch",
        "200",
    ]
    live = procs.start("accounts", live_argv)
    wait_for(
        lambda: sum(o for o, _ in committed(bootstrap, group, topic_name, PARTITIONS).values()) >= 6000,
        120,
        "the accounts service caught up",
        processes_to_watch=[live],
    )
    live_from = {p: o for p, (o, _) in committed(bootstrap, group, topic_name, PARTITIONS).items()}
    writer = threading.Thread(target=write_events, args=(bootstrap, topic_name, 6000, 4000, 400), daemon=True)
    writer.start()
    env = worker_env(
        REPRISE_MODE="Handover",
        REPRISE_LIVE_GROUP=group,
        REPRISE_MAX_RECORDS_PER_SECOND="1500",
        REPRISE_HANDLER="examples.accounts_service.handlers:apply_batch",
        REPRISE_FILTER=json.dumps({"headers": {"event-type": ["UserCreated", "UserUpdated"]}}),
        ACCOUNTS_DB=str(db),
        ACCOUNTS_APPLIED_BY="replay",
    )
    worker = procs.worker("accounts-replay", env)
    topic = HandoverTopic(bootstrap, handover_topic)
    wait_for(
        lambda: topic.read_replay(env["REPRISE_REPLAY_ID"]).complete,
        300,
        "the handover complete",
        interval=1.0,
        processes_to_watch=[live, worker],
    )
    writer.join(120)
    ends = end_offsets(bootstrap, topic_name, PARTITIONS)
    wait_for(
        lambda: all(committed(bootstrap, group, topic_name, PARTITIONS)[p][0] >= ends[p] for p in range(PARTITIONS)),
        120,
        "the accounts service at the end",
        processes_to_watch=[live],
    )
    live.stop()
    worker.stop()
    rows = sqlite3.connect(db).execute("SELECT partition, offset, applied_by, applied FROM ledger").fetchall()
    by_live = {(p, o): n for p, o, who, n in rows if who == group}
    by_replay = {(p, o): n for p, o, who, n in rows if who == "replay"}
    assert by_replay, "the replay applied nothing"
    # Which records match the replay's filter: the event type cycles with the record number, which is in the value.
    state = topic.read_replay(env["REPRISE_REPLAY_ID"])
    skipped_somewhere = False
    for p in range(PARTITIONS):
        start = state.partitions[(topic_name, p)].start_offset
        # F: the first offset at or after the live group's start that the live group did not apply.
        first = next((o for o in range(live_from[p], ends[p]) if (p, o) not in by_live), None)
        for o in range(min(start, live_from[p]), ends[p]):
            total = by_live.get((p, o), 0) + by_replay.get((p, o), 0)
            assert total >= 1, f"{topic_name}[{p}]@{o} applied by nobody"
            if first is not None and o >= first:
                skipped_somewhere = True
                assert total == 1, (
                    f"{topic_name}[{p}]@{o} applied {total} times (live {by_live.get((p, o))}, replay {by_replay.get((p, o))})"
                )
    assert skipped_somewhere, "the guard never skipped: nothing was tested"
