"""Reconsume's pure parts: what the follow step reports per partition, and the start it plans from."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from replay_worker.handover import HandoverView
from replay_worker.wire import AckInfo, HandoverInfo, ProgressInfo, ReplayInfo, StartInfo, encode
from reprise_operator.api import ReconsumeSpec
from reprise_operator.planning import PlanError
from replay_worker.contract import epoch_ms
from reprise_operator.reconsume import replay_views, start_request

REPO = Path(__file__).resolve().parents[3]
RID = "billing/invoice-tax/1a2b3c4d"
NOW = datetime(2026, 11, 23, 19, 0, tzinfo=timezone.utc)


def spec(example: str = "reconsume-parallel.yaml", **changes) -> ReconsumeSpec:
    body = yaml.safe_load((REPO / "examples" / example).read_text())["spec"]
    body.update(changes)
    return ReconsumeSpec.model_validate(body)


def state(mode: str, *records):
    view = HandoverView()
    for record in (ReplayInfo(RID, mode, "replay-group", "live-group", ("invoices",), {}),
                   StartInfo(RID, "invoices", 0, 100), StartInfo(RID, "invoices", 1, 100), *records):
        view.apply(*encode(record))
    return view.replay(RID)


PLAN = {("invoices", 0): (100, 900), ("invoices", 1): (100, 900)}
ENDS = {("invoices", 0): 1000, ("invoices", 1): 1000}


def test_parallel_partitions_that_reached_the_live_group_show_caught_up():
    # docs/reconsume.md and the CRD: Parallel partitions end CaughtUp; HandedOver is Handover's state.
    replay = state("Parallel",
                   HandoverInfo(RID, "invoices", 0, 700, "live-offset"), ProgressInfo(RID, "invoices", 0, 700),
                   HandoverInfo(RID, "invoices", 1, 650, "live-offset"))  # its progress record is not in yet
    views = replay_views(PLAN, ENDS, replay, "Parallel")
    assert [v.state for v in views] == ["CaughtUp", "CaughtUp"]
    assert all(v.done for v in views) and not any(v.handed_over for v in views)


def test_handover_partitions_are_handed_over_only_once_acknowledged():
    replay = state("Handover",
                   HandoverInfo(RID, "invoices", 0, 700, "caught-up"), ProgressInfo(RID, "invoices", 0, 700),
                   AckInfo(RID, "invoices", 0, 700, 705),
                   HandoverInfo(RID, "invoices", 1, 650, "caught-up"), ProgressInfo(RID, "invoices", 1, 650))
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
