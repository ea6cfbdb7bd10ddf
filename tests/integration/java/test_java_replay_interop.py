"""Interoperability: the Java replay role replays a topic while the Python guard (`replay_worker.guard`) is the live
side, on the real broker, with producers writing throughout.

The replay consumers are JVM processes running `ReplayRole.runIfRequested` (`LedgerReplayMain`, a service's main
as the README shows it); the live service is the Python test service (`live_service.py`, guarded). Both log every
record they process, and `check_split` reads the ledgers back: nothing lost, and from the first offset the guard
skipped on every record processed by exactly one group (with a kill -9 of a Java replica: duplicates only within
the batches it had not committed).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from replay_worker.topic.handover_topic import HandoverTopic

from ..replay_worker.harness import (
    Processes,
    ProducerThread,
    committed,
    end_offsets,
    produce,
    settle_and_check,
    wait_for,
)
from .jvm_classpath import java_classpath

pytestmark = pytest.mark.integration

PARTITIONS = 4
LIVE_BATCH = 200
REPLAY_BATCH = 300
#: What a kill -9 of a Java replica may duplicate: the batch in hand and the one whose commit was on its way.
REPLAY_WINDOW = 2 * REPLAY_BATCH


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_classpath()


def java_worker(procs: Processes, name: str, classpath: str, env: dict[str, str], out_dir: Path):
    java = shutil.which("java")
    assert java, "java is not on PATH (run `make platform`)"
    # A small JVM: the machine runs a broker, live services and several of these at once.
    return procs.start(
        name,
        [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            classpath,
            "io.reprise.kafka.replay.LedgerReplayMain",
        ],
        {**env, "REPRISE_MEMBER_NAME": name, "REPRISE_TEST_LEDGER": str(out_dir / f"replay-{name}.log")},
    )


def replay_env(kafka, topic: str, handover_topic: str, live_group: str, config_dir: Path) -> dict[str, str]:
    config_dir.mkdir(exist_ok=True)
    # Kafka settings as files, the way a pod gets them: a short session so a killed replica's partitions move soon.
    (config_dir / "session.timeout.ms").write_text("6000\n")
    (config_dir / "heartbeat.interval.ms").write_text("500\n")
    return {
        "REPRISE_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "REPRISE_REPLAY_ID": f"test/{topic}/java",
        "REPRISE_TOPICS": topic,
        "REPRISE_REPLAY_GROUP": f"{topic}-replay",
        "REPRISE_MODE": "Handover",
        "REPRISE_LIVE_GROUP": live_group,
        "REPRISE_HANDOVER_TOPIC": handover_topic,
        "REPRISE_METRICS_PORT": "0",
        "REPRISE_CHECK_INTERVAL": "0.5",
        "REPRISE_BATCH_SIZE": str(REPLAY_BATCH),
        "REPRISE_MAX_RECORDS_PER_SECOND": "1500",
        "REPRISE_KAFKA_CONFIG_DIR": str(config_dir),
    }


@pytest.mark.parametrize("kill_replay", [False, True], ids=["calm", "kill-9-java-replica"])
def test_java_replay_role_against_the_python_guard_processes_every_record_once(
    kafka, topic_name, procs, out_dir, tmp_path, classpath, kill_replay
) -> None:
    bootstrap = kafka.bootstrap
    handover_topic = f"{topic_name}-handover"
    kafka.create_topic(topic_name, PARTITIONS)
    produce(bootstrap, topic_name, PARTITIONS, 12000)
    live_group = f"{topic_name}-live"
    lives = [
        procs.live("live1", bootstrap, live_group, topic_name, out_dir, handover_topic, LIVE_BATCH),
        procs.live("live2", bootstrap, live_group, topic_name, out_dir, handover_topic, LIVE_BATCH),
    ]
    wait_for(
        lambda: all(
            o >= end
            for (o, _), end in zip(
                committed(bootstrap, live_group, topic_name, PARTITIONS).values(),
                end_offsets(bootstrap, topic_name, PARTITIONS).values(),
            )
        ),
        120,
        "the live service caught up",
        processes_to_watch=lives,
    )
    live_from = {p: o for p, (o, _) in committed(bootstrap, live_group, topic_name, PARTITIONS).items()}
    # Writing until the handover is complete (stopped then), so the guard skips new records between the bootstrap
    # and the handover however slowly the JVMs start on a busy machine.
    producer = ProducerThread(bootstrap, topic_name, PARTITIONS, rate=400, total=400 * 600)
    producer.start()
    env = replay_env(kafka, topic_name, handover_topic, live_group, tmp_path / "kafka-config")
    replay_id = env["REPRISE_REPLAY_ID"]
    workers = [java_worker(procs, "j1", classpath, env, out_dir), java_worker(procs, "j2", classpath, env, out_dir)]
    allowance = 0

    def state():
        try:
            return HandoverTopic(bootstrap, handover_topic, timeout=10).read_replay(replay_id)
        except Exception:
            return None

    try:
        wait_for(
            lambda: (s := state()) is not None and s.bootstrapped,
            120,
            "the Java replay role bootstrapped",
            processes_to_watch=lives + workers,
        )
        wait_for(
            lambda: (s := state()) is not None and any(p.guard is not None for p in s.partitions.values()),
            180,
            "the Python guard skipping for the Java replay",
            processes_to_watch=lives + workers,
        )
        if kill_replay:
            procs.kill9(workers[0])
            allowance += REPLAY_WINDOW
            workers[0] = java_worker(procs, "j3", classpath, env, out_dir)
            time.sleep(1.0)
        wait_for(
            lambda: (s := state()) is not None and s.complete,
            400,
            "every partition handed over by the Java role and acknowledged by the Python guard",
            interval=1.0,
            processes_to_watch=lives + workers,
        )
    finally:
        producer.stop()
    assert producer.error is None
    report, handovers = settle_and_check(
        bootstrap, handover_topic, replay_id, topic_name, PARTITIONS, live_group, live_from, out_dir, lives, workers
    )
    # The Java role committed H with its finished mark before publishing it.
    marks = committed(bootstrap, f"{topic_name}-replay", topic_name, PARTITIONS)
    for p in range(PARTITIONS):
        offset, metadata = marks[p]
        assert offset == handovers[p] and metadata is not None and '"finished"' in metadata, (p, offset, metadata)
    assert report.lost == [], report.summary()
    assert report.replay_count > 0, "the Java role processed nothing: nothing was tested"
    assert any(f is not None for f in report.first_skipped.values()), "the guard never skipped: nothing was tested"
    duplicates = sum(report.duplicates.values()) - len(report.duplicates)
    if kill_replay:
        assert duplicates <= allowance, report.summary()
    else:
        assert duplicates == 0 and report.both == [], report.summary()
