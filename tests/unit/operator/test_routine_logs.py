"""The operator's terminal (issue 32 item 4): Kopf's per-handler success lines show at DEBUG only, librdkafka's
lines of a routinely fenced bootstrap producer at INFO, and a retriable Kafka error is a one-line wait."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException

from replay_worker.connection.librdkafka_levels import LibrdkafkaLevels, level_of
from reprise_operator.core.lifecycle import failure_of
from reprise_operator.rules.routine_logs import FencedAtInfo, RoutineAtDebug, is_routine, one_line_warning


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logger(request):
    found = logging.getLogger(f"test.routine.{request.node.name}")
    kept = Kept()
    found.addHandler(kept)
    found.propagate = False
    yield found, kept
    found.removeHandler(kept)
    found.filters.clear()


def test_kopf_success_lines_are_routine_and_failures_are_not():
    assert is_routine("Handler 'reconsume/reconcile' succeeded.")
    assert is_routine("Timer 'reconsume/poll' succeeded.")
    assert is_routine("Creation is processed: 1 succeeded; 0 failed.")
    assert not is_routine("Creation is processed: 0 succeeded; 1 failed.")
    assert not is_routine("Handler 'reconsume/reconcile' failed with an exception. Will retry.")


def test_a_routine_line_shows_only_where_debug_is_on_and_then_at_debug(logger):
    found, kept = logger
    found.addFilter(RoutineAtDebug())
    found.setLevel(logging.INFO)
    found.info("Timer 'reconsume/poll' succeeded.")
    found.info("Handler 'reconsume/reconcile' failed with an exception. Will retry.")
    assert [r.getMessage() for r in kept.records] == [
        "Handler 'reconsume/reconcile' failed with an exception. Will retry."
    ]
    found.setLevel(logging.DEBUG)
    found.info("Timer 'reconsume/poll' succeeded.")
    assert kept.records[-1].levelname == "DEBUG"


def test_a_fenced_bootstrap_producer_is_routine_and_other_fatal_lines_keep_their_level(logger):
    found, kept = logger
    found.addFilter(LibrdkafkaLevels())
    found.setLevel(logging.INFO)
    fenced = "FATAL [rdkafka#producer-3] Fatal error: Local: This instance has been fenced by a newer instance"
    found.critical(fenced)
    found.critical(
        "TXNERR [rdkafka#producer-3] Fatal transaction error: transactional producer fenced by newer producer instance"
    )
    found.critical("FATAL [rdkafka#producer-4] Fatal error: Broker: Cluster authorization failed")
    assert [r.levelname for r in kept.records] == ["INFO", "INFO", "CRITICAL"]
    found.setLevel(logging.WARNING)
    found.critical(fenced)
    assert len(kept.records) == 3, "a routine line is not shown where INFO is off"
    assert level_of(logging.WARNING, "Failed to resolve 'kafka-bootstrap.kafka:9092'") == logging.WARNING


def test_a_retriable_kafka_error_is_a_transient_wait_and_anything_else_a_reconcile_error():
    not_leader = KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    reason, message = failure_of(not_leader)
    assert reason == "KafkaUnavailable" and message.startswith("NOT_LEADER_FOR_PARTITION (retriable)")
    # Seen under load from a list_offsets of the operator's shared admin client: a cluster in motion too.
    assert failure_of(KafkaException(KafkaError(KafkaError.FENCED_LEADER_EPOCH)))[0] == "KafkaUnavailable"
    assert failure_of(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))[0] == "ReconcileError"
    assert failure_of(ValueError("a bug"))[0] == "ReconcileError"


def test_the_warning_of_a_closed_fenced_bootstrap_producer_is_one_info_line(logger):
    found, kept = logger
    found.addFilter(FencedAtInfo())
    found.setLevel(logging.INFO)
    text = one_line_warning(
        "Producer abort_transaction failed during close: Local: This instance has been fenced by a newer instance",
        RuntimeWarning,
        "replay_worker/replay/bootstrap.py",
        274,
        "            producer.close()\n",
    )
    assert "\n" not in text and text.startswith("RuntimeWarning: Producer abort_transaction failed")
    found.warning("%s", text + "\n  producer.close()\n")
    found.warning("something else")
    assert [(r.levelname, "\n" in r.getMessage()) for r in kept.records] == [("INFO", False), ("WARNING", False)]
