"""The Go interoperability tests reuse the replay worker's process harness and fixtures."""

from tests.integration.replay_worker.conftest import handover_topic, out_dir, procs, worker_env  # noqa: F401
