"""The guard's bookkeeping: what it stores and commits, with which mark, and when it holds partitions."""

from __future__ import annotations

from replay_worker.protocol.filters import FilterSpec, RecordFilter
from replay_worker.guard.guard_book import GuardBook, Store
from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.protocol.guard_rules import ActiveHandover

KEY = ("orders", 0)
RID = "r/1"
ALL = RecordFilter.compile(FilterSpec())


def book(auto_store: bool = True, committed: int | None = 10, mark: CommitMark | None = None) -> GuardBook:
    b = GuardBook(auto_store=auto_store)
    b.assign(KEY, committed, mark, ticket=1)
    return b


def feed(b: GuardBook, offsets) -> list[int]:
    return [o for o in offsets if b.judge(KEY, o, None, None, b"{}")]


def test_a_new_partition_is_held_until_released() -> None:
    b = book()
    assert b.guarded and b.parts[KEY].ticket == 1
    assert b.release(KEY, None) is None
    assert not b.guarded


def test_unguarded_batches_store_the_position_only_with_auto_store() -> None:
    b = book()
    b.release(KEY, None)
    assert b.handed_unguarded({KEY: 20}) == [Store("orders", 0, 20)]
    assert b.handed_unguarded({KEY: 20}) == []  # unchanged: nothing to store again
    assert b.handed_unguarded({KEY: -1001}) == []  # nothing read yet
    manual = book(auto_store=False)
    manual.release(KEY, None)
    assert manual.handed_unguarded({KEY: 20}) == []


def test_skipped_tail_is_stored_with_its_mark_and_committed_by_the_guard() -> None:
    b = book()
    b.release(KEY, ActiveHandover(RID, 12, None, ALL))
    assert feed(b, range(10, 16)) == [10, 11]
    store = b.after_batch(KEY)
    assert store == Store("orders", 0, 16, CommitMark(RID, skip_from=12).encode())
    assert b.take_guard_commits() == [store]
    assert b.take_guard_commits() == []


def test_service_stores_get_the_mark_and_the_guard_commits_what_librdkafka_would_not() -> None:
    b = book(auto_store=False)
    b.release(KEY, ActiveHandover(RID, 12, None, ALL))
    feed(b, range(10, 16))
    assert b.after_batch(KEY) is None  # the service has not stored 10 and 11 yet
    assert b.service_store("orders", 0, 12) == Store("orders", 0, 12, None)
    tail = b.after_batch(KEY)
    assert tail is not None and tail.offset == 16
    store = b.service_store("orders", 0, 16)
    assert store.metadata == CommitMark(RID, skip_from=12).encode()
    # Equal to what the guard stored before: librdkafka would not commit it again, so the guard does.
    assert b.take_guard_commits() == [store]
    assert b.take_guard_commits() == []
    above = b.service_store("orders", 0, 20)
    assert above.offset == 20 and b.take_guard_commits() == []  # the service's own commit carries this one


def test_handover_seek_back_resets_what_is_stored() -> None:
    b = book()
    b.release(KEY, ActiveHandover(RID, 12, None, ALL))
    feed(b, range(10, 20))
    b.after_batch(KEY)
    seeks = b.apply({KEY: ActiveHandover(RID, 12, 15, ALL)})
    assert seeks == {KEY: 15}
    assert b.parts[KEY].stored_until == 15
    assert feed(b, range(15, 17)) == [15, 16]
    assert b.after_batch(KEY) == Store("orders", 0, 17, CommitMark(RID, reread_until=20).encode())


def test_floor_commit_and_pending_acks() -> None:
    b = book(committed=30)
    b.release(KEY, ActiveHandover(RID, 0, 30, ALL))
    assert b.pending_acks() == {KEY: (RID, 30)}
    floors = b.floor_commits(lambda key: 30)
    assert floors == [Store("orders", 0, 30)]
    b.floor_done(floors[0])
    assert b.floor_commits(lambda key: 30) == []


def test_skip_reports_only_when_seen_moves() -> None:
    b = book()
    b.release(KEY, ActiveHandover(RID, 0, None, ALL))
    feed(b, range(10, 13))
    assert [(r.first_skipped, r.seen_until) for r in b.skip_reports()] == [(10, 13)]
    assert b.skip_reports() == []


def test_a_plain_commit_sends_every_stored_offset_with_its_mark() -> None:
    b = book()
    b.release(KEY, ActiveHandover(RID, 12, None, ALL))
    feed(b, range(10, 20))
    b.after_batch(KEY)
    assert b.stored_offsets() == [Store("orders", 0, 20, CommitMark(RID, skip_from=12).encode())]
    assert b.take_guard_commits() == []  # the plain commit carried it
    b.apply({KEY: ActiveHandover(RID, 12, 15, ALL)})
    feed(b, range(15, 17))
    b.after_batch(KEY)
    # Below what was committed: sent explicitly all the same, with the re-read mark.
    assert b.stored_offsets() == [Store("orders", 0, 17, CommitMark(RID, reread_until=20).encode())]
