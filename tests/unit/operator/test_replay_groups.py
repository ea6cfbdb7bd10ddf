"""Which consumer groups a replay moves on purpose (`replay_groups`), and how the operator exports them."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from reprise_operator.shared import metrics
from reprise_operator.shared.constants import replay_group_name
from reprise_operator.rules.replay_groups import GroupUnderReplay, groups_under_replay


def reconsume(mode: str, **extra: str) -> dict:
    return {"mode": mode, "consumerGroup": "orders-svc", "topics": ["orders"], **extra}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("Rewind", [GroupUnderReplay("orders-svc", "live")]),
        ("Parallel", [GroupUnderReplay("reprise-shop-r1", "replay")]),
        ("Handover", [GroupUnderReplay("orders-svc", "live"), GroupUnderReplay("reprise-shop-r1", "replay")]),
    ],
)
def test_a_running_reconsume_moves_its_live_group_only_when_it_rewinds_or_hands_over(mode, expected) -> None:
    status = {"phase": "Running", "children": {"replayGroup": "reprise-shop-r1"}}
    assert groups_under_replay("Reconsume", "shop", "r1", reconsume(mode), status) == expected


def test_the_replay_group_is_the_one_in_status_else_the_spec_s_else_the_default_name() -> None:
    running = {"phase": "Running"}
    assert groups_under_replay("Reconsume", "shop", "r1", reconsume("Parallel", replayGroup="mine"), running) == [
        GroupUnderReplay("mine", "replay")
    ]
    assert groups_under_replay("Reconsume", "shop", "r1", reconsume("Parallel"), running) == [
        GroupUnderReplay(replay_group_name("shop", "r1"), "replay")
    ]


@pytest.mark.parametrize("phase", [None, "Pending", "Planning", "PlanReady", "Complete", "Failed"])
def test_no_group_is_under_replay_before_it_starts_or_once_it_is_over(phase) -> None:
    assert groups_under_replay("Reconsume", "shop", "r1", reconsume("Rewind"), {"phase": phase}) == []


@pytest.mark.parametrize("phase", ["Running", "Suspended", "Draining"])
def test_suspended_and_draining_replays_still_move_their_groups(phase) -> None:
    assert groups_under_replay("Reconsume", "shop", "r1", reconsume("Rewind"), {"phase": phase}) == [
        GroupUnderReplay("orders-svc", "live")
    ]


def test_lake_replay_drains_its_backfill_group_and_backfill_feeds_its_downstream_groups() -> None:
    running = {"phase": "Running"}
    lake = {"drainGroup": "lake-drain", "then": {"reconsume": {"consumerGroup": "orders-svc", "mode": "Handover"}}}
    assert groups_under_replay("LakeReplay", "shop", "l", lake, running) == [GroupUnderReplay("lake-drain", "drain")]
    backfill = {"downstreamGroups": ["billing", "search"]}
    assert groups_under_replay("Backfill", "shop", "b", backfill, {"phase": "Draining"}) == [
        GroupUnderReplay("billing", "downstream"),
        GroupUnderReplay("search", "downstream"),
    ]


def test_the_exported_series_names_group_role_and_resource_and_no_job_or_instance() -> None:
    collector = metrics.ReplayGroupCollector()
    collector.set("Reconsume", "shop", "r1", [("orders-svc", "live"), ("reprise-shop-r1", "replay")])
    collector.set("Backfill", "shop", "b", [])
    (family,) = collector.collect()
    assert [s.labels for s in family.samples] == [
        {"consumergroup": "orders-svc", "namespace": "shop", "role": "live", "kind": "Reconsume", "name": "r1"},
        {"consumergroup": "reprise-shop-r1", "namespace": "shop", "role": "replay", "kind": "Reconsume", "name": "r1"},
    ]
    assert {s.value for s in family.samples} == {1}
    collector.set("Reconsume", "shop", "r1", [])
    assert list(collector.collect())[0].samples == [], "a replay that is over leaves no series behind"


def test_forgetting_a_deleted_resource_drops_its_groups_from_the_endpoint() -> None:
    metrics.REPLAY_GROUPS.set("Reconsume", "shop", "gone", [("orders-svc", "live")])
    assert b'reprise_replay_consumer_group{consumergroup="orders-svc"' in generate_latest(metrics.REGISTRY)
    metrics.PHASES.forget("Reconsume", "shop", "gone")
    assert b'name="gone"' not in generate_latest(metrics.REGISTRY)


def test_default_replay_groups_of_two_namespaces_never_collide_and_stay_under_their_namespace_prefix() -> None:
    # With dashes, namespace a / name b-c and namespace a-b / name c were one group (security review M2).
    assert replay_group_name("a", "b-c") != replay_group_name("a-b", "c")
    assert replay_group_name("team-a", "fix") == "reprise.team-a.fix"
    # The ACL prefix reprise.team-a. does not reach namespace team-a-prod's groups.
    assert not replay_group_name("team-a-prod", "fix").startswith("reprise.team-a.")
    long = replay_group_name("team-a", "x" * 250)
    assert len(long) <= 200 and long.startswith("reprise.team-a.")
