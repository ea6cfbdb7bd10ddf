"""A real Prometheus on the local platform, evaluating the chart's own alert and recording rules.

The server is the one `local_platform/build/prometheus.sh` builds (no web UI; the HTTP API, the rule engine
and the TSDB). It scrapes:
- the operator, at the metrics port it was started with (`honor_labels`, as the chart's ServiceMonitor does,
  so the replay's own `namespace` stays), under the job name the chart's RepriseOperatorDown expects;
- the replay pods, through the file_sd file the node agent keeps current (`node_agent.SCRAPE_TARGETS_FILE`):
  pods have no IPs here and their metrics ports are remapped, so only the agent knows where they listen.

The rules are the chart's PrometheusRule as `helm template` renders it (`chart_rules`), with values the caller
may override (a short `stalledFor` in a test), plus any extra rule files (the example lag alerts). Started by
`make run` and by the end-to-end test; stopped by its PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Sequence

import yaml

from .errors import PlatformError
from .processes import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
CHART = REPO_ROOT / "charts" / "reprise"
#: The release the rules are rendered for: `reprise` in `reprise-system`, so the operator's job is `reprise-metrics`.
RELEASE, RELEASE_NAMESPACE = "reprise", "reprise-system"
OPERATOR_JOB = f"{RELEASE}-metrics"
WORKER_JOB = "reprise-replay-workers"
#: Seconds between scrapes and between rule evaluations: short, so a demo or a test sees a change within
#: seconds; a few small targets cost next to nothing.
INTERVAL_S = 2


def chart_rules(helm: Path, out: Path, overrides: dict[str, Any] | None = None) -> Path:
    """The chart's PrometheusRule rendered with `metrics.prometheusRule` values `overrides` (a short
    `stalledFor`, say; the expressions stay the chart's), written as a Prometheus rule file (its `spec`) to `out`."""
    chosen = {
        "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True, **(overrides or {})}},
        # The NetworkPolicy needs its peers to render at all, and only the rules are read here.
        "networkPolicy": {"enabled": False},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    values_file = out.with_suffix(".values.yaml")
    values_file.write_text(yaml.safe_dump(chosen))
    proc = subprocess.run(
        [
            str(helm),
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            RELEASE_NAMESPACE,
            "--values",
            str(values_file),
            "--show-only",
            "templates/monitoring/prometheusrule.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise PlatformError(f"rendering the chart's PrometheusRule failed: {proc.stderr.strip()[:300]}")
    rule = yaml.safe_load(proc.stdout)
    out.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return out


def scrape_config(
    operator_port: int | None,
    targets_file: Path,
    rule_files: Sequence[Path],
    interval_s: int = INTERVAL_S,
    extra_targets: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """prometheus.yml: the operator (static) and the replay pods (file_sd), the given rule files, and
    `extra_targets` (job name, host:port), such as a consumer-lag exporter."""
    jobs: list[dict[str, Any]] = []
    if operator_port is not None:
        jobs.append(
            {
                "job_name": OPERATOR_JOB,
                "honor_labels": True,
                "static_configs": [
                    {"targets": [f"127.0.0.1:{operator_port}"], "labels": {"namespace": RELEASE_NAMESPACE}}
                ],
            }
        )
    jobs.append(
        {
            "job_name": WORKER_JOB,
            "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": f"{interval_s}s"}],
        }
    )
    jobs.extend({"job_name": job, "static_configs": [{"targets": [target]}]} for job, target in extra_targets)
    return {
        "global": {"scrape_interval": f"{interval_s}s", "evaluation_interval": f"{interval_s}s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": jobs,
    }


class PrometheusServer:
    """`prometheus` as a child process on loopback, with its TSDB under `workdir` (replaced at each start)."""

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        *,
        operator_port: int | None,
        targets_file: Path,
        rule_files: Sequence[Path],
        extra_targets: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.binary = binary
        self.workdir = Path(workdir)
        self.config = scrape_config(operator_port, targets_file, rule_files, extra_targets=extra_targets)
        self.port = 0
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def start(self, timeout: float = 60.0) -> "PrometheusServer":
        shutil.rmtree(self.workdir / "data", ignore_errors=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config, sort_keys=False))
        self.port = free_port()
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                [
                    str(self.binary),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1d",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.popen.poll() is not None:
                raise PlatformError(f"prometheus exited with {self.popen.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise PlatformError(f"prometheus was not ready within {timeout:.0f}s; see {self.log_path}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """`GET /api/v1/<path>`'s `data`."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise PlatformError(f"prometheus /api/v1/{path}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Every pending or firing alert: {labels, annotations, state, activeAt, value}."""
        return list(self.api("alerts")["alerts"])

    def rss_bytes(self) -> int | None:
        """The server's resident memory, from /proc."""
        if self.pid is None:
            return None
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None
