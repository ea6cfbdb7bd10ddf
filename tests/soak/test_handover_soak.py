"""The handover protocol, many times over: the pure model over many seeds, and real runs with random faults.

Each real run is the integration test's Handover scenario (a guarded live service with two replicas, two
replay workers, a producer writing) with a random sequence of faults while the guard skips: kill -9 of a live
or replay replica, a replica added, a broker restart. Every run must lose nothing and duplicate no more than
the batches the faults may cost.
"""

from __future__ import annotations

import random
import uuid

import pytest

from tests.integration.replay_worker.test_handover_split import run_handover
from tests.unit.replay_worker.test_handover_model import run as run_model

from .conftest import runs, seeds

pytestmark = pytest.mark.integration

FAULTS = ["kill-live", "kill-replay", "add-replay", "add-live", "restart-broker"]


@pytest.mark.parametrize("auto_store", [True, False], ids=["auto-store", "service-stores"])
def test_model_over_many_seeds(auto_store: bool) -> None:
    failures = []
    for seed in range(seeds()):
        crashes = seed % 2 == 1
        world = run_model(100_000 + seed, crashes=crashes, auto_store=auto_store, steps=600)
        lost, duplicates = world.check()
        if lost or duplicates > (world.duplicate_allowance if crashes else 0):
            failures.append((seed, lost[:5], duplicates, world.duplicate_allowance))
    assert failures == []


@pytest.mark.parametrize("run", range(runs()))
def test_handover_with_random_faults(kafka, tmp_path, procs, worker_env, run: int) -> None:
    rng = random.Random(run)
    faults = rng.sample(FAULTS, k=rng.randint(1, 3))
    topic = f"soak-handover-{run}-{uuid.uuid4().hex[:6]}"

    def env(**o):
        return worker_env(
            **{
                "REPRISE_TOPICS": topic,
                "REPRISE_REPLAY_ID": f"soak/{topic}",
                "REPRISE_REPLAY_GROUP": f"{topic}-replay",
                "REPRISE_HANDOVER_TOPIC": f"{topic}-handover",
                **o,
            }
        )

    out = tmp_path / "out"
    report, allowance = run_handover(kafka, topic, f"{topic}-handover", procs, out, env, faults=faults, seed=run)
    print(faults, report.summary())
    assert report.lost == [], (faults, report.summary())
    duplicates = sum(report.duplicates.values()) - len(report.duplicates)
    assert duplicates <= allowance, (faults, report.summary())
