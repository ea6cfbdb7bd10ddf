"""The chart's limits on active resources (security review H4): which resource may start planning."""

from __future__ import annotations

from reprise_operator.rules.namespace_limit import ActiveResources, refusal


def test_the_refusal_names_the_limit_and_the_chart_value() -> None:
    per_namespace = refusal("team-a", 20, 25, 20, 200)
    assert per_namespace is not None
    assert "team-a" in per_namespace and "limits.maxActivePerNamespace=20" in per_namespace
    total = refusal("team-b", 0, 200, 20, 200)
    assert total is not None and "limits.maxActive=200" in total
    assert refusal("team-a", 19, 199, 20, 200) is None


def test_zero_is_no_limit() -> None:
    assert refusal("team-a", 10_000, 10_000, 0, 0) is None


def test_a_namespace_over_its_limit_waits_while_others_are_admitted() -> None:
    active = ActiveResources(per_namespace=2, total=10)
    assert active.admit("a1", "team-a") is None
    assert active.admit("a2", "team-a") is None
    assert active.admit("a3", "team-a") is not None
    assert active.admit("b1", "team-b") is None, "another namespace has its own slots"
    assert active.count("team-a") == 2 and active.count() == 3
    assert active.admit("a1", "team-a") is None, "an admitted resource stays admitted"
    active.release("a1")
    assert active.admit("a3", "team-a") is None, "a freed slot goes to the next one that asks"


def test_the_total_limit_holds_across_namespaces() -> None:
    active = ActiveResources(per_namespace=0, total=2)
    assert active.admit("a1", "team-a") is None
    assert active.admit("b1", "team-b") is None
    refused = active.admit("c1", "team-c")
    assert refused is not None and "limits.maxActive=2" in refused


def test_status_seen_at_start_counts_before_anything_is_admitted() -> None:
    active = ActiveResources(per_namespace=1, total=0)
    active.observe("a1", "team-a", "Running")  # active before a restart
    assert active.admit("a2", "team-a") is not None
    active.observe("a1", "team-a", "Complete")
    assert active.admit("a2", "team-a") is None
    active.observe("a2", "team-a", "Pending")  # Pending in status does not undo an admission in memory
    assert active.count("team-a") == 1
