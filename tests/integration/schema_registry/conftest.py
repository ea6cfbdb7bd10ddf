"""The replay worker's test fixtures (a process list stopped by PIDs, the worker's settings), shared here."""

from tests.integration.replay_worker.conftest import handover_topic, out_dir, procs, worker_env

__all__ = ["handover_topic", "out_dir", "procs", "worker_env"]
