"""The replay group under repeated faults: replicas killed, added and removed, and broker restarts, in a loop."""

from __future__ import annotations

import random
import signal

import pytest

from tests.integration.replay_worker.harness import committed, produce, read_log_lines, wait_for
from tests.integration.replay_worker.test_replay import _all_finished

from .conftest import runs

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("run", range(runs()))
def test_drain_under_random_faults(kafka, topic_name, procs, worker_env, out_dir, handover_topic, run: int) -> None:
    rng = random.Random(run)
    partitions, records, batch = 8, 40000, 250
    kafka.create_topic(topic_name, partitions)
    produce(kafka.bootstrap, topic_name, partitions, records)
    env = worker_env(REPRISE_BATCH_SIZE=str(batch), REPRISE_MAX_RECORDS_PER_SECOND="3000")
    workers = [procs.worker(f"r{i}", env) for i in range(2)]
    allowance = 0
    for _step in range(rng.randint(3, 6)):
        done = sum(read_log_lines(out_dir, "replay").values())
        wait_for(
            lambda: (
                sum(read_log_lines(out_dir, "replay").values()) > done + 2000
                or _all_finished(kafka.bootstrap, handover_topic, env["REPRISE_REPLAY_ID"])
            ),
            120,
            "progress",
        )
        fault = rng.choice(["kill", "add", "remove", "broker"])
        alive = [w for w in workers if w.alive()]
        if fault == "kill" and alive:
            procs.kill9(rng.choice(alive))
            allowance += 2 * batch
        elif fault == "remove" and len(alive) > 1:
            victim = rng.choice(alive)
            victim.popen.send_signal(signal.SIGTERM)
            victim.popen.wait(60)
        elif fault == "broker":
            kafka.restart()
            allowance += 2 * batch * len(alive)
        workers.append(procs.worker(f"r{len(workers)}", env))
    wait_for(
        lambda: _all_finished(kafka.bootstrap, handover_topic, env["REPRISE_REPLAY_ID"]),
        600,
        "every partition finished",
    )
    counts = read_log_lines(out_dir, "replay")
    expected = {(topic_name, p, o) for p in range(partitions) for o in range(records // partitions)}
    assert set(counts) == expected
    assert sum(counts.values()) - len(counts) <= allowance
    assert all(
        o == records // partitions
        for o, _ in committed(kafka.bootstrap, env["REPRISE_REPLAY_GROUP"], topic_name, partitions).values()
    )
