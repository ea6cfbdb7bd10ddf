"""Write units, resume decisions, slices and pacing: what a run writes, in which order, how fast."""

import pytest

from spark_app.plan import Pacer, plan_writes, slices_for

COUNTS = {"2024-01-01": 400, "2024-01-02": 300, "2024-01-03": 0, "2024-01-04": 900, "2024-01-05": 100}


def test_days_are_grouped_in_order_up_to_the_limit_and_empty_days_are_left_out():
    plan = plan_writes(COUNTS, done=set(), started=set(), max_records_per_write=800)
    assert [u.days for u in plan.units] == [("2024-01-01", "2024-01-02"), ("2024-01-04",), ("2024-01-05",)]
    assert [u.records for u in plan.units] == [700, 900, 100]  # a day over the limit is a unit of its own
    assert plan.records == 1700
    assert all(u.slices == 1 and u.resume == () for u in plan.units)


def test_done_days_are_skipped_and_started_ones_resume():
    plan = plan_writes(
        COUNTS, done={"2024-01-01", "2024-01-02"}, started={"2024-01-01", "2024-01-04"}, max_records_per_write=10_000
    )
    assert plan.already_written == ("2024-01-01", "2024-01-02")
    assert [u.days for u in plan.units] == [("2024-01-04", "2024-01-05")]
    assert plan.units[0].resume == ("2024-01-04",)


def test_everything_done_means_nothing_to_write():
    plan = plan_writes(COUNTS, done=set(COUNTS), started=set(COUNTS), max_records_per_write=10)
    assert plan.units == () and plan.records == 0


def test_a_rate_limit_cuts_units_into_slices_of_about_rate_times_seconds():
    plan = plan_writes(
        COUNTS, done=set(), started=set(), max_records_per_write=10_000, max_records_per_second=100, slice_seconds=2.0
    )
    assert plan.units[0].records == 1700
    assert plan.units[0].slices == 9  # ceil(1700 / 200)
    assert slices_for(10, 0, 5.0) == 1
    assert slices_for(0, 100, 5.0) == 1
    assert slices_for(10, 1, 0.1) == 10  # never less than one record per slice


def test_unit_limit_must_be_positive():
    with pytest.raises(ValueError):
        plan_writes(COUNTS, set(), set(), max_records_per_write=0)


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_pacer_waits_until_the_records_written_fit_the_rate():
    clock = FakeClock()
    pacer = Pacer(100, clock=clock, sleep=clock.sleep)
    pacer.begin()
    clock.now += 0.5  # the first 200 records took half a second: wait until 2 s after the start
    assert pacer.wrote(200) == pytest.approx(1.5)
    clock.now += 3.0  # a slow write: already behind the rate, no wait
    assert pacer.wrote(200) == 0.0
    assert pacer.written == 400 and pacer.waited == pytest.approx(1.5)


def test_pacer_without_a_rate_never_waits():
    clock = FakeClock()
    pacer = Pacer(0, clock=clock, sleep=clock.sleep)
    assert pacer.wrote(10**9) == 0.0 and clock.slept == []
