"""The chart's alerts and recording rules evaluated by Prometheus's own rule engine (`promtool test rules`),
its rendered PrometheusRule checked by `promtool check rules`, and every dashboard query parsed by
Prometheus's PromQL parser (`promtool promql format`).

promtool is built once per machine from the Go module proxy (local_platform/toolchain.py, PROMETHEUS). The
unit tests are data: `promtool/*.test.yaml`, next to this file, on series that model a real failure and
its near misses. They run against the PrometheusRule exactly as `helm template` renders it, and against the
example lag alerts the chart ships (charts/reprise/monitoring/lag-alerts.rules.yaml).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from .conftest import CHART, RELEASE, one

TESTS = Path(__file__).resolve().parent / "promtool"
LAG_ALERTS = CHART / "monitoring" / "lag-alerts.rules.yaml"
FULLNAME = f"{RELEASE}-reprise"
#: The PrometheusRule as a user turns it on, with the ServiceMonitor (RepriseOperatorDown needs its `up`).
VALUES = {"metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}}
#: Grafana's own variables in dashboard queries, and what Prometheus is given for them.
GRAFANA_INTERVALS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}


@pytest.fixture(scope="session")
def promtool() -> Path:
    from local_platform.toolchain import ensure_promtool

    return ensure_promtool()


def run_promtool(promtool: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def rule_groups(render: Callable[..., list[dict[str, Any]]], values: dict[str, Any] | None = None) -> dict:
    """The rendered PrometheusRule's spec: a Prometheus rule file as it is (`groups`)."""
    return one(render(values or VALUES), "PrometheusRule", FULLNAME)["spec"]


def rules_folder(folder: Path, groups: dict) -> Path:
    """A folder holding the chart's rules (reprise-rules.yaml), the example lag alerts and the unit tests."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reprise-rules.yaml").write_text(yaml.safe_dump(groups, sort_keys=False))
    shutil.copy(LAG_ALERTS, folder / LAG_ALERTS.name)
    for test in TESTS.glob("*.test.yaml"):
        shutil.copy(test, folder / test.name)
    return folder


@pytest.fixture(scope="module")
def chart_rules(render, tmp_path_factory) -> Path:
    return rules_folder(tmp_path_factory.mktemp("promtool") / "chart", rule_groups(render))


def test_the_rendered_rules_and_the_example_lag_alerts_pass_promtool_check(promtool, chart_rules) -> None:
    proc = run_promtool(promtool, "check", "rules", "reprise-rules.yaml", LAG_ALERTS.name, cwd=chart_rules)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Six alerts, the recording rule and the inhibition source.
    assert re.search(r"reprise-rules\.yaml\s+SUCCESS: 8 rules found", proc.stdout), proc.stdout
    assert re.search(r"lag-alerts\.rules\.yaml\s+SUCCESS: 2 rules found", proc.stdout), proc.stdout


def test_promtool_check_refuses_a_rule_that_does_not_parse(promtool, render, tmp_path) -> None:
    groups = rule_groups(render)
    groups["groups"][0]["rules"][0]["expr"] += " and ("
    folder = rules_folder(tmp_path, groups)
    proc = run_promtool(promtool, "check", "rules", "reprise-rules.yaml", cwd=folder)
    assert proc.returncode == 1 and "could not parse expression" in proc.stdout + proc.stderr


@pytest.mark.parametrize("test_file", sorted(p.name for p in TESTS.glob("*.test.yaml")))
def test_rule_unit_tests_pass(promtool, chart_rules, test_file) -> None:
    proc = run_promtool(promtool, "test", "rules", test_file, cwd=chart_rules)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_and_recording_rule_of_the_chart_is_unit_tested(render) -> None:
    chart = {r.get("alert") or r["record"] for g in rule_groups(render)["groups"] for r in g["rules"]}
    examples = {r["alert"] for g in yaml.safe_load(LAG_ALERTS.read_text())["groups"] for r in g["rules"]}
    tested: set[str] = set()
    for path in TESTS.glob("*.test.yaml"):
        for test in yaml.safe_load(path.read_text())["tests"]:
            tested |= {t["alertname"] for t in test.get("alert_rule_test", []) if t["exp_alerts"]}
            tested |= {t["expr"] for t in test.get("promql_expr_test", []) if t["exp_samples"]}
    assert chart | examples <= tested, f"no test sees these fire or record: {sorted((chart | examples) - tested)}"


#: Rules broken on purpose, the way they break in review: (alert, field, what it reads, what it is changed to).
BREAKAGES = {
    # A `by` that loses the group: one alert per Backfill instead of one per stalled downstream group.
    "barrier-by-without-group": (
        "RepriseBackfillBarrierStalled",
        "expr",
        "max by (namespace, name, group)",
        "max by (namespace, name)",
    ),
    # A `for` too short: a replay merely slow for a few minutes would page.
    "stalled-for-too-short": ("RepriseReplayStalled", "for", "15m", "1m"),
    # The Handover rule as it was, without its lag clause: every healthy Handover fired within the hour.
    "handover-without-lag": (
        "RepriseHandoverNotProgressing",
        "expr",
        ' and on (namespace, name) (reprise_replay_lag_records{kind="Reconsume"} == 0)',
        "",
    ),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_a_rule_broken_on_purpose_fails_its_unit_test(promtool, render, tmp_path, breakage) -> None:
    alert, field, old, new = BREAKAGES[breakage]
    groups = rule_groups(render)
    (rule,) = [r for g in groups["groups"] for r in g["rules"] if r.get("alert") == alert]
    written = re.sub(r"\s+", " ", str(rule[field])).strip()
    assert old in written, f"{alert}'s {field} no longer reads {old!r}: update this test"
    rule[field] = written.replace(old, new)
    folder = rules_folder(tmp_path, groups)
    outcomes = [run_promtool(promtool, "test", "rules", p.name, cwd=folder) for p in sorted(folder.glob("*.test.yaml"))]
    output = "".join(o.stdout + o.stderr for o in outcomes if o.returncode != 0)
    assert "FAILED" in output and alert in output, f"breaking {alert} ({breakage}) went unnoticed"


def dashboard_queries() -> list[str]:
    dashboard = json.loads((CHART / "dashboards" / "reprise.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def as_promql(query: str) -> str:
    """A dashboard query with Grafana's variables replaced by what Prometheus would be sent."""
    return re.sub(
        r"\$\{?(\w+)\}?",
        lambda m: GRAFANA_INTERVALS.get(m.group(1), ".*"),
        query,
    )


def test_every_dashboard_query_parses_with_prometheus_s_parser(promtool) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 10
    for query in queries:
        proc = run_promtool(promtool, "--experimental", "promql", "format", as_promql(query))
        assert proc.returncode == 0, f"{query}: {proc.stderr.strip()}"


def test_the_parser_refuses_a_broken_dashboard_query(promtool) -> None:
    proc = run_promtool(promtool, "--experimental", "promql", "format", "sum by (kind (reprise_replays)")
    assert proc.returncode != 0 and "parse" in (proc.stdout + proc.stderr).lower()
