"""The watch view from statuses: per-partition fractions, the measured rate, ETA, handover state, and the
plain lines CI logs get."""

from __future__ import annotations

from kubectl_reprise.live_progress import RateMeter, bar, frame, plain_lines, redraw, terminal_lines


def body(
    phase: str, positions: dict[int, int | None], lag: dict[int, int], states: dict[int, str], eta=None, conditions=()
) -> dict:
    return {
        "status": {
            "phase": phase,
            "plan": {
                "partitions": [
                    {"topic": "users", "partition": p, "startOffset": 100, "endOffset": 1100} for p in positions
                ],
                "totalRecords": 1000 * len(positions),
            },
            "progress": {
                "partitions": [
                    {
                        "topic": "users",
                        "partition": p,
                        "lag": lag[p],
                        "state": states[p],
                        **({"position": pos} if pos is not None else {}),
                        **({"handoverOffset": 1100} if states[p] == "HandedOver" else {}),
                    }
                    for p, pos in positions.items()
                ],
                "processed": sum(max(0, (pos or 100) - 100) for pos in positions.values()),
                "totalRecords": 1000 * len(positions),
                "lag": sum(lag.values()),
                "percent": 10,
                **({"etaSeconds": eta} if eta is not None else {}),
            },
            "conditions": list(conditions),
        }
    }


def test_partitions_show_their_share_of_the_planned_range_and_their_handover_state():
    meter = RateMeter()
    f = frame(
        "reconsume/r",
        "Handover",
        body("Running", {0: 600, 1: None}, {0: 500, 1: 1000}, {0: "Replaying", 1: "Pending"}),
        0.0,
        meter,
    )
    assert [(p.name, p.processed, p.total, p.state) for p in f.partitions] == [
        ("users/0", 500, 1000, "Replaying"),
        ("users/1", 0, 1000, "Pending"),
    ]
    assert f.partitions[0].fraction == 0.5
    lines = terminal_lines(f)
    assert lines[0].startswith("reconsume/r  Running  Handover  10%  500/2,000 records  lag 1,500")
    assert "users/0" in lines[1] and "Replaying" in lines[1] and " 50.0%" in lines[1]


def test_the_rate_is_measured_over_successive_statuses_and_gives_the_eta_when_the_operator_has_none():
    meter = RateMeter()
    frame("reconsume/r", "Parallel", body("Running", {0: 100}, {0: 1000}, {0: "Replaying"}), 0.0, meter)
    f = frame("reconsume/r", "Parallel", body("Running", {0: 500}, {0: 600}, {0: "Replaying"}), 2.0, meter)
    assert f.rate == 200.0 and f.partitions[0].rate == 200.0
    assert f.eta_seconds == 3  # 600 records at 200/s
    with_eta = frame(
        "reconsume/r", "Parallel", body("Running", {0: 600}, {0: 500}, {0: "Replaying"}, eta=42), 3.0, meter
    )
    assert with_eta.eta_seconds == 42, "the operator's ETA wins"


def test_a_finished_replay_carries_its_outcome_message():
    done = body(
        "Failed",
        {0: None},
        {0: 1000},
        {0: "Pending"},
        conditions=[{"type": "Failed", "status": "True", "reason": "RetentionExceeded", "message": "gone"}],
    )
    f = frame("reconsume/r", "Parallel", done, 0.0, RateMeter())
    assert f.message == "RetentionExceeded: gone"


def test_plain_lines_print_only_what_changed():
    meter = RateMeter()
    first = frame("reconsume/r", "Handover", body("Running", {0: 600}, {0: 500}, {0: "Replaying"}), 0.0, meter)
    same = frame("reconsume/r", "Handover", body("Running", {0: 600}, {0: 500}, {0: "Replaying"}), 1.0, meter)
    handed = frame("reconsume/r", "Handover", body("Running", {0: 1100}, {0: 0}, {0: "HandedOver"}), 2.0, meter)
    assert len(plain_lines(None, first, "T")) == 2
    assert plain_lines(first, same, "T") == []
    lines = plain_lines(same, handed, "T")
    assert len(lines) == 2 and lines[1] == "T   users/0 HandedOver at 1100 (1,000/1,000, lag 0)"


def test_bars_fill_in_eighths_and_the_redraw_goes_back_over_the_previous_frame():
    assert bar(0.0, 4) == "····" and bar(1.0, 4) == "████"
    assert bar(0.5, 4) == "██··" and bar(1 / 32, 4) == "▏···"
    assert redraw(["a", "b"], 0) == "\x1b[Ja\nb\n"
    assert redraw(["a"], 2) == "\x1b[2F\x1b[Ja\n"
