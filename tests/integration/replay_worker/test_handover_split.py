"""Handover and Parallel modes against the real broker, with a guarded test live service and producers writing.

The live service (`live_service.py`) and the replay workers are separate processes that log every record they
process; `check_split` then checks, per partition, that nothing was lost and that from the first offset the
guard skipped on, every record was processed by exactly one group (with kills: duplicates no more than the
batches the killed processes had not committed). The long version of this loop is in tests/soak.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from replay_worker.topic.handover_topic import HandoverTopic

from .harness import Processes, ProducerThread, check_split, committed, end_offsets, produce, read_log_lines, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 4
LIVE_BATCH = 200
REPLAY_BATCH = 300
#: What a crash of a replay worker may duplicate: the batch in hand and the one whose commit was on its way.
REPLAY_WINDOW = 2 * REPLAY_BATCH


def _state(bootstrap: str, handover_topic: str, replay_id: str):
    try:
        return HandoverTopic(bootstrap, handover_topic, timeout=10).read_replay(replay_id)
    except Exception:
        return None


def run_handover(
    kafka,
    topic: str,
    handover_topic: str,
    procs: Processes,
    out_dir: Path,
    worker_env,
    *,
    faults: list[str],
    seed: int = 0,
    history: int = 16000,
    live_records: int = 10000,
    rate: float = 600,
):
    """One Handover run with `faults` injected one after another while the guard skips: `kill-live`,
    `kill-replay` (kill -9 and a replacement), `add-replay`, `add-live`, `restart-broker`.
    Returns (report, allowance): the duplicates the faults may cause (the batches the killed processes had
    handled but not committed; a broker restart may cost every running process one batch)."""
    rng = random.Random(seed)
    bootstrap = kafka.bootstrap
    kafka.create_topic(topic, PARTITIONS)
    # Made before the live service starts, as the operator makes it when it plans a replay. A guard that starts
    # without one looks for it every 5 s, and a replay this short can finish before that look: the guard would
    # never skip, and the faults below are injected while it skips (CI once timed out waiting for it).
    made = HandoverTopic(bootstrap, handover_topic, timeout=30)
    try:
        made.ensure(create=True)
    finally:
        made.close()
    produce(bootstrap, topic, PARTITIONS, history)
    live_group = f"{topic}-live"
    lives = [
        procs.live("live1", bootstrap, live_group, topic, out_dir, handover_topic, LIVE_BATCH),
        procs.live("live2", bootstrap, live_group, topic, out_dir, handover_topic, LIVE_BATCH),
    ]
    wait_for(
        lambda: all(
            o >= end
            for (o, _), end in zip(
                committed(bootstrap, live_group, topic, PARTITIONS).values(),
                end_offsets(bootstrap, topic, PARTITIONS).values(),
            )
        ),
        120,
        "the live service caught up",
        processes_to_watch=lives,
    )
    live_from = {p: o for p, (o, _) in committed(bootstrap, live_group, topic, PARTITIONS).items()}
    producer = ProducerThread(bootstrap, topic, PARTITIONS, rate=rate, total=live_records, seed=seed)
    producer.start()
    env = worker_env(
        REPRISE_MODE="Handover",
        REPRISE_LIVE_GROUP=live_group,
        REPRISE_BATCH_SIZE=str(REPLAY_BATCH),
        REPRISE_MAX_RECORDS_PER_SECOND="2500",
    )
    replay_id = env["REPRISE_REPLAY_ID"]
    workers = [procs.worker("w1", env), procs.worker("w2", env)]
    allowance = 0
    try:
        if faults:

            def skipping() -> bool:
                state = _state(bootstrap, handover_topic, replay_id)
                return state is not None and any(p.guard is not None for p in state.partitions.values())

            wait_for(skipping, 120, "the guard skipping", processes_to_watch=lives + workers)
        for number, fault in enumerate(faults):
            if fault == "kill-live":
                victim = rng.randrange(len(lives))
                procs.kill9(lives[victim])
                allowance += LIVE_BATCH
                lives[victim] = procs.live(
                    f"live-{number}", bootstrap, live_group, topic, out_dir, handover_topic, LIVE_BATCH
                )
            elif fault == "kill-replay":
                victim = rng.randrange(len(workers))
                procs.kill9(workers[victim])
                allowance += REPLAY_WINDOW
                workers[victim] = procs.worker(f"w-{number}", env)
            elif fault == "add-replay":
                workers.append(procs.worker(f"w-{number}", env))
            elif fault == "add-live":
                lives.append(
                    procs.live(f"live-{number}", bootstrap, live_group, topic, out_dir, handover_topic, LIVE_BATCH)
                )
            elif fault == "restart-broker":
                kafka.restart()
                allowance += LIVE_BATCH * len(lives) + REPLAY_WINDOW * len(workers)
            else:
                raise ValueError(f"unknown fault {fault}")
            time.sleep(rng.uniform(0.5, 3.0))

        def complete() -> bool:
            state = _state(bootstrap, handover_topic, replay_id)
            if os.environ.get("REPRISE_TEST_DEBUG") and state is not None:
                print(
                    {k[1]: (p.state, p.handover_offset) for k, p in sorted(state.partitions.items())},
                    committed(bootstrap, live_group, topic, PARTITIONS),
                    flush=True,
                )
            return state is not None and state.complete

        wait_for(
            complete,
            400,
            "every partition handed over and acknowledged",
            interval=1.0,
            processes_to_watch=lives + workers,
        )
    finally:
        producer.stop()
    assert producer.error is None
    ends = end_offsets(bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: all(committed(bootstrap, live_group, topic, PARTITIONS)[p][0] >= ends[p] for p in range(PARTITIONS)),
        120,
        "the live service at the end",
        processes_to_watch=lives,
    )
    for process in lives + workers:
        process.stop()
    state = HandoverTopic(bootstrap, handover_topic).read_replay(replay_id)
    starts = {p: state.partitions[(topic, p)].start_offset for p in range(PARTITIONS)}
    handovers = {p: state.partitions[(topic, p)].handover_offset for p in range(PARTITIONS)}
    report = check_split(
        topic,
        PARTITIONS,
        starts,
        live_from,
        handovers,
        ends,
        read_log_lines(out_dir, "live"),
        read_log_lines(out_dir, "replay"),
    )
    return report, allowance


@pytest.mark.parametrize("faults", [[], ["kill-live", "kill-replay"]], ids=["calm", "kill-9-live-and-replay"])
def test_handover_every_record_from_the_first_skip_is_processed_by_exactly_one_group(
    kafka, topic_name, handover_topic, procs, out_dir, worker_env, faults
) -> None:
    report, allowance = run_handover(kafka, topic_name, handover_topic, procs, out_dir, worker_env, faults=faults)
    print(report.summary())
    assert report.lost == []
    assert any(f is not None for f in report.first_skipped.values()), "the guard never skipped: nothing was tested"
    duplicates = sum(report.duplicates.values()) - len(report.duplicates)
    if faults:
        assert duplicates <= allowance, report.summary()
    else:
        assert duplicates == 0 and report.both == [], report.summary()


def test_parallel_replay_stops_at_the_live_groups_offsets(
    kafka, topic_name, handover_topic, procs, out_dir, worker_env
) -> None:
    bootstrap = kafka.bootstrap
    kafka.create_topic(topic_name, PARTITIONS)
    produce(bootstrap, topic_name, PARTITIONS, 8000)
    live_group = f"{topic_name}-live"
    live = procs.live("live", bootstrap, live_group, topic_name, out_dir, handover_topic, LIVE_BATCH)
    producer = ProducerThread(bootstrap, topic_name, PARTITIONS, rate=400, total=6000)
    producer.start()
    env = worker_env(REPRISE_MODE="Parallel", REPRISE_LIVE_GROUP=live_group, REPRISE_MAX_RECORDS_PER_SECOND="3000")
    worker = procs.worker("w", env)
    try:
        wait_for(
            lambda: (_state(bootstrap, handover_topic, env["REPRISE_REPLAY_ID"]) or _Empty()).all_handed_over,
            300,
            "every partition finished",
            interval=1.0,
            processes_to_watch=[live, worker],
        )
    finally:
        producer.stop()
    state = HandoverTopic(bootstrap, handover_topic).read_replay(env["REPRISE_REPLAY_ID"])
    replayed = read_log_lines(out_dir, "replay")
    for p in range(PARTITIONS):
        part = state.partitions[(topic_name, p)]
        assert part.handover.reason in ("live-offset", "end-of-partition")
        assert {o for (_, pp, o) in replayed if pp == p} == set(range(part.start_offset, part.handover_offset))
    # The live group ran unchanged: it processed every record itself.
    ends = end_offsets(bootstrap, topic_name, PARTITIONS)
    wait_for(
        lambda: sum(read_log_lines(out_dir, "live").values()) >= sum(ends.values()),
        120,
        "the live service at the end",
        processes_to_watch=[live],
    )
    assert set(read_log_lines(out_dir, "live")) == {
        (topic_name, p, o) for p in range(PARTITIONS) for o in range(ends[p])
    }


class _Empty:
    all_handed_over = False


def test_a_cancelled_handover_is_forced_acknowledged_and_removed(
    kafka, topic_name, handover_topic, procs, out_dir, worker_env
) -> None:
    """The operator's abort path: stop the replay, publish H = its committed offsets, wait for the acks, tombstone."""
    bootstrap = kafka.bootstrap
    kafka.create_topic(topic_name, PARTITIONS)
    produce(bootstrap, topic_name, PARTITIONS, 12000)
    live_group = f"{topic_name}-live"
    live = procs.live("live", bootstrap, live_group, topic_name, out_dir, handover_topic, LIVE_BATCH)
    wait_for(
        lambda: sum(o for o, _ in committed(bootstrap, live_group, topic_name, PARTITIONS).values()) >= 12000,
        120,
        "the live service caught up",
        processes_to_watch=[live],
    )
    live_from = {p: o for p, (o, _) in committed(bootstrap, live_group, topic_name, PARTITIONS).items()}
    producer = ProducerThread(bootstrap, topic_name, PARTITIONS, rate=300, total=3000)
    producer.start()
    env = worker_env(REPRISE_MODE="Handover", REPRISE_LIVE_GROUP=live_group, REPRISE_MAX_RECORDS_PER_SECOND="1000")
    replay_id = env["REPRISE_REPLAY_ID"]
    worker = procs.worker("w", env)
    topic = HandoverTopic(bootstrap, handover_topic)

    def skipping() -> bool:
        state = _state(bootstrap, handover_topic, replay_id)
        return state is not None and sum(p.guard is not None for p in state.partitions.values()) == PARTITIONS

    try:
        wait_for(skipping, 120, "the guard skipping every partition", processes_to_watch=[live, worker])
        worker.popen.send_signal(signal.SIGTERM)  # scale the replay to zero: its committed offsets are final
        assert worker.popen.wait(60) == 0
        replay_offsets = {
            (topic_name, p): o
            for p, (o, _) in committed(bootstrap, env["REPRISE_REPLAY_GROUP"], topic_name, PARTITIONS).items()
        }
        forced = topic.force_handover(replay_id, replay_offsets, by="operator", reason="cancelled")
        assert forced  # at least the partitions the replay had not finished
        wait_for(
            lambda: topic.read_replay(replay_id).complete, 120, "the live side acknowledged", processes_to_watch=[live]
        )
    finally:
        producer.stop()
    assert topic.tombstone(replay_id) > 0
    assert topic.read_replay(replay_id).live_keys == set()
    produce(bootstrap, topic_name, PARTITIONS, 400)  # the live service goes on as before
    ends = end_offsets(bootstrap, topic_name, PARTITIONS)
    wait_for(
        lambda: all(
            committed(bootstrap, live_group, topic_name, PARTITIONS)[p][0] >= ends[p] for p in range(PARTITIONS)
        ),
        120,
        "the live service at the end",
        processes_to_watch=[live],
    )
    live.stop()
    state_starts = {p: 0 for p in range(PARTITIONS)}
    handovers = {p: replay_offsets[(topic_name, p)] for p in range(PARTITIONS)}
    report = check_split(
        topic_name,
        PARTITIONS,
        state_starts,
        live_from,
        handovers,
        ends,
        read_log_lines(out_dir, "live"),
        read_log_lines(out_dir, "replay"),
    )
    assert report.lost == [], report.summary()
    assert sum(report.duplicates.values()) - len(report.duplicates) == 0, report.summary()
