"""ServiceMonitor, PodMonitor, PrometheusRule and the Grafana dashboard, checked against what the code exports:
every metric name and every label an expression uses must be one the operator or the replay worker really
has, so a renamed metric fails here instead of silencing an alert."""

from __future__ import annotations

import json
import re

import pytest
from prometheus_client.metrics import MetricWrapperBase

from replay_worker.replay.metrics import WorkerMetrics
from reprise_operator.shared import metrics as operator_metrics
from reprise_operator.shared.constants import child_labels
from reprise_operator.rules.workloads import Owner, replay_deployment_manifest

from .conftest import RELEASE, one

FULLNAME = f"{RELEASE}-reprise"
ALL_ON = {
    "metrics": {
        "serviceMonitor": {"enabled": True},
        "podMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "dashboard": {"enabled": True},
    }
}
# Series Prometheus makes itself for every target, and the labels it adds to every scraped series.
PROMETHEUS_SERIES = {"up": set(), "ALERTS": {"alertname", "alertstate"}}
#: The chart's recording rules, and the labels they keep.
RECORDED = {"reprise:consumergroup_under_replay": {"consumergroup", "group"}}
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
# PromQL words that look like metric names.
PROMQL_WORDS = {
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "rate",
    "irate",
    "increase",
    "delta",
    "deriv",
    "changes",
    "absent",
    "offset",
    "bool",
    "humanizeDuration",
    "label_values",
    "topk",
    "bottomk",
    "time",
    "vector",
    "scalar",
}


def exported() -> dict[str, set[str]]:
    """Every series name the two programs expose, with its label names."""
    names: dict[str, set[str]] = {}
    for value in vars(operator_metrics).values():
        if isinstance(value, MetricWrapperBase):
            suffix = "_total" if value._type == "counter" else ""
            names[value._name + suffix] = set(value._labelnames)
    collector = operator_metrics.PhaseCollector()
    collector.set("Reconsume", "ns", "n", "Running")
    for family in collector.collect():
        names[family.name] = set(family.samples[0].labels)
    groups = operator_metrics.ReplayGroupCollector()
    groups.set("Reconsume", "ns", "n", [("orders", "live")])
    for family in groups.collect():
        names[family.name] = set(family.samples[0].labels)
    worker = WorkerMetrics("ns/r/1", "m-0")
    worker.partition("t", 0, position=1, end=2, state="replaying")
    for family in worker.registry.collect():
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                names[sample.name] = set(sample.labels)
    assert set(operator_metrics.METRIC_NAMES) <= set(names), "METRIC_NAMES lists what the operator registers"
    return names


def check_expression(expr: str, known: dict[str, set[str]]) -> list[str]:
    """Metric names and label names in one PromQL expression that the code does not export."""
    problems = []
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_strings)
    without_ranges = re.sub(r"\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)", "", without_ranges)
    used: list[str] = []
    for match in re.finditer(r"(?<![\w{,=])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?", without_ranges):
        name, selector = match.group(1), match.group(2) or ""
        if name in PROMQL_WORDS or re.fullmatch(r"\d+[smhdwy]?", name):
            continue
        following = without_ranges[match.end() :].lstrip()[:1]
        if following == "(" and not selector:
            continue  # a function call
        used.append(name)
        labels = known.get(name, PROMETHEUS_SERIES.get(name, RECORDED.get(name)))
        if labels is None:
            problems.append(f"unknown metric {name}")
            continue
        for label in re.findall(r"(\w+)\s*[=!]~?", selector):
            if label not in labels | TARGET_LABELS:
                problems.append(f"{name} has no label {label}")
    available = set().union(*(known.get(n, set()) for n in used)) | TARGET_LABELS
    for clause in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", without_strings):
        for label in filter(None, (s.strip() for s in clause.split(","))):
            if label not in available:
                problems.append(f"label {label} is on none of {sorted(set(used))}")
    if not used:
        problems.append("uses no metric")
    return problems


@pytest.fixture(scope="module")
def known() -> dict[str, set[str]]:
    return exported()


def test_the_checker_catches_a_renamed_metric_and_a_wrong_label(known) -> None:
    assert check_expression("reprise_replay_lag_records > 0", known) == []
    assert check_expression("reprise_replay_lag > 0", known) == ["unknown metric reprise_replay_lag"]
    assert check_expression('reprise_replays{phase="Failed", stage="x"} > 0', known) == [
        "reprise_replays has no label stage"
    ]
    assert check_expression("sum by (group) (reprise_replay_eta_seconds)", known) == [
        "label group is on none of ['reprise_replay_eta_seconds']"
    ]


def test_prometheus_rule_has_the_four_alerts_with_real_metric_names(render, known) -> None:
    rule = one(render(ALL_ON), "PrometheusRule", FULLNAME)
    rules = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r}
    recorded = {r["record"]: r for group in rule["spec"]["groups"] for r in group["rules"] if "record" in r}
    assert set(recorded) == set(RECORDED)
    for name, body in recorded.items():
        assert check_expression(body["expr"], known) == [], name
    for alert in (
        "RepriseReplayStalled",
        "RepriseReplayFailed",
        "RepriseHandoverNotProgressing",
        "RepriseBackfillBarrierStalled",
    ):
        assert alert in rules, alert
    for name, body in rules.items():
        assert check_expression(body["expr"], known) == [], name
        # severity "none": the inhibition source RepriseConsumerGroupUnderReplay, routed to a null receiver.
        assert body["labels"]["severity"] in ("warning", "critical") or name == "RepriseConsumerGroupUnderReplay"
        assert (
            body["annotations"]["summary"] and "{{" in body["annotations"]["summary"] or name == "RepriseOperatorDown"
        )
    assert "reprise_backfill_barrier_stalled" in rules["RepriseBackfillBarrierStalled"]["expr"]
    assert "reprise_handover_partitions_pending" in rules["RepriseHandoverNotProgressing"]["expr"]
    assert 'phase="Failed"' in rules["RepriseReplayFailed"]["expr"]
    assert rules["RepriseReplayStalled"]["for"] == "15m"


def test_alert_windows_and_labels_come_from_values(render) -> None:
    values = {
        "metrics": {
            "prometheusRule": {
                "enabled": True,
                "stalledFor": "1h",
                "handoverStalledFor": "2h",
                "alertLabels": {"team": "data"},
                "labels": {"release": "kp"},
            }
        }
    }
    rule = one(render(values), "PrometheusRule", FULLNAME)
    assert rule["metadata"]["labels"]["release"] == "kp"
    rules = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r}
    assert rules["RepriseReplayStalled"]["for"] == "1h"
    assert "[2h]" in rules["RepriseHandoverNotProgressing"]["expr"]
    assert all(r["labels"]["team"] == "data" for r in rules.values())
    assert "RepriseOperatorDown" not in rules, "no `up` series without the ServiceMonitor"


def test_dashboard_panels_use_real_metric_names(render, known) -> None:
    config_map = one(render(ALL_ON), "ConfigMap", f"{FULLNAME}-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["reprise.json"])
    titles = [p["title"] for p in dashboard["panels"]]
    assert "Replays by phase" in titles and "Lag per replay" in titles and "ETA per replay" in titles
    assert any("Throughput" in t for t in titles)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    for expr in exprs:
        assert check_expression(expr.replace("$namespace", "x"), known) == [], expr
    used = {n for e in exprs for n in re.findall(r"reprise_\w+", e)}
    assert {
        "reprise_replays",
        "reprise_replay_lag_records",
        "reprise_replay_eta_seconds",
        "reprise_replay_processed_records",
    } <= used


def test_service_monitor_scrapes_the_operator_service_and_keeps_replay_labels(render) -> None:
    docs = render(ALL_ON)
    monitor = one(docs, "ServiceMonitor", FULLNAME)
    service = one(docs, "Service", f"{FULLNAME}-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True, "reprise_* series carry the replay's namespace"
    deployment = one(docs, "Deployment", FULLNAME)
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_pod_monitor_selects_the_replay_pods_the_operator_builds(render) -> None:
    monitor = one(render(ALL_ON), "PodMonitor", f"{FULLNAME}-replay-workers")
    replay = replay_deployment_manifest(
        owner=Owner("reprise.io/v1alpha1", "Reconsume", "r", "uid"),
        name="r-replay",
        namespace="ns",
        labels=child_labels("Reconsume", "r", "replay-consumer"),
        pod_template={"spec": {"containers": [{"name": "app", "image": "svc:1"}]}},
        replicas=1,
        worker_env={},
    )
    pod = replay["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in [p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])]
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    scoped = one(render({**ALL_ON, "watchNamespaces": ["a", "b"]}), "PodMonitor", f"{FULLNAME}-replay-workers")
    assert scoped["spec"]["namespaceSelector"] == {"matchNames": ["a", "b"]}


def test_chart_objects_are_not_mistaken_for_the_operator_s_children(render) -> None:
    # The PodMonitor selects app.kubernetes.io/managed-by=reprise: the chart's own pods must not match.
    deployment = one(render(ALL_ON), "Deployment", FULLNAME)
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_monitoring_is_off_by_default(render) -> None:
    kinds = {d["kind"] for d in render()}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}
