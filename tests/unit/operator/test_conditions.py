"""The condition setter: transitions move lastTransitionTime, repeats do not."""

from datetime import datetime, timezone

import pytest

from reprise_operator.rules.conditions import find, is_true, set_condition


def clock_at(hour: int):
    return lambda: datetime(2026, 1, 1, hour, tzinfo=timezone.utc)


def test_new_condition_gets_transition_time_and_generation():
    conditions = set_condition([], "PlanReady", "True", "PlanComputed", "12 partitions", 3, clock=clock_at(1))
    assert conditions == [
        {
            "type": "PlanReady",
            "status": "True",
            "reason": "PlanComputed",
            "message": "12 partitions",
            "lastTransitionTime": "2026-01-01T01:00:00Z",
            "observedGeneration": 3,
        }
    ]


def test_same_status_keeps_transition_time_but_updates_message():
    first = set_condition([], "Running", "True", "ConsumersStarted", "a", clock=clock_at(1))
    second = set_condition(first, "Running", "True", "ConsumersStarted", "b", clock=clock_at(2))
    assert second[0]["lastTransitionTime"] == "2026-01-01T01:00:00Z"
    assert second[0]["message"] == "b"
    assert first[0]["message"] == "a", "the input list must not be modified"


def test_flip_moves_transition_time_and_keeps_other_conditions():
    conditions = set_condition([], "Running", "True", "ConsumersStarted", "", clock=clock_at(1))
    conditions = set_condition(conditions, "PlanReady", "True", "PlanComputed", "", clock=clock_at(1))
    flipped = set_condition(conditions, "Running", "False", "Suspended", "", clock=clock_at(5))
    assert find(flipped, "Running")["lastTransitionTime"] == "2026-01-01T05:00:00Z"
    assert is_true(flipped, "PlanReady")
    assert not is_true(flipped, "Running")
    assert [c["type"] for c in flipped] == ["Running", "PlanReady"]


@pytest.mark.parametrize("reason", ["", "two words", "lowerCase", "With-Dash"])
def test_reason_must_be_one_camel_case_word(reason):
    with pytest.raises(ValueError):
        set_condition([], "Failed", "True", reason, "")
