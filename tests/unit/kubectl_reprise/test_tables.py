"""The plugin's printed tables and its pure decisions: durations, the plan table, the rollback moves, the
plan's duration estimate, and which kind a word names."""

from __future__ import annotations

from datetime import datetime, timezone

from kubectl_reprise.connection import kind_named
from kubectl_reprise.controls import moves_table, rollback_moves
from kubectl_reprise.plan import ManifestPlan
from kubectl_reprise.tables import duration, get_table, plan_text, table
from reprise_operator.api import KINDS
from reprise_operator.rules.planning import PartitionPlan, Plan

NOW = datetime(2026, 11, 23, 20, 0, tzinfo=timezone.utc)


def test_durations_read_like_kubectls_ages():
    assert [duration(s) for s in (None, 5, 65, 120, 3600, 3 * 3600 + 61, 90000)] == [
        "-",
        "5s",
        "1m5s",
        "2m",
        "1h",
        "3h1m",
        "1d1h",
    ]


def test_tables_align_columns_like_kubectl():
    assert table(("A", "LONGER"), [("xx", 1), ("y", None)]) == "A    LONGER\nxx   1\ny"


def test_the_plan_table_has_a_row_per_partition_and_the_total():
    shown = {
        "partitions": [
            {
                "topic": "users",
                "partition": 0,
                "startOffset": 5,
                "endOffset": 15,
                "records": 10,
                "oldestTimestamp": "2026-11-23T19:00:00.000Z",
                "retentionRisk": "Safe",
            }
        ],
        "totalRecords": 10,
        "retentionRisk": "Safe",
    }
    rows = [line.split() for line in plan_text(shown, NOW).splitlines()]
    assert rows[1] == ["users", "0", "5", "15", "10", "2026-11-23T19:00:00.000Z", "1h", "Safe"]
    assert rows[2] == ["TOTAL", "10", "Safe"]


def test_the_estimate_is_bounded_by_the_largest_partition():
    parts = tuple(PartitionPlan("t", p, 0, n, None, False) for p, n in enumerate((1000, 100, 100)))
    found = ManifestPlan(
        "Reconsume", "r", "ns", "Parallel", None, Plan(parts, NOW), {}, consumers=3, rate_per_consumer=100
    )  # type: ignore[arg-type]
    assert found.estimated_seconds == 10  # one consumer reads the 1000-record partition
    found.consumers = 1
    assert found.estimated_seconds == 12


def test_rollback_moves_say_where_each_partition_goes_back_to():
    moves = rollback_moves({("t", 1): 40, ("t", 0): 30}, {("t", 0): 90})
    assert [(m.partition, m.now, m.restore) for m in moves] == [(0, 90, 30), (1, None, 40)]
    rows = [line.split() for line in moves_table(moves).splitlines()]
    assert rows[1:] == [["t", "0", "90", "30", "-60"], ["t", "1", "-", "40", "-"]]


def test_kind_words_as_kubectl_accepts_them():
    reconsume = next(k for k in KINDS if k.kind == "Reconsume")
    assert all(
        kind_named(w) is reconsume for w in ("rcs", "reconsume", "Reconsume", "reconsumes", "reconsumes.reprise.io")
    )
    assert kind_named("deployment") is None


def test_get_lists_phase_progress_and_eta():
    reconsume = next(k for k in KINDS if k.kind == "Reconsume")
    body = {
        "metadata": {"name": "r", "namespace": "ns", "creationTimestamp": "2026-11-23T19:58:00Z"},
        "spec": {"mode": "Handover"},
        "status": {"phase": "Running", "progress": {"percent": 41, "lag": 18, "etaSeconds": 185}},
    }
    rows = [line.split() for line in get_table([(reconsume, body)], NOW, all_namespaces=True).splitlines()]
    assert rows == [
        ["NAMESPACE", "NAME", "PHASE", "MODE", "PROGRESS", "LAG", "ETA", "AGE"],
        ["ns", "reconsume/r", "Running", "Handover", "41%", "18", "3m5s", "2m"],
    ]


def test_status_says_what_a_held_or_failed_check_needs():
    from kubectl_reprise.tables import verification_lines

    assert verification_lines("r", {}) == []
    held = {
        "phase": "Running",
        "verification": {"state": "Passed", "job": "r-verify-1", "run": 1},
        "conditions": [{"type": "CutoverApproved", "status": "False", "reason": "AwaitingCutover"}],
    }
    text = "\n".join(verification_lines("r", held))
    assert "verification Passed   Job r-verify-1 (run 1)" in text and "kubectl reprise approve r" in text
    failed = {
        "phase": "Failed",
        "verification": {
            "state": "Failed",
            "job": "r-verify-2",
            "run": 2,
            "message": "verification Job r-verify-2 failed: rows differ",
        },
        "conditions": [{"type": "Failed", "status": "True", "reason": "VerifyFailed"}],
    }
    text = "\n".join(verification_lines("r", failed))
    assert "rows differ" in text and "kubectl reprise reverify r" in text and "approve" not in text
