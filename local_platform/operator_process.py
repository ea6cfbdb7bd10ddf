"""The operator as a child process of a test or a benchmark: `python -m reprise_operator` against a given
kubeconfig, with its log in a file, started and stopped (or killed, as a crash would) by its PID.

Its admission webhook is on, as in a cluster: it listens on 127.0.0.1 and registers itself
(`admission_webhook`); `start()` returns once the API server sends it requests. Stopping or killing the
process also deletes that registration: the webhook fails closed, and a stopped test operator must not refuse
every create of the tests after it. `env={"REPRISE_WEBHOOK_PORT": "0"}` runs it without the webhook."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import admission_webhook
from .processes import free_port

REPO = Path(__file__).resolve().parents[1]


class OperatorProcess:
    """The operator as a child process, with its log in a file."""

    def __init__(self, kubeconfig: Path, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.metrics_port = free_port()
        self.webhook_port = free_port()
        webhook = admission_webhook.webhook_env(log_path.parent / "webhook-tls", self.webhook_port)
        self.env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'operator'}",
            "REPRISE_POLL_INTERVAL": "1",
            "REPRISE_LEADER_ELECTION": "false",
            "REPRISE_METRICS_PORT": str(self.metrics_port),
            **webhook,
            **(env or {}),
        }
        self.webhook = self.env.get("REPRISE_WEBHOOK_PORT", "0") != "0"
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90) -> None:
        """Start it and wait until it says it is watching; fail with its log if it exits first."""
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        if self.webhook:
            admission_webhook.remove_configuration(self.kubeconfig)  # a left-over one would count as ours
        log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "reprise_operator"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while "reprise operator watching" not in self.log_path.read_text(errors="replace")[offset:]:
            if self.popen.poll() is not None:
                raise AssertionError(f"the operator exited with {self.popen.returncode}:\n{self.log()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the operator did not start watching within {timeout:.0f}s:\n{self.log()[-4000:]}"
                )
            time.sleep(0.2)
        while self.webhook and not admission_webhook.registered(self.kubeconfig, self.webhook_port):
            if self.popen.poll() is not None:
                raise AssertionError(f"the operator exited with {self.popen.returncode}:\n{self.log()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the operator's admission webhook was not registered within {timeout:.0f}s:\n{self.log()[-4000:]}"
                )
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL, as a crash would: no cleanup handler runs."""
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        self._unregister()

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._unregister()

    def _unregister(self) -> None:
        if self.webhook:
            admission_webhook.remove_configuration(self.kubeconfig)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
