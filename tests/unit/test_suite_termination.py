"""`make test` stopped by SIGTERM (CI's limit, `kill -- -PGID`) leaves no process of its fixtures behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CONFTEST = """
import pytest
from local_platform import processes

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    proc = processes.start("server", ["sleep", "600"], tmp_path_factory.mktemp("log") / "server.log")
    yield proc
    proc.stop(timeout=5)
"""

TEST = """
import time

def test_long(server, tmp_path):
    open({pid_file!r}, "w").write(str(server.pid))
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of an already gone parent counts as gone.
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state != "Z"


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["plain", "xdist"])
def test_a_suite_stopped_by_sigterm_stops_what_its_fixtures_started(tmp_path: Path, workers: list[str]) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    pid_file = tmp_path / "server.pid"
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_long.py").write_text(TEST.format(pid_file=str(pid_file)))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    suite_proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.fixtures.termination", "-p", "no:cacheprovider"]
        + workers
        + [str(suite)],
        cwd=suite,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server_pid = None
    try:
        deadline = time.monotonic() + 120
        while server_pid is None and time.monotonic() < deadline:
            if pid_file.exists() and pid_file.read_text():
                server_pid = int(pid_file.read_text())
            elif suite_proc.poll() is not None:
                break
            else:
                time.sleep(0.1)
        assert server_pid is not None, suite_proc.communicate()[0].decode(errors="replace")
        assert _alive(server_pid)
        os.killpg(suite_proc.pid, signal.SIGTERM)  # as `kill -- -PGID` of `make test` does
        output = suite_proc.communicate(timeout=60)[0].decode(errors="replace")
        gone_by = time.monotonic() + 10
        while _alive(server_pid) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not _alive(server_pid), f"the fixture's process {server_pid} outlived the suite:\n{output}"
    finally:
        if suite_proc.poll() is None:
            os.killpg(suite_proc.pid, signal.SIGKILL)
            suite_proc.wait()
        if server_pid is not None and _alive(server_pid):
            os.killpg(server_pid, signal.SIGKILL)
