"""Progress, ETA and drained: what the follow loop reports and when it may complete."""

from datetime import datetime, timedelta, timezone

from reprise_operator.rules.progress import (
    SETTLE_WINDOW_S,
    DrainClock,
    EtaWindow,
    PartitionView,
    looks_soon,
    progress_status,
    summarize,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_lag_counts_to_the_handover_target_not_the_moving_end():
    view = PartitionView("users", 0, start=100, end=10_000, position=400, target=500, handover_offset=500)
    assert (view.lag, view.processed, view.total, view.state) == (100, 300, 400, "Replaying")


def test_transaction_marker_does_not_block_drained():
    # end - committed stays 1 because the last offset is a commit marker; the consumer saw partition EOF.
    view = PartitionView("users", 0, start=0, end=101, position=100, at_end=True)
    assert view.lag == 1 and view.done and view.state == "Drained"


def test_handed_over_partition_is_done_whatever_the_lag():
    view = PartitionView("users", 0, start=0, end=50, position=10, target=60, handed_over=True)
    assert view.done and view.state == "HandedOver"


def test_eta_from_recent_rate():
    window = EtaWindow()

    def views(pos):
        return [PartitionView("t", 0, 0, 1000, pos)]

    summarize(views(0), window, T0)
    progress = summarize(views(100), window, T0 + timedelta(seconds=10))
    # 100 records in 10 s, 900 to go: 90 s.
    assert progress.eta_seconds == 90
    assert progress.percent == 10
    status = progress_status(progress, T0 + timedelta(seconds=10, microseconds=250_000), "1m30s")
    assert status["lag"] == 900 and status["etaSeconds"] == 90 and status["partitions"][0]["state"] == "Replaying"
    # Written as status stores it: second precision, the ETA for kubectl get, no position before the first commit.
    assert status["updatedAt"] == "2026-01-01T00:00:10Z" and status["eta"] == "1m30s"
    assert status["partitions"][0] == {"topic": "t", "partition": 0, "position": 100, "lag": 900, "state": "Replaying"}
    not_started = progress_status(summarize([PartitionView("t", 1, 0, 5, None)], EtaWindow(), T0), T0)
    assert not_started["partitions"][0] == {"topic": "t", "partition": 1, "lag": 5, "state": "Pending"}


def test_eta_unknown_without_movement():
    window = EtaWindow()
    summarize([PartitionView("t", 0, 0, 10, 5)], window, T0)
    assert summarize([PartitionView("t", 0, 0, 10, 5)], window, T0 + timedelta(seconds=5)).eta_seconds is None


def test_drain_clock_needs_the_full_hold_without_interruption():
    clock = DrainClock()
    hold = timedelta(seconds=30)
    assert not clock.observe(True, T0, hold)
    assert not clock.observe(True, T0 + timedelta(seconds=29), hold)
    assert not clock.observe(False, T0 + timedelta(seconds=31), hold)
    assert not clock.observe(True, T0 + timedelta(seconds=40), hold)
    assert clock.observe(True, T0 + timedelta(seconds=70), hold)


def test_a_replay_whose_last_records_are_due_within_two_polls_is_looked_at_soon():
    assert looks_soon(eta_seconds=3, poll_interval=5.0, finished_for=None, hold_left=None)
    # An early ETA counts the pods' start: up to two intervals is "soon".
    assert looks_soon(eta_seconds=10, poll_interval=5.0, finished_for=None, hold_left=None)
    assert not looks_soon(eta_seconds=11, poll_interval=5.0, finished_for=None, hold_left=None)
    assert not looks_soon(eta_seconds=None, poll_interval=5.0, finished_for=None, hold_left=None)


def test_a_replay_is_looked_at_soon_during_its_first_poll_interval_whatever_its_eta():
    # No rate before the pods read, and the first ones count their start: a replay that ends within its first
    # interval must not wait for the next poll.
    assert looks_soon(eta_seconds=None, poll_interval=5.0, finished_for=None, hold_left=None, following_for=0.0)
    assert looks_soon(eta_seconds=60, poll_interval=5.0, finished_for=None, hold_left=None, following_for=4.9)
    # After it, the ETA decides.
    assert not looks_soon(eta_seconds=None, poll_interval=5.0, finished_for=None, hold_left=None, following_for=5.0)
    assert not looks_soon(eta_seconds=60, poll_interval=5.0, finished_for=None, hold_left=None, following_for=5.0)
    assert looks_soon(eta_seconds=10, poll_interval=5.0, finished_for=None, hold_left=None, following_for=5.0)


def test_once_every_partition_is_finished_the_acknowledgements_are_awaited_soon_for_a_while_only():
    assert looks_soon(eta_seconds=None, poll_interval=5.0, finished_for=0.0, hold_left=None)
    assert looks_soon(eta_seconds=None, poll_interval=5.0, finished_for=SETTLE_WINDOW_S, hold_left=None)
    # A live side that does not answer is left to the poll, whatever the ETA says.
    assert not looks_soon(eta_seconds=0, poll_interval=5.0, finished_for=SETTLE_WINDOW_S + 0.1, hold_left=None)


def test_a_drained_replay_is_looked_at_soon_only_when_its_hold_ends_within_the_poll_interval():
    assert looks_soon(eta_seconds=0, poll_interval=5.0, finished_for=1.0, hold_left=0.0)
    assert looks_soon(eta_seconds=0, poll_interval=5.0, finished_for=1.0, hold_left=4.5)
    assert not looks_soon(eta_seconds=0, poll_interval=5.0, finished_for=1.0, hold_left=25.0)


def test_a_topic_still_being_written_is_not_drained_nor_100_percent_even_when_empty():
    """A LakeReplay whose Spark driver wrote nothing yet (or failed before writing) was shown 100%, lag 0 and
    every partition Drained (issue 32, item 3)."""
    views = [PartitionView("backfill", p, start=0, end=0, position=None, end_final=False) for p in range(12)]
    progress = summarize(views, EtaWindow(), T0)
    assert progress.percent == 0 and not progress.all_done
    assert {v.state for v in progress.partitions} == {"Pending"}
    status = progress_status(progress, T0)
    assert status["percent"] == 0 and "lag" not in status and "etaSeconds" not in status
    assert all("lag" not in p and p["state"] == "Pending" for p in status["partitions"])


def test_a_drain_that_kept_up_with_a_topic_still_being_written_is_replaying_below_100_percent():
    view = PartitionView("backfill", 0, start=0, end=500, position=500, end_final=False)
    progress = summarize([view], EtaWindow(), T0)
    assert (view.state, view.done, view.lag, progress.percent) == ("Replaying", False, 0, 99)
    final = PartitionView("backfill", 0, start=0, end=500, position=500)
    assert (final.state, final.done, summarize([final], EtaWindow(), T0).percent) == ("Drained", True, 100)
