"""Operations: the Kafka config folder, JSON logs without secrets, metrics, and the backfill's key selection."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from replay_worker.replay.backfill import LatestByKey
from replay_worker.protocol.filters import FilterSpec, RecordFilter
from replay_worker.connection.kafka_clients import (
    REPLAY_ASSIGNMENT,
    KafkaConfigError,
    close_within,
    consumer_config,
    load_config_dir,
    producer_config,
)
from replay_worker.logging import JsonFormatter
from replay_worker.replay.metrics import WorkerMetrics


def test_config_dir_one_setting_per_file(tmp_path) -> None:
    (tmp_path / "sasl.username").write_text("svc\n")
    (tmp_path / "sasl.password").write_text("s3cret")
    (tmp_path / "..data").mkdir()  # Kubernetes' Secret-mount bookkeeping
    (tmp_path / ".hidden").write_text("x")
    assert load_config_dir(tmp_path) == {"sasl.username": "svc", "sasl.password": "s3cret"}
    assert load_config_dir(None) == {}
    # A file that a `*.location` names in the folder is that setting's value, not a setting of its own.
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "ssl.ca.location").write_text("/etc/reprise/kafka/ca.crt\n")
    assert load_config_dir(tmp_path) == {
        "sasl.username": "svc",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/reprise/kafka/ca.crt",
    }
    with pytest.raises(KafkaConfigError, match="not a directory"):
        load_config_dir(tmp_path / "missing")


def test_the_worker_settings_win_over_the_config_folder() -> None:
    base = {
        "bootstrap.servers": "k:1",
        "enable.auto.commit": "true",
        "enable.idempotence": "false",
        "partition.assignment.strategy": "cooperative-sticky",
    }
    consumer = consumer_config(base, "g")
    assert consumer["enable.auto.commit"] is False and consumer["enable.auto.offset.store"] is False
    # The replay group's strategy is the worker's: every member of a group must use the same kind.
    assert consumer["partition.assignment.strategy"] == REPLAY_ASSIGNMENT and consumer["group.id"] == "g"
    assert producer_config(base)["enable.idempotence"] is True


def test_a_close_that_does_not_return_is_left_behind_and_said(caplog) -> None:
    release = threading.Event()
    closed: list[str] = []

    def hanging_close() -> None:
        release.wait()
        closed.append("late")

    with caplog.at_level(logging.WARNING, logger="replay_worker.librdkafka"):
        assert close_within(hanging_close, 0.05, "consumer") is False
        assert close_within(lambda: closed.append("now"), 5, "producer") is True

        def failing_close() -> None:
            raise RuntimeError("coordinator gone")

        assert close_within(failing_close, 5, "consumer") is True
    assert closed == ["now"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("closing the consumer did not return within 0s; exiting without it")
    assert messages[1] == "closing the consumer failed" and caplog.records[1].error == "coordinator gone"
    release.set()


def test_json_logs_carry_extra_fields_and_static_tags() -> None:
    record = logging.LogRecord("replay_worker", logging.INFO, __file__, 1, "partition finished", None, None)
    record.topic, record.partition = "orders", 3
    line = json.loads(JsonFormatter({"replay_id": "r/1"}).format(record))
    assert line["msg"] == "partition finished" and line["level"] == "info"
    assert (line["topic"], line["partition"], line["replay_id"]) == ("orders", 3, "r/1")


def test_metrics_render_counters_and_partition_gauges() -> None:
    metrics = WorkerMetrics("r/1", "worker-0")
    metrics.consumed.inc(5)
    metrics.partition("orders", 2, position=40, end=100, state="replaying")
    text = metrics.render().decode()
    assert 'reprise_worker_records_consumed_total{member="worker-0",replay="r/1"} 5.0' in text
    assert 'reprise_worker_partition_lag{member="worker-0",partition="2",replay="r/1",topic="orders"} 60.0' in text
    metrics.forget("orders", 2)
    assert "reprise_worker_partition_lag{" not in metrics.render().decode()


def test_backfill_keeps_the_latest_matching_record_per_key() -> None:
    keys = {b"a", b"b", b"c", b"gone"}
    only_v2 = RecordFilter.compile(FilterSpec.parse({"json": [{"path": "v", "exists": True}]}))
    latest = LatestByKey(keys, only_v2)
    latest.offer("t", 0, 1, b"a", b'{"v":1}', None)
    latest.offer("t", 0, 5, b"a", b'{"v":2}', [("h", b"1")])
    latest.offer("t", 0, 6, b"a", b'{"old":true}', None)  # does not match the rest of the filter
    latest.offer("t", 1, 2, b"b", b'{"v":1}', None)
    latest.offer("t", 1, 3, b"gone", b'{"v":1}', None)
    latest.offer("t", 1, 4, b"gone", None, None)  # deleted since
    latest.offer("t", 1, 7, b"zzz", b'{"v":1}', None)  # not asked for
    latest.offer("t", 1, 8, b"b", b"not json", None)
    present, missing, deleted = latest.summary()
    assert present[b"a"].value == b'{"v":2}' and present[b"a"].headers == [("h", b"1")]
    assert set(present) == {b"a", b"b"} and missing == ["c"] and deleted == ["gone"]
    assert latest.undecodable == 1
