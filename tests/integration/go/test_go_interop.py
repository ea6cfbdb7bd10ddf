"""Interoperability: the Go guard (examples/seed003-go, live) with the Python replay role, on the real broker.

Two replicas of the Go service consume the topic with `guard.NewConsumer`; producers keep writing; a Handover
replay runs in two `python -m replay_worker` processes. The ledgers (the Go service's and the worker's sink)
are read back and checked the way the Python-only test checks them (`harness.check_split`): nothing lost, and
from the first skipped offset on every record processed by exactly one group; with a live replica killed
(`kill -9`) and a new one joining (a rebalance), repeats only among records the killed process had processed
but not committed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from replay_worker.topic.handover_topic import HandoverTopic
from tests.integration.replay_worker.harness import (
    Processes,
    ProducerThread,
    committed,
    end_offsets,
    produce,
    read_log_lines,
    settle_and_check,
    wait_for,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 4
#: The Go service's librdkafka auto-commit interval: what a kill -9 may leave uncommitted.
AUTO_COMMIT_MS = 500


@pytest.fixture(scope="module")
def go_service(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        pytest.fail("the Go toolchain is not installed: the interoperability tests build examples/seed003-go")
    binary = tmp_path_factory.mktemp("go") / "seed003"
    subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=ROOT / "examples" / "seed003-go",
        check=True,
        timeout=1200,
        env={**os.environ, "GOFLAGS": "-buildvcs=false"},
    )
    return binary


def _live(
    procs: Processes,
    binary: Path,
    name: str,
    bootstrap: str,
    group: str,
    topic: str,
    out_dir: Path,
    handover_topic: str,
):
    return procs.start(
        name,
        [str(binary)],
        {
            "BOOTSTRAP_SERVERS": bootstrap,
            "TOPIC": topic,
            "GROUP_ID": group,
            "HANDOVER_TOPIC": handover_topic,
            "LEDGER_FILE": str(out_dir / f"live-{name}.log"),
            "AUTO_COMMIT_INTERVAL_MS": str(AUTO_COMMIT_MS),
            "HOSTNAME": name,
        },
    )


@pytest.mark.parametrize("faults", [[], ["kill-live", "add-live"]], ids=["calm", "kill-9-live-and-rebalance"])
def test_go_guard_with_the_python_replay_role(
    kafka, topic_name, handover_topic, procs, out_dir, worker_env, go_service, faults
) -> None:
    bootstrap = kafka.bootstrap
    kafka.create_topic(topic_name, PARTITIONS)
    produce(bootstrap, topic_name, PARTITIONS, 6000)
    # As the operator does when it plans a replay: the handover topic exists before the replay starts, so the
    # guards follow it from their start (a topic created later is found only at the guard's next look, by when
    # a short replay may already have handed everything over and nothing would be skipped).
    HandoverTopic(bootstrap, handover_topic, timeout=30).ensure()
    live_group = f"{topic_name}-live"
    lives = [
        _live(procs, go_service, f"go{i}", bootstrap, live_group, topic_name, out_dir, handover_topic) for i in (1, 2)
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
        "the Go service caught up",
        processes_to_watch=lives,
    )
    live_from = {p: o for p, (o, _) in committed(bootstrap, live_group, topic_name, PARTITIONS).items()}
    producer = ProducerThread(bootstrap, topic_name, PARTITIONS, rate=500, total=200_000)  # until stopped
    producer.start()
    env = worker_env(
        REPRISE_MODE="Handover",
        REPRISE_LIVE_GROUP=live_group,
        REPRISE_BATCH_SIZE="300",
        REPRISE_MAX_RECORDS_PER_SECOND="2500",
    )
    replay_id = env["REPRISE_REPLAY_ID"]
    workers = [procs.worker("w1", env), procs.worker("w2", env)]
    killed: list[str] = []
    try:

        def state():
            try:
                return HandoverTopic(bootstrap, handover_topic, timeout=10).read_replay(replay_id)
            except Exception:
                return None

        if faults:
            # On a busy machine the replay can hand every partition over before the Go guard has published a
            # skip; the faults then land after the handover, which the ledger check covers as well.
            wait_for(
                lambda: (
                    (s := state()) is not None
                    and (s.all_handed_over or any(p.guard is not None for p in s.partitions.values()))
                ),
                240,
                "the Go guard skipping",
                processes_to_watch=lives + workers,
            )
        for number, fault in enumerate(faults):
            if fault == "kill-live":
                procs.kill9(lives[0])
                killed.append("go1")
                lives[0] = _live(
                    procs, go_service, f"go-new{number}", bootstrap, live_group, topic_name, out_dir, handover_topic
                )
            elif fault == "add-live":
                lives.append(
                    _live(
                        procs, go_service, f"go-add{number}", bootstrap, live_group, topic_name, out_dir, handover_topic
                    )
                )
            time.sleep(2.0)
        wait_for(
            lambda: (s := state()) is not None and s.complete,
            400,
            "every partition handed over and acknowledged by the Go guard",
            interval=1.0,
            processes_to_watch=lives + workers,
        )
    finally:
        producer.stop()
    assert producer.error is None
    report, _ = settle_and_check(
        bootstrap, handover_topic, replay_id, topic_name, PARTITIONS, live_group, live_from, out_dir, lives, workers
    )
    assert report.lost == [], report.summary()
    assert any(f is not None for f in report.first_skipped.values()), "the Go guard never skipped: nothing was tested"
    if not killed:
        assert not report.duplicates and report.both == [], report.summary()
        return
    # Repeats only among records a killed process had processed (its uncommitted tail).
    by_killed = read_log_lines(out_dir, "live-go1")
    strays = [key for key in report.duplicates if by_killed[key] == 0]
    assert strays == [], f"records repeated that no killed process had processed: {strays[:10]}; {report.summary()}"
