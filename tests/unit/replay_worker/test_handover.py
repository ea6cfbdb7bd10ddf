"""The handover protocol as data: record format, the view, the replay's stop rule and the guard's rules."""

from __future__ import annotations

import json

import pytest

from replay_worker.protocol.filters import FilterSpec, RecordFilter
from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.protocol.finish_rules import record_ends_partition, replay_finish
from replay_worker.protocol.guard_rules import ActiveHandover, GuardPartition, Verdict, ack_due
from replay_worker.protocol.handover import HandoverView
from replay_worker.protocol.wire import (
    AckInfo,
    GuardInfo,
    HandoverFormatError,
    HandoverInfo,
    ReplayInfo,
    ResultInfo,
    StartInfo,
    decode,
    decode_key,
    encode,
    encode_key,
)

RID = "shop/orders-fix/1a2b3c4d"
EVERYTHING = RecordFilter.compile(FilterSpec())


def replay_info(mode: str = "Handover", live: str | None = "orders-service", flt: dict | None = None) -> ReplayInfo:
    return ReplayInfo(RID, mode, "reprise-shop-orders-fix", live, ("orders",), flt or {}, 1)


def view_of(*records) -> HandoverView:
    view = HandoverView()
    for record in records:
        view.apply(*encode(record))
    return view


# -- format


def test_keys_are_json_arrays_and_survive_slashes() -> None:
    assert encode_key(RID, "start", "orders", 3) == b'["shop/orders-fix/1a2b3c4d","start","orders",3]'
    assert encode_key(RID, "replay") == b'["shop/orders-fix/1a2b3c4d","replay"]'
    key = decode_key(encode_key(RID, "ack", "orders", 0))
    assert (key.replay_id, key.kind, key.topic, key.partition) == (RID, "ack", "orders", 0)


@pytest.mark.parametrize(
    "record",
    [
        replay_info(flt={"keys": ["a"]}),
        StartInfo(RID, "orders", 3, 120, None, None, True, 5),
        StartInfo(RID, "orders", 1, 0, 500, None, False, 5),
        HandoverInfo(RID, "orders", 3, 900, "caught-up", "worker-1", 6),
        GuardInfo(RID, "orders", 3, 850, 901, "live-a", 7),
        AckInfo(RID, "orders", 3, 900, 905, "live-a", 8),
        ResultInfo(RID, {"missing": ["k"]}, 9),
    ],
)
def test_records_round_trip(record) -> None:
    key, value = encode(record)
    body = json.loads(value)
    assert body["v"] == 1 and body["replay_id"] == RID and "kind" in body
    assert decode(key, value)[1] == record


def test_tombstones_and_malformed_records() -> None:
    key, _ = encode(HandoverInfo(RID, "orders", 0, 5, "x"))
    assert decode(key, None)[1] is None
    with pytest.raises(HandoverFormatError):
        decode(b"not-json", b"{}")
    with pytest.raises(HandoverFormatError):
        decode(key, b'{"kind":"ack"}')  # kind disagrees with the key
    with pytest.raises(HandoverFormatError):
        decode(key, b'{"v":2,"kind":"handover"}')  # from a newer format
    view = HandoverView()
    view.apply(b"garbage", b"{}")
    assert view.malformed == 1 and view.replays == {}


# -- the view


def test_partition_states_and_completion() -> None:
    records = [replay_info(), StartInfo(RID, "orders", 0, 10), StartInfo(RID, "orders", 1, 20)]
    view = view_of(*records)
    replay = view.replay(RID)
    assert replay.bootstrapped and not replay.all_handed_over
    assert replay.partitions[("orders", 0)].state == "replaying"
    view.apply(*encode(HandoverInfo(RID, "orders", 0, 50, "caught-up")))
    view.apply(*encode(HandoverInfo(RID, "orders", 1, 60, "end-of-partition")))
    replay = view.replay(RID)
    assert replay.all_handed_over and not replay.complete  # Handover mode waits for the acknowledgements
    view.apply(*encode(AckInfo(RID, "orders", 0, 50, 55)))
    view.apply(*encode(AckInfo(RID, "orders", 1, 59, 59)))  # an ack of another H does not count
    assert not view.replay(RID).complete
    view.apply(*encode(AckInfo(RID, "orders", 1, 60, 61)))
    assert view.replay(RID).complete
    assert view.replay(RID).partitions[("orders", 1)].state == "acknowledged"
    assert view.replay(RID).handover_offsets() == {("orders", 0): 50, ("orders", 1): 60}


def test_parallel_replays_complete_without_acks() -> None:
    view = view_of(
        replay_info("Parallel"), StartInfo(RID, "orders", 0, 0), HandoverInfo(RID, "orders", 0, 9, "live-offset")
    )
    assert view.replay(RID).complete


def test_tombstoning_every_key_removes_the_replay() -> None:
    records = [replay_info(), StartInfo(RID, "orders", 0, 10), HandoverInfo(RID, "orders", 0, 12, "x")]
    view = view_of(*records)
    keys = sorted(view.replay(RID).live_keys)
    assert len(keys) == 3
    for key in keys:
        view.apply(key, None)
    assert RID not in view.replays


def test_active_for_a_live_group() -> None:
    other = ReplayInfo("other", "Handover", "g2", "orders-service", ("orders",), {}, 1)
    view = view_of(
        replay_info(flt={"headers": {"t": ["x"]}}),
        StartInfo(RID, "orders", 0, 10),
        other,
        StartInfo("other", "orders", 0, 3),
        StartInfo("other", "orders", 1, 3),
        ReplayInfo("par", "Parallel", "g3", "orders-service", ("orders",), {}, 1),
        StartInfo("par", "orders", 2, 0),
    )
    active = view.active_for("orders-service")
    assert active[("orders", 0)].replay_id == RID  # the earliest replay wins a partition
    assert active[("orders", 1)].replay_id == "other"
    assert ("orders", 2) not in active  # Parallel replays do not involve the guard
    assert active[("orders", 0)].filter.matches(None, [("t", b"x")], None)
    assert view.active_for("someone-else") == {}


# -- commit marks


def test_commit_marks_round_trip_and_ignore_foreign_metadata() -> None:
    for mark in (CommitMark(RID, finished="caught-up"), CommitMark(RID, skip_from=5), CommitMark(RID, reread_until=9)):
        assert CommitMark.decode(mark.encode()) == mark
    assert CommitMark.decode(None) is None and CommitMark.decode("") is None
    assert CommitMark.decode("service-notes") is None and CommitMark.decode('{"other":1}') is None


def test_ack_due() -> None:
    assert ack_due(100, 100, None)
    assert ack_due(100, 150, CommitMark(RID, finished="x"))
    assert not ack_due(100, 99, None)
    assert not ack_due(100, None, None)
    assert not ack_due(100, 150, CommitMark(RID, skip_from=90))
    assert not ack_due(100, 120, CommitMark(RID, reread_until=130))


# -- the replay's stop rule


@pytest.mark.parametrize(
    "mode, position, kwargs, expected",
    [
        ("Drain", 10, {"at_end": True}, "end-of-partition"),
        ("Drain", 10, {"at_end": False}, None),
        ("Drain", 10, {"end_offset": 10}, "end-bound"),
        ("Drain", 9, {"end_offset": 10, "at_end": True}, None),  # bounded: the end of now is not the end
        ("Drain", 9, {"end_timestamp_ms": 5, "at_end": True}, None),
        ("Parallel", 50, {"live_committed": 50}, "live-offset"),
        ("Parallel", 49, {"live_committed": 50}, None),
        ("Parallel", 49, {"live_committed": 50, "at_end": True}, "end-of-partition"),
        ("Parallel", 49, {"live_committed": None, "at_end": False}, None),
        ("Handover", 70, {"live_committed": 60}, "caught-up"),
        ("Handover", 59, {"live_committed": 60}, None),
        ("Handover", 59, {"live_committed": 60, "at_end": True}, "end-of-partition"),
    ],
)
def test_replay_finish(mode, position, kwargs, expected) -> None:
    assert replay_finish(mode, position, **kwargs) == expected


def test_record_ends_partition() -> None:
    assert record_ends_partition(10, None, 10, None)
    assert not record_ends_partition(10, None, 9, None)
    assert record_ends_partition(None, 1000, 3, 1000)
    assert not record_ends_partition(None, 1000, 3, 999)
    assert not record_ends_partition(None, 1000, 3, None)


# -- the guard's rules


def active(start: int, handover: int | None = None, flt: RecordFilter = EVERYTHING) -> ActiveHandover:
    return ActiveHandover(RID, start, handover, flt)


def run(guard: GuardPartition, offsets, matching=lambda o: True) -> list[int]:
    """Offsets processed (handed to the service)."""
    headers = lambda o: [("m", b"y" if matching(o) else b"n")]  # noqa: E731
    return [o for o in offsets if guard.verdict(o, None, headers(o), None) is Verdict.PROCESS]


MATCHING = RecordFilter.compile(FilterSpec.parse({"headers": {"m": ["y"]}}))


def test_no_replay_processes_everything() -> None:
    guard = GuardPartition("orders", 0)
    assert guard.update(None) is None
    assert run(guard, range(5)) == [0, 1, 2, 3, 4]


def test_skips_from_the_start_until_the_handover_then_processes() -> None:
    guard = GuardPartition("orders", 0)
    guard.update(active(start=3))
    assert run(guard, range(0, 6)) == [0, 1, 2]
    assert guard.first_skipped == 3
    assert guard.commit_mark(6) == CommitMark(RID, skip_from=3)
    assert guard.commit_mark(3) is None  # nothing skipped below 3
    # H beyond what the guard has seen: no seek, the rest of [S, H) is skipped as it comes.
    assert guard.update(active(start=3, handover=8)) is None
    assert run(guard, range(6, 11)) == [8, 9, 10]
    assert guard.commit_mark(11) is None


def test_seeks_back_when_it_skipped_past_the_handover() -> None:
    guard = GuardPartition("orders", 0)
    guard.update(active(start=0, flt=MATCHING))
    odd = lambda o: o % 2 == 1  # noqa: E731
    assert run(guard, range(10, 20), odd) == [10, 12, 14, 16, 18]  # evens do not match: processed
    assert guard.first_skipped == 11
    target = guard.update(active(start=0, handover=15, flt=MATCHING))
    assert target == 15
    assert guard.commit_mark(16) == CommitMark(RID, reread_until=20)
    # The re-read: matching records >= H now, non-matching ones were done the first time.
    assert run(guard, range(15, 22), odd) == [15, 17, 19, 20, 21]
    assert guard.reread_until is None


def test_handover_below_the_first_skip_seeks_to_the_first_skip() -> None:
    guard = GuardPartition("orders", 0)
    guard.update(active(start=0))
    run(guard, range(30, 40))
    assert guard.first_skipped == 30
    assert guard.update(active(start=0, handover=25)) == 30


def test_restore_from_a_skip_mark_and_hand_over() -> None:
    guard = GuardPartition("orders", 0)
    guard.restore(40, CommitMark(RID, skip_from=30))
    assert guard.update(active(start=10, handover=35)) == 35
    assert guard.reread_until == 40


def test_restore_from_a_reread_mark() -> None:
    guard = GuardPartition("orders", 0)
    guard.restore(36, CommitMark(RID, reread_until=40))
    guard.update(active(start=10, handover=35, flt=MATCHING))
    odd = lambda o: o % 2 == 1  # noqa: E731
    assert run(guard, range(36, 42), odd) == [37, 39, 40, 41]


def test_a_replay_removed_before_its_handover_makes_the_guard_reread_what_it_skipped() -> None:
    guard = GuardPartition("orders", 0)
    guard.update(active(start=0, flt=MATCHING))
    odd = lambda o: o % 2 == 1  # noqa: E731
    run(guard, range(0, 10), odd)
    assert guard.update(None) == 1
    assert run(guard, range(1, 12), odd) == [1, 3, 5, 7, 9, 10, 11]


def test_floor_commit_for_a_quiet_partition() -> None:
    guard = GuardPartition("orders", 0)
    guard.update(active(start=0))
    assert guard.floor_commit(50) is None  # H unknown
    guard.update(active(start=0, handover=50))
    assert guard.floor_commit(49) is None
    assert guard.floor_commit(50) == 50
    guard.floor_committed = True
    assert guard.floor_commit(60) is None
