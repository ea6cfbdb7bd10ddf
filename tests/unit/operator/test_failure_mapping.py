"""The reconcile's failure mapping (`lifecycle.outcome_of`): every exception a step may raise, and what the
status, the metrics and the log make of it."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from kubernetes.client.exceptions import ApiException

from reprise_operator.core.lifecycle import (
    MAX_BACKOFF_POLLS,
    Failure,
    Retry,
    StepOutcome,
    Waiting,
    outcome_of,
    retry_delay,
)
from reprise_operator.doors.handover_state import HandoverBehind
from reprise_operator.doors.kafka_admin import KafkaUnavailable
from reprise_operator.doors.kube import KubeUnavailable, NotOwned


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        # What a person must fix: the Waiting condition with the step's own reason, no backoff.
        (
            Waiting("SecretNotFound", "spec.kafka.configFrom.secretRef: create it"),
            StepOutcome("wait", "SecretNotFound", "spec.kafka.configFrom.secretRef: create it"),
        ),
        (
            NotOwned("Deployment x exists and is not Reprise's"),
            StepOutcome("wait", "NameTaken", "Deployment x exists and is not Reprise's"),
        ),
        # The resource cannot go on: Failed, with the step's reason.
        (
            Failure("TopicNotFound", "spec.topics: t does not exist"),
            StepOutcome("fail", "TopicNotFound", "spec.topics: t does not exist"),
        ),
        # Routine waiting: nothing in status.
        (Retry("pods not ready"), StepOutcome("routine", "Retry", "pods not ready")),
        (HandoverBehind("read to 5 of 9"), StepOutcome("routine", "HandoverBehind", "read to 5 of 9")),
        # Transient: counted, the Waiting condition, backoff; one line in the log.
        (KafkaUnavailable("brokers down"), StepOutcome("retry", "KafkaUnavailable", "brokers down")),
        (KubeUnavailable("API server 503"), StepOutcome("retry", "KubeUnavailable", "API server 503")),
    ],
)
def test_each_known_exception_has_its_outcome(exc: Exception, expected: StepOutcome) -> None:
    assert outcome_of(exc) == expected


def test_a_retriable_kafka_error_that_reached_the_reconcile_raw_is_a_transient_wait_without_a_traceback() -> None:
    outcome = outcome_of(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
    assert (outcome.action, outcome.reason, outcome.trace) == ("retry", "KafkaUnavailable", False)


def test_an_unexpected_error_is_a_reconcile_error_with_its_type_and_a_traceback() -> None:
    assert outcome_of(ValueError("a bug")) == StepOutcome("retry", "ReconcileError", "ValueError: a bug", trace=True)
    # A Kafka error that is not retriable is not made transient.
    denied = outcome_of(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    assert (denied.action, denied.reason, denied.trace) == ("retry", "ReconcileError", True)


def test_a_client_refusing_a_secret_setting_names_the_field_and_never_the_value() -> None:
    secret = "hunter2-not-for-status"
    raw = KafkaException(
        KafkaError(KafkaError._INVALID_ARG, f'Invalid value "{secret}" for configuration property "sasl.mechanism"')
    )
    outcome = outcome_of(raw)
    assert (outcome.action, outcome.reason, outcome.trace) == ("retry", "InvalidKafkaSetting", False)
    assert outcome.message.startswith("spec.kafka.configFrom.secretRef: ")
    assert "sasl.mechanism" in outcome.message
    assert secret not in outcome.message


def test_a_kubernetes_api_error_that_reached_the_reconcile_raw_is_a_reconcile_error_with_a_traceback() -> None:
    # The doors turn timeouts and 5xx into KubeUnavailable; any other API answer (a 403 on a create the chart's
    # RBAC does not allow) is unexpected: it must reach the status with its type, and the log with its trace.
    outcome = outcome_of(ApiException(status=403, reason="Forbidden"))
    assert (outcome.action, outcome.reason, outcome.trace) == ("retry", "ReconcileError", True)
    assert outcome.message.startswith("ApiException: (403)") and "Forbidden" in outcome.message


def test_subclasses_map_like_their_base() -> None:
    class Quota(Waiting):
        pass

    class Gone(Failure):
        pass

    assert outcome_of(Quota("QuotaExceeded", "raise the quota")) == StepOutcome(
        "wait", "QuotaExceeded", "raise the quota"
    )
    assert outcome_of(Gone("TopicDeleted", "t was deleted")) == StepOutcome("fail", "TopicDeleted", "t was deleted")


@pytest.mark.parametrize(
    ("failures", "polls"),
    [(0, 0), (1, 1), (2, 2), (3, 4), (5, 16), (6, MAX_BACKOFF_POLLS), (60, MAX_BACKOFF_POLLS)],
)
def test_a_retried_failure_backs_off_doubling_up_to_the_cap(failures: int, polls: int) -> None:
    assert retry_delay(failures, poll_interval=10.0) == 10.0 * polls
