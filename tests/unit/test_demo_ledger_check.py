"""The demos' ledger check (examples/demo/exactly_once.py) holds exactly Reprise's guarantee: from F on no record
processed by both groups, nothing lost; a same-group repeat is reported apart and does not fail the handover."""

from __future__ import annotations

from examples.demo.exactly_once import PartitionLedger, check

# One partition: the live group was at 10 when the replay began; the replay redid 0..19 (its filter took
# them all) and handed over at H=20; the guard skipped 15..19 (F=15); live took 20..29.
LIVE = {o: 1 for o in [*range(0, 15), *range(20, 30)]}
REPLAY = {o: 1 for o in range(0, 20)}


def ledger(live=LIVE, replay=REPLAY, **kw) -> dict[int, PartitionLedger]:
    return {0: PartitionLedger(live=live, replay=replay, since=kw.pop("since", 10), end=30, handover=20, **kw)}


def test_an_exact_handover_passes_from_the_first_skipped_offset():
    verdict = check(ledger())
    assert verdict.first_skipped == {0: 15} and verdict.checked == 15
    assert verdict.ok and not verdict.both and not verdict.lost
    # The history the replay redid below F (10..14, above `since`) is no failure.
    assert verdict.applied == {"live": 15, "replay": 10}


def test_a_record_applied_by_both_groups_from_f_on_fails_even_below_the_handover_offset():
    verdict = check(ledger(live={**LIVE, 17: 1}))
    assert verdict.both == [(0, 17)] and not verdict.ok
    assert "1 applied by both groups" in verdict.lines("cause")[0]
    assert "partition 0 offset 17" in verdict.lines("cause")[0]


def test_a_record_nobody_applied_is_lost():
    live = {o: n for o, n in LIVE.items() if o != 25}
    verdict = check(ledger(live=live))
    assert verdict.lost == [(0, 25)] and not verdict.ok
    assert "1 lost" in verdict.lines("cause")[0]


def test_same_group_repeats_are_reported_apart_with_their_cause_and_do_not_fail():
    # The live group applied 20..24 twice: its commit was refused in a rebalance and the new owner re-read them.
    verdict = check(ledger(live={**LIVE, **{o: 2 for o in range(20, 25)}}))
    assert verdict.ok and verdict.repeats == {"live": 5, "replay": 0}
    lines = verdict.lines("the live group's commit failed 1 times while it rebalanced")
    assert len(lines) == 2 and "0 applied by both groups, 0 lost" in lines[0]
    assert "same group, not the handover: 5 records applied again by the live group" in lines[1]
    assert "commit failed 1 times while it rebalanced" in lines[1]


def test_redeliveries_the_service_recognised_are_counted_apart():
    verdict = check(ledger(redelivered=7))
    assert verdict.ok and verdict.redelivered == 7
    assert "7 deliveries of records the group had applied were recognised" in verdict.lines("ILLEGAL_GENERATION")[1]


def test_history_before_the_replay_and_an_earlier_replay_are_not_counted():
    # An earlier run's replay and the live group's history below `since` are left out of every count.
    verdict = check(ledger(replay={**REPLAY, 3: 2}))
    assert verdict.ok and verdict.repeats["replay"] == 0


def test_where_the_guard_skipped_nothing_the_check_starts_at_the_handover_offset():
    # The replay finished before the live group reached a record it covers: F is unknown, H counts.
    replay = {o: 1 for o in range(0, 15)}
    live = {o: 1 for o in range(0, 30)}
    verdict = check({0: PartitionLedger(live=live, replay=replay, since=10, end=30, handover=15)})
    assert verdict.first_skipped == {0: 15} and verdict.ok
    verdict = check({0: PartitionLedger(live=live, replay={**replay, 16: 1}, since=10, end=30, handover=15)})
    assert verdict.both == [(0, 16)]
