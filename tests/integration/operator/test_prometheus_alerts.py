"""The chart's alerts in a real Prometheus, on real replays: a replay whose handler hangs fires
RepriseReplayStalled while a healthy, slow one next to it does not; a sanctioned Rewind's live-group lag does
not fire the example lag alert, while the same alert fires for a group no replay covers.

Prometheus (local_platform/prometheus.py, the binary the platform builds) scrapes the test's operator, the
replay pods through the node agent's file_sd file, and a small consumer-lag exporter that reads the real
broker and exports kafka-exporter's `kafka_consumergroup_lag` (the platform has no kafka-exporter). The rules
are the chart's PrometheusRule as `helm template` renders it, with a shorter `stalledFor` (the expressions
are the chart's), and the chart's example lag alert with a threshold and `for` that fit a 3000-record topic
(its `unless` clause, the part under test, as shipped).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

from local_platform.processes import free_port
from local_platform.prometheus import CHART, INTERVAL_S, PrometheusServer, chart_rules
from reprise_operator.shared.constants import replay_group_name

from tests.fixtures.kube import wait_for

from .scenario import HISTORY, PARTITIONS, apply, live_deployment, produce, reconsume, wait_caught_up, wait_phase

pytestmark = pytest.mark.integration

#: Fires after 60 s without progress (the rule's own threshold) and then this long: the chart's 15m, shortened.
STALLED_FOR = "2m"
LAG_ALERT = "KafkaConsumergroupLagHigh"
#: The example's threshold and window, for a topic of 3000 records and a test of minutes.
LAG_THRESHOLD, LAG_FOR = 100, "10s"


class LagExporter:
    """kafka-exporter's `kafka_consumergroup_lag{consumergroup,topic,partition}`, read from the broker at each
    scrape: end offset minus the group's committed offset."""

    def __init__(self, bootstrap: str, topic: str, groups: list[str]) -> None:
        self.bootstrap, self.topic, self.groups = bootstrap, topic, groups
        self.port = free_port()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Current approximate lag of a consumer group at topic/partition.",
            labels=["consumergroup", "topic", "partition"],
        )
        for group in self.groups:
            reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False})
            try:
                wanted = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
                for tp in reader.committed(wanted, timeout=10):
                    _, end = reader.get_watermark_offsets(TopicPartition(self.topic, tp.partition), timeout=10)
                    lag = end - tp.offset if tp.offset >= 0 else end
                    family.add_metric([group, self.topic, str(tp.partition)], lag)
            finally:
                reader.close()
        yield family

    def __enter__(self) -> "LagExporter":
        registry = CollectorRegistry()
        registry.register(self)
        self.server, _ = start_http_server(self.port, addr="127.0.0.1", registry=registry)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def lag_rules(out: Path) -> Path:
    """The chart's example lag alert for kafka-exporter's names, with a test-sized threshold and window."""
    rules = yaml.safe_load((CHART / "monitoring" / "lag-alerts.rules.yaml").read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"] if r["alert"] == LAG_ALERT]
    assert "unless on (consumergroup) reprise:consumergroup_under_replay" in " ".join(rule["expr"].split())
    rule["expr"] = rule["expr"].replace("> 100000", f"> {LAG_THRESHOLD}")
    rule["for"] = LAG_FOR
    out.write_text(yaml.safe_dump({"groups": [{"name": "lag", "rules": [rule]}]}))
    return out


@pytest.fixture
def prometheus(kube, operator, tmp_path) -> Iterator[PrometheusServer]:
    from local_platform.toolchain import ensure_helm, ensure_prometheus

    rules = chart_rules(ensure_helm(), tmp_path / "prometheus" / "reprise-rules.yaml", {"stalledFor": STALLED_FOR})
    server = PrometheusServer(
        ensure_prometheus(),
        tmp_path / "prometheus",
        operator_port=operator.metrics_port,
        targets_file=kube.agent.scrape_targets_file,
        rule_files=[rules],
    )
    yield server.start()
    server.stop()


def set_env(body: dict, **values: str) -> None:
    """Set env values of a Reconsume's replay consumers, replacing those it has."""
    env = [e for e in body["spec"]["consumer"]["env"] if e["name"] not in values]
    body["spec"]["consumer"]["env"] = env + [{"name": k, "value": v} for k, v in values.items()]


def alerts_of(server: PrometheusServer, namespace: str, **labels: str) -> list[dict]:
    return [
        a
        for a in server.alerts()
        if a["labels"].get("namespace", namespace) == namespace
        and all(a["labels"].get(k) == v for k, v in labels.items())
    ]


@pytest.mark.timeout(900)  # the stall must last 60 s past the rule's threshold and `for`, on a loaded machine
def test_a_hanging_replay_fires_replay_stalled_and_a_slow_healthy_one_next_to_it_does_not(
    kube, kafka, operator, namespace, topic_name, tmp_path, prometheus
) -> None:
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, HISTORY)
    out = tmp_path / "processed"
    out.mkdir()
    apply(kube, namespace, live_deployment("accounts", kafka.bootstrap, "accounts-group", topic_name, out))
    wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    healthy = reconsume("healthy", kafka.bootstrap, topic_name, "Parallel", "accounts", str(out))
    # About 6 records a second per replica: minutes of history, in batches every few seconds.
    set_env(healthy, REPRISE_MAX_RECORDS_PER_SECOND="6", REPRISE_BATCH_SIZE="20")
    stuck = reconsume("stuck", kafka.bootstrap, topic_name, "Parallel", "accounts", str(out))
    set_env(stuck, REPRISE_HANDLER="tests.integration.operator.stuck_sink:record")
    apply(kube, namespace, healthy)
    apply(kube, namespace, stuck)
    wait_phase(kube, namespace, "reconsume", "healthy", "Running", timeout=120, operator=operator)
    wait_phase(kube, namespace, "reconsume", "stuck", "Running", timeout=120, operator=operator)

    fired = None
    deadline = time.monotonic() + 360
    while fired is None and time.monotonic() < deadline:
        noisy = alerts_of(prometheus, namespace, alertname="RepriseReplayStalled", name="healthy")
        assert noisy == [], f"the healthy replay is {noisy[0]['state']}: {noisy}"
        found = alerts_of(prometheus, namespace, alertname="RepriseReplayStalled", name="stuck")
        fired = next((a for a in found if a["state"] == "firing"), None)
        if fired is None:
            time.sleep(2)
    assert fired is not None, f"RepriseReplayStalled did not fire within 6 minutes: {prometheus.alerts()}"
    assert fired["labels"]["kind"] == "Reconsume" and fired["labels"]["severity"] == "warning"
    assert fired["annotations"]["summary"] == f"Reconsume {namespace}/stuck makes no progress"
    healthy_now = kube.kubectl("get", "reconsume", "healthy", "-n", namespace, "-o", "jsonpath={.status.phase}")
    assert healthy_now.stdout in ("Running", "Draining"), "the healthy replay must still run when the stall fires"
    # The replay pods are scraped through the node agent's file: four workers (two per replay) up.
    workers = prometheus.query(f'up{{job="reprise-replay-workers",namespace="{namespace}"}} == 1')
    assert len(workers) == 4, workers

    # Past its own alert the stuck replay's group is no longer sanctioned; the healthy one's still is.
    # The recording rule reads ALERTS, so it drops the group at its first evaluation after the alert fired: under
    # load that evaluation can come after the alert was seen.
    def stuck_left() -> set[str] | None:
        groups = {r["metric"]["consumergroup"] for r in prometheus.query("reprise:consumergroup_under_replay")}
        return groups if replay_group_name(namespace, "stuck") not in groups else None

    groups = wait_for(
        stuck_left,
        60,
        "the stuck replay's group to leave reprise:consumergroup_under_replay",
    )
    assert replay_group_name(namespace, "healthy") in groups
    print(f"prometheus RSS: {(prometheus.rss_bytes() or 0) / 2**20:.0f} MiB")


@pytest.fixture
def lag_prometheus(kube, operator, kafka, topic_name, tmp_path) -> Iterator[PrometheusServer]:
    from local_platform.toolchain import ensure_helm, ensure_prometheus

    rules = chart_rules(ensure_helm(), tmp_path / "prometheus" / "reprise-rules.yaml")
    with LagExporter(kafka.bootstrap, topic_name, ["accounts-group", "bystander-group"]) as exporter:
        server = PrometheusServer(
            ensure_prometheus(),
            tmp_path / "prometheus",
            operator_port=operator.metrics_port,
            targets_file=kube.agent.scrape_targets_file,
            rule_files=[rules, lag_rules(tmp_path / "lag-alerts.yaml")],
            extra_targets=[("kafka-exporter", f"127.0.0.1:{exporter.port}")],
        )
        yield server.start()
        server.stop()


@pytest.mark.timeout(900)
def test_a_sanctioned_rewind_does_not_fire_the_lag_alert_that_fires_for_a_group_no_replay_covers(
    kube, kafka, operator, namespace, topic_name, tmp_path, lag_prometheus
) -> None:
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, HISTORY)
    out = tmp_path / "processed"
    out.mkdir()
    live = live_deployment("accounts", kafka.bootstrap, "accounts-group", topic_name, out)
    # 25 records every half second: the rewound history takes about a minute to work through again.
    live["spec"]["template"]["spec"]["containers"][0]["env"] += [
        {"name": "LIVE_BATCH", "value": "25"},
        {"name": "LIVE_PAUSE_S", "value": "0.5"},
    ]
    apply(kube, namespace, live)
    wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS, timeout=240)
    # Its first catch-up was not sanctioned, and paged: wait until that alert is resolved.
    wait_for(
        lambda: not [a for a in lag_prometheus.alerts() if a["labels"].get("consumergroup") == "accounts-group"],
        60,
        "the lag alert of the first catch-up to resolve",
    )
    # A group that stopped at the start of the topic, under no replay: its lag must page.
    bystander = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "bystander-group"})
    bystander.commit(offsets=[TopicPartition(topic_name, p, 0) for p in range(PARTITIONS)], asynchronous=False)
    bystander.close()
    try:
        watch_the_rewind(kube, kafka, namespace, topic_name, out, lag_prometheus)
    finally:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})  # kept in a name: its futures die with it
        for future in admin.delete_consumer_groups(["bystander-group"], request_timeout=30).values():
            future.result(timeout=60)


def watch_the_rewind(kube, kafka, namespace: str, topic_name: str, out: Path, prometheus: PrometheusServer) -> None:
    apply(kube, namespace, reconsume("rewind", kafka.bootstrap, topic_name, "Rewind", "accounts", str(out)))
    lagging = f'sum by (consumergroup) (kafka_consumergroup_lag{{consumergroup="accounts-group"}}) > {LAG_THRESHOLD}'
    seen: list[float] = []  # when the rewound group was seen lagging, sanctioned, and not alerting
    sanctioned_since = None
    phase = ""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        phase = kube.kubectl("get", "reconsume", "rewind", "-n", namespace, "-o", "jsonpath={.status.phase}").stdout
        alerts = [a for a in prometheus.alerts() if a["labels"]["alertname"] == LAG_ALERT]
        mine = [a for a in alerts if a["labels"].get("consumergroup") == "accounts-group"]
        assert not [a for a in mine if a["state"] == "firing"], f"the lag alert fired during the Rewind: {mine}"
        sanctioned = prometheus.query('reprise:consumergroup_under_replay{consumergroup="accounts-group"}')
        if sanctioned and sanctioned_since is None:
            sanctioned_since = time.monotonic()
        # The offsets move a moment before the operator reports the group, and each rule group evaluates on
        # its own: a pending alert may outlive that moment by an evaluation or two, never the alert's `for`.
        settled = sanctioned_since is not None and time.monotonic() - sanctioned_since > 3 * INTERVAL_S
        if prometheus.query(lagging) and sanctioned and settled:
            assert mine == [], f"the lag alert is pending for a sanctioned group: {mine}"
            seen.append(time.monotonic())
        if phase == "Complete":
            break
        time.sleep(2)
    assert phase == "Complete", f"the Rewind did not complete within 5 minutes (phase {phase})"
    assert seen and seen[-1] - seen[0] > 15, (
        f"the rewound group lagged under the sanction for {seen[-1] - seen[0] if seen else 0:.0f}s only: "
        "not longer than the alert's window, so the test shows nothing"
    )
    # The same rule in the same Prometheus pages for the group that no replay covers.
    firing = [a for a in prometheus.alerts() if a["labels"]["alertname"] == LAG_ALERT and a["state"] == "firing"]
    assert [a["labels"]["consumergroup"] for a in firing] == ["bystander-group"], firing
    print(f"the rewound group lagged > {LAG_THRESHOLD} under the sanction for {seen[-1] - seen[0]:.0f}s, no alert")
