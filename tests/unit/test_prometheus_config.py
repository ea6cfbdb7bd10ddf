"""The platform's Prometheus: the node agent's file_sd entries and the scrape configuration (pure parts)."""

from __future__ import annotations

from pathlib import Path

from local_platform.node_agent import scrape_targets
from local_platform.prometheus import OPERATOR_JOB, RELEASE_NAMESPACE, WORKER_JOB, scrape_config

WORKER = {"name": "app", "ports": [{"name": "metrics", "containerPort": 9400}, {"name": "http", "containerPort": 80}]}


def test_each_running_metrics_port_is_a_target_at_the_host_port_the_pod_really_got() -> None:
    entries = scrape_targets(
        [
            ("shop", "r-replay-b", WORKER, {9400: 15123, 80: 15124}),
            ("shop", "r-replay-a", WORKER, {9400: 9400, 80: 80}),
            ("shop", "accounts-1", {"name": "app", "ports": [{"name": "http", "containerPort": 80}]}, {80: 15125}),
            ("shop", "not-started", WORKER, {}),
        ]
    )
    assert entries == [
        {"targets": ["127.0.0.1:9400"], "labels": {"namespace": "shop", "pod": "r-replay-a", "container": "app"}},
        {"targets": ["127.0.0.1:15123"], "labels": {"namespace": "shop", "pod": "r-replay-b", "container": "app"}},
    ]


def test_the_operator_is_scraped_as_the_chart_s_rules_expect_and_the_pods_through_the_agent_s_file() -> None:
    config = scrape_config(8123, Path("/w/scrape-targets.json"), [Path("/w/rules.yaml")], extra_targets=[("x", "h:1")])
    operator, workers, extra = config["scrape_configs"]
    # RepriseOperatorDown looks for up{job="<fullname>-metrics", namespace="<release namespace>"}.
    assert operator["job_name"] == OPERATOR_JOB == "reprise-metrics"
    assert operator["static_configs"] == [{"targets": ["127.0.0.1:8123"], "labels": {"namespace": RELEASE_NAMESPACE}}]
    assert operator["honor_labels"] is True, "the operator's series keep the replay's namespace"
    assert workers["job_name"] == WORKER_JOB
    assert workers["file_sd_configs"][0]["files"] == ["/w/scrape-targets.json"]
    assert extra == {"job_name": "x", "static_configs": [{"targets": ["h:1"]}]}
    assert config["rule_files"] == ["/w/rules.yaml"]
