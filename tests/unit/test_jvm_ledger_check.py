"""The independent reader of the cross-language Handover tests (tests/integration/operator/handover_scenario.py):
it must catch a record processed by both groups, a lost record, and a repeat no killed process explains."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.operator.handover_scenario import GroupLedger, assert_exactly_once, check_exactly_once

TOPIC = "users"


def write(folder: Path, name: str, lines: list[str], torn: str = "") -> None:
    (folder / name).write_text("".join(line + "\n" for line in lines) + torn)


def ledger(tmp_path: Path, live: list[int], replay: list[int], *, killed_replay: list[int] = ()) -> GroupLedger:
    # The live process's last line is torn (`L users 0 1` of `L users 0 12 live`): it does not count.
    write(tmp_path, "L-live-0-100.log", [f"L {TOPIC} 0 {o} live" for o in live], torn=f"L {TOPIC} 0 1")
    write(tmp_path, "replay-r-0-200.log", [f"R {TOPIC} 0 {o}" for o in replay])
    if killed_replay:
        write(tmp_path, "R-r-1-300.log", [f"R {TOPIC} 0 {o} replay" for o in killed_replay])
    return GroupLedger.read(tmp_path, TOPIC)


def test_an_exact_handover_passes_and_counts_from_the_first_skipped_offset(tmp_path):
    # Live processed 0..4, skipped 5..7 (the replay's), took 8..9 again; the replay did 0..7.
    verdict = check_exactly_once(ledger(tmp_path, [0, 1, 2, 3, 4, 8, 9], list(range(8))), {0: 10}, killed=set())
    assert verdict.first_skipped == {0: 5} and verdict.after_boundary == 5
    assert_exactly_once(verdict, per_killed_process=0)


def test_both_groups_and_lost_records_fail(tmp_path):
    both = check_exactly_once(ledger(tmp_path, [0, 1, 2, 3, 4, 7, 8, 9], list(range(8))), {0: 10}, killed=set())
    assert both.both == [(0, 7)]
    with pytest.raises(AssertionError, match="processed by both groups"):
        assert_exactly_once(both, per_killed_process=0)
    lost = check_exactly_once(ledger(tmp_path, [0, 1, 2, 3, 4, 9], list(range(8))), {0: 10}, killed=set())
    assert lost.lost == [(0, 8)]
    with pytest.raises(AssertionError, match="lost"):
        assert_exactly_once(lost, per_killed_process=0)


def test_repeats_count_only_inside_a_killed_process(tmp_path):
    # A replay process (PID 300) replayed 5 and 6, was killed before committing, and its successor did them again.
    found = ledger(tmp_path, [0, 1, 2, 3, 4, 8, 9], list(range(8)), killed_replay=[5, 6])
    explained = check_exactly_once(found, {0: 10}, killed={300})
    assert explained.repeats["R"] == 2 and explained.repeats_by_killed == {300: 2}
    assert_exactly_once(explained, per_killed_process=2)
    with pytest.raises(AssertionError, match="more than their uncommitted batches"):
        assert_exactly_once(explained, per_killed_process=1)
    unexplained = check_exactly_once(found, {0: 10}, killed=set())
    assert unexplained.unexplained_repeats == [("R", 0, 5), ("R", 0, 6)]
    with pytest.raises(AssertionError, match="repeats outside a killed process"):
        assert_exactly_once(unexplained, per_killed_process=2)


def test_go_lines_take_their_side_from_the_group_and_their_process_from_the_file(tmp_path):
    # The Go example writes `<group> <topic> <partition> <offset>` to `<group>-<pid>.log` (LEDGER_DIR).
    write(tmp_path, "live-g-100.log", [f"live-g {TOPIC} 0 {o}" for o in (0, 1, 2, 8, 9)], torn=f"live-g {TOPIC} 0")
    write(tmp_path, "reprise-x-h-200.log", [f"reprise-x-h {TOPIC} 0 {o}" for o in range(5)])
    write(tmp_path, "reprise-x-h-300.log", [f"reprise-x-h {TOPIC} 0 {o}" for o in (4, 5, 6, 7)])
    read = GroupLedger.read(tmp_path, TOPIC, "live-g")
    assert read.groups == {"live-g", "reprise-x-h"} and read.count("L") == 5 and read.count("R") == 9
    verdict = check_exactly_once(read, {0: 10}, killed={300})
    assert verdict.first_skipped == {0: 3} and not verdict.both and not verdict.lost
    assert verdict.repeats_by_killed == {300: 1}
    assert_exactly_once(verdict, per_killed_process=1)
    with pytest.raises(AssertionError, match="repeats outside a killed process"):
        assert_exactly_once(check_exactly_once(read, {0: 10}, killed=set()), per_killed_process=1)
