"""Fixtures of the replay worker's integration tests: a process list stopped by PIDs, and settings builders."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from .harness import Processes


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    """Processes the test starts; every one is stopped by its PID when the test ends, also on failure."""
    started = Processes(tmp_path / "logs")
    try:
        yield started
    finally:
        started.stop_all()


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def handover_topic(topic_name: str) -> str:
    """A handover topic of the test's own, so tests never see each other's replays."""
    return f"{topic_name}-handover"


@pytest.fixture
def worker_env(kafka, topic_name: str, out_dir: Path, handover_topic: str) -> Callable[..., dict[str, str]]:
    def build(**overrides: str) -> dict[str, str]:
        env = {
            "REPRISE_BOOTSTRAP_SERVERS": kafka.bootstrap,
            "REPRISE_REPLAY_ID": f"test/{topic_name}",
            "REPRISE_TOPICS": topic_name,
            "REPRISE_REPLAY_GROUP": f"{topic_name}-replay",
            "REPRISE_HANDLER": "tests.integration.replay_worker.sink:record",
            "REPRISE_HANDOVER_TOPIC": handover_topic,
            "REPRISE_METRICS_PORT": "0",
            "REPRISE_TEST_SINK_DIR": str(out_dir),
            "REPRISE_CHECK_INTERVAL": "0.5",
        }
        env.update(overrides)
        return {k: v for k, v in env.items() if v is not None}

    return build
