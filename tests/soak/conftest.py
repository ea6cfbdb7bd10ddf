"""Soak tests: long fault loops, run by hand with `make soak` (or `pytest tests/soak`), never by `make test`.

`REPRISE_SOAK_RUNS` sets the number of broker runs of each loop (default 10), `REPRISE_SOAK_SEEDS` the number
of model seeds (default 20000). The fixtures of the replay worker's integration tests are reused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.replay_worker.conftest import handover_topic, out_dir, procs, worker_env

#: The replay worker's fixtures, reused by the soak loops.
__all__ = ["handover_topic", "out_dir", "procs", "worker_env"]

SOAK_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = os.environ.get("REPRISE_SOAK") or any("soak" in str(arg) for arg in config.args)
    if asked:
        return
    skip = pytest.mark.skip(reason="a soak test: run it with `make soak`")
    for item in items:
        if SOAK_DIR in Path(str(item.fspath)).parents:
            item.add_marker(skip)


def runs() -> int:
    return int(os.environ.get("REPRISE_SOAK_RUNS", "10"))


def seeds() -> int:
    return int(os.environ.get("REPRISE_SOAK_SEEDS", "20000"))
