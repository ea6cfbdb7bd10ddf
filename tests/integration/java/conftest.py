"""Fixtures of the Java tests: the replay worker harness's (a process list stopped by PIDs, a ledger folder, a
handover topic of the test's own, the replay workers' settings), and the Java classpath built once per module."""

from __future__ import annotations

from tests.integration.replay_worker.conftest import handover_topic, out_dir, procs, worker_env  # noqa: F401
