"""Throttle: two token buckets, one second of burst at most."""

from replay_worker.replay.throttle import Throttle


def test_unlimited_never_waits() -> None:
    throttle = Throttle()
    assert throttle.unlimited and throttle.delay(10**6, 10**9, now=0.0) == 0.0


def test_records_per_second() -> None:
    throttle = Throttle(records_per_second=100)
    assert throttle.delay(100, 0, now=0.0) == 0.0  # the first second's budget
    assert throttle.delay(50, 0, now=0.0) == 0.5
    assert throttle.delay(50, 0, now=1.5) == 0.0  # 150 tokens refilled, 100 owed... balance back to 0


def test_bytes_per_second_and_the_slower_limit_wins() -> None:
    throttle = Throttle(records_per_second=1000, bytes_per_second=1000)
    throttle.delay(1, 1000, now=0.0)
    assert throttle.delay(1, 2000, now=0.0) == 2.0


def test_idle_time_does_not_build_a_burst() -> None:
    throttle = Throttle(records_per_second=10)
    throttle.delay(10, 0, now=0.0)
    assert throttle.delay(30, 0, now=100.0) == 2.0
