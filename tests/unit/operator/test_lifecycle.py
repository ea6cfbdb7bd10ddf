"""What every kind's reconcile shares, as pure rules: how long to wait after failures in a row."""

from reprise_operator.core.lifecycle import MAX_BACKOFF_POLLS, retry_delay


def test_retry_delay_doubles_per_failure_and_is_capped():
    assert retry_delay(0, 5.0) == 0.0
    assert [retry_delay(n, 5.0) for n in range(1, 6)] == [5.0, 10.0, 20.0, 40.0, 80.0]
    assert retry_delay(50, 5.0) == 5.0 * MAX_BACKOFF_POLLS == 150.0
