"""Reconsume's pure parts: what the follow step reports per partition, and the start it plans from."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from replay_worker.protocol.filters import FilterSpec
from replay_worker.protocol.handover import HandoverView
from replay_worker.protocol.wire import AckInfo, HandoverInfo, ProgressInfo, ReplayInfo, StartInfo, encode
from reprise_operator.api import Plan as PlanStatus
from reprise_operator.api import ReconsumeSpec
from reprise_operator.rules.planning import PlanError
from replay_worker.contract import PartitionFacts, epoch_ms
from reprise_operator.rules.planning import make_plan
from reprise_operator.kinds.reconsume.steps import (
    plan_from_status,
    plan_partitions_status,
    replay_drained,
    replay_views,
)
from reprise_operator.kinds.reconsume.rules import start_request, worker_filter

REPO = Path(__file__).resolve().parents[3]
RID = "billing/invoice-tax/1a2b3c4d"
NOW = datetime(2026, 11, 23, 19, 0, tzinfo=timezone.utc)


def spec(example: str = "reconsume-parallel.yaml", **changes) -> ReconsumeSpec:
    body = yaml.safe_load((REPO / "examples" / example).read_text())["spec"]
    body.update(changes)
    return ReconsumeSpec.model_validate(body)


def state(mode: str, *records):
    view = HandoverView()
    for record in (
        ReplayInfo(RID, mode, "replay-group", "live-group", ("invoices",), {}),
        StartInfo(RID, "invoices", 0, 100),
        StartInfo(RID, "invoices", 1, 100),
        *records,
    ):
        view.apply(*encode(record))
    return view.replay(RID)


PLAN = {("invoices", 0): (100, 900), ("invoices", 1): (100, 900)}
ENDS = {("invoices", 0): 1000, ("invoices", 1): 1000}


def test_parallel_partitions_that_reached_the_live_group_show_caught_up():
    # docs/reconsume.md and the CRD: Parallel partitions end CaughtUp; HandedOver is Handover's state.
    replay = state(
        "Parallel",
        HandoverInfo(RID, "invoices", 0, 700, "live-offset"),
        ProgressInfo(RID, "invoices", 0, 700),
        HandoverInfo(RID, "invoices", 1, 650, "live-offset"),
    )  # its progress record is not in yet
    views = replay_views(PLAN, ENDS, replay, "Parallel")
    assert [v.state for v in views] == ["CaughtUp", "CaughtUp"]
    assert all(v.done for v in views) and not any(v.handed_over for v in views)


def test_handover_partitions_are_handed_over_only_once_acknowledged():
    replay = state(
        "Handover",
        HandoverInfo(RID, "invoices", 0, 700, "caught-up"),
        ProgressInfo(RID, "invoices", 0, 700),
        AckInfo(RID, "invoices", 0, 700, 705),
        HandoverInfo(RID, "invoices", 1, 650, "caught-up"),
        ProgressInfo(RID, "invoices", 1, 650),
    )
    views = replay_views(PLAN, ENDS, replay, "Handover")
    assert [v.state for v in views] == ["HandedOver", "CaughtUp"]
    assert [v.handed_over for v in views] == [True, False]


def test_a_start_in_the_future_is_refused_with_the_field_named():
    ahead = spec(start={"timestamp": (NOW + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")})
    with pytest.raises(PlanError, match=r"spec.start.timestamp 2026-12-23T19:00:00Z is in the future") as raised:
        start_request(ahead, NOW)
    assert raised.value.reason == "StartInFuture"
    past = spec(start={"timestamp": "2026-11-01T00:00:00Z"})
    assert start_request(past, NOW).timestamp_ms == epoch_ms(datetime(2026, 11, 1, tzinfo=timezone.utc))


def test_a_replay_is_drained_only_once_every_partition_is_finished():
    one_done = state(
        "Parallel", HandoverInfo(RID, "invoices", 0, 700, "live-offset"), ProgressInfo(RID, "invoices", 0, 700)
    )
    assert not replay_drained(one_done, replay_views(PLAN, ENDS, one_done, "Parallel"))
    both = state(
        "Parallel",
        HandoverInfo(RID, "invoices", 0, 700, "live-offset"),
        ProgressInfo(RID, "invoices", 0, 700),
        HandoverInfo(RID, "invoices", 1, 650, "live-offset"),
        ProgressInfo(RID, "invoices", 1, 650),
    )
    assert replay_drained(both, replay_views(PLAN, ENDS, both, "Parallel"))


def test_a_replay_that_never_announced_itself_is_not_drained():
    view = HandoverView()  # no replay-info record: the workers have not started (or wrote to another topic)
    empty = view.replay(RID)
    views = replay_views(PLAN, ENDS, empty, "Parallel")
    assert not replay_drained(empty, views)
    assert not replay_drained(empty, views, {("invoices", 0): 0, ("invoices", 1): 0}, held=True)


def test_a_held_shadow_is_drained_at_the_live_group_not_at_a_finish():
    shadow = state("Parallel", ProgressInfo(RID, "invoices", 0, 700), ProgressInfo(RID, "invoices", 1, 640))
    views = replay_views(PLAN, ENDS, shadow, "Parallel")
    assert not replay_drained(shadow, views, None, held=True), "the live group's offsets are not known yet"
    assert replay_drained(shadow, views, {("invoices", 0): 700, ("invoices", 1): 640}, held=True)
    assert not replay_drained(shadow, views, {("invoices", 0): 700, ("invoices", 1): 641}, held=True)


def test_the_plan_in_status_names_the_retention_risk_and_reads_back_as_start_and_end():
    facts = [
        PartitionFacts("invoices", 0, log_start=0, end=900, log_start_timestamp_ms=1_700_000_000_000),
        PartitionFacts("invoices", 1, log_start=0, end=500, log_start_timestamp_ms=1_700_000_100_000),
    ]
    plan = make_plan(start_request(spec(start={"earliest": True}), NOW), facts, NOW)
    raw = plan_partitions_status(plan)
    assert raw["partitionCount"] == 2 and raw["retentionRisk"] == "Safe"
    assert [p["retentionRisk"] for p in raw["partitions"]] == ["Safe", "Safe"]
    assert raw["oldestTimestamp"] == "2023-11-14T22:13:20.000Z"
    assert plan_from_status(PlanStatus.model_validate(raw)) == {("invoices", 0): (0, 900), ("invoices", 1): (0, 500)}


def test_the_api_filter_becomes_the_workers_filter_spec():
    filtered = spec(
        filter={
            "headers": {"event-type": ["InvoiceIssued"]},
            "keys": ["k1"],
            "jsonFields": [{"path": "$.currency", "values": ["EUR"]}],
        }
    )
    expected = FilterSpec.parse(
        {"headers": {"event-type": ["InvoiceIssued"]}, "keys": ["k1"], "json": [{"path": "$.currency", "in": ["EUR"]}]},
        "spec.filter",
    )
    assert worker_filter(filtered.filter) == expected
    assert worker_filter(None) == FilterSpec()
