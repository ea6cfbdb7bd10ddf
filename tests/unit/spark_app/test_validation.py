"""The end-of-run comparison of the lake's and the topic's per-day counts."""

from spark_app.progress import MemoryProgress, ProgressMismatch, check_identity
from spark_app.validation import DayInTopic, ValidationFailed, compare, failures

import pytest


def test_equal_counts_pass():
    checks = compare({"2024-01-01": 3, "2024-01-02": 5}, {"2024-01-01": DayInTopic(3), "2024-01-02": DayInTopic(5)})
    assert [c.day for c in checks] == ["2024-01-01", "2024-01-02"]
    assert failures(checks) == []


def test_every_kind_of_difference_is_a_failure_with_its_own_words():
    checks = compare(
        {"2024-01-01": 3, "2024-01-02": 5, "2024-01-03": 2},
        {
            "2024-01-01": DayInTopic(4, duplicates=1),
            "2024-01-02": DayInTopic(5, out_of_order=2),
            "2024-01-04": DayInTopic(1),
        },
    )
    bad = {c.day: c.describe() for c in failures(checks)}
    assert bad == {
        "2024-01-01": "day 2024-01-01: lake 3 records, topic 4: 1 more than in the lake; 1 duplicate(s)",
        "2024-01-02": "day 2024-01-02: lake 5 records, topic 5: 2 record(s) out of per-key order",
        "2024-01-03": "day 2024-01-03: lake 2 records, topic 0: 2 fewer than in the lake",
        "2024-01-04": "day 2024-01-04: lake 0 records, topic 1: 1 more than in the lake",
    }
    error = ValidationFailed(failures(checks), "t")
    assert str(error).splitlines()[0] == "validation failed: 4 day(s) of topic t differ from the lake"


def test_progress_of_another_replay_is_refused():
    progress = MemoryProgress()
    progress.claim({"source": "a", "topic": "t"})
    progress.claim({"source": "a", "topic": "t"})  # a retry of the same replay
    with pytest.raises(ProgressMismatch, match="topic was 't', now 'u'"):
        progress.claim({"source": "a", "topic": "u"})
    check_identity(None, {"source": "a"}, "x")  # a fresh folder belongs to nobody
