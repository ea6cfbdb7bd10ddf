"""Bad input on the protocol side (HANDOVER.md section 6, "Bad input"): a malformed handover record, a commit
mark of a newer format version, a filter the guard cannot evaluate. The guard never skips what it cannot
prove the replay covers, and it reports a problem naming the partition and the reason."""

from __future__ import annotations

import pytest

from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.guard.guard_book import GuardBook, ProblemReport
from replay_worker.protocol.guard_rules import ack_due
from replay_worker.protocol.handover import HandoverView
from replay_worker.protocol.wire import GuardInfo, HandoverInfo, ReplayInfo, StartInfo, decode, encode, encode_key

RID = "shop/fix/1"
GROUP = "orders-service"
KEY = ("orders", 0)
PAID = {"json": [{"path": "paid", "equals": True}]}
MATCH, OTHER = b'{"paid":true}', b'{"paid":false}'


def view(*records: tuple[bytes, bytes | None]) -> HandoverView:
    return HandoverView().apply_all(records)


def replay(flt: dict | None = None) -> tuple[bytes, bytes]:
    return encode(ReplayInfo(RID, "Handover", "reprise-fix", GROUP, ("orders",), PAID if flt is None else flt))


def start(offset: int) -> tuple[bytes, bytes]:
    return encode(StartInfo(RID, "orders", 0, offset))


def handover(offset: int) -> tuple[bytes, bytes]:
    return encode(HandoverInfo(RID, "orders", 0, offset, "caught-up"))


BAD_HANDOVER = (encode_key(RID, "handover", "orders", 0), b'{"v":2,"kind":"handover","offset":4}')


def released(
    v: HandoverView, committed: int | None = 0, mark: CommitMark | None = None
) -> tuple[GuardBook, int | None]:
    book = GuardBook()
    book.assign(KEY, committed, mark, ticket=1)
    return book, book.release(KEY, v.active_for(GROUP).get(KEY))


def judge(book: GuardBook, offsets: range, value: bytes = MATCH) -> list[bool]:
    return [book.judge(KEY, o, None, None, value) for o in offsets]


# -- a malformed handover record


def test_an_unreadable_handover_record_replaces_the_readable_one_and_is_a_problem() -> None:
    v = view(replay(), start(0), handover(4), BAD_HANDOVER)
    active = v.active_for(GROUP)[KEY]
    assert active.problem == "unreadable-handover-record:newer-version"
    assert v.malformed == 1
    assert encode_key(RID, "handover", "orders", 0) in v.replay(RID).live_keys  # a cleanup must tombstone it
    # A readable value for the key (or a tombstone) ends the problem.
    v.apply(*handover(4))
    assert v.active_for(GROUP)[KEY].problem is None and v.active_for(GROUP)[KEY].handover == 4


def test_the_guard_stops_skipping_and_re_reads_what_it_skipped_when_h_cannot_be_read() -> None:
    v = view(replay(), start(2))
    book, _ = released(v)
    assert judge(book, range(0, 6)) == [True, True, False, False, False, False]  # F = 2
    v.apply(*BAD_HANDOVER)
    seeks = book.apply(v.active_for(GROUP))
    assert seeks == {KEY: 2}  # nobody can prove the replay covers [2, 6): read again
    assert judge(book, range(2, 8)) == [True] * 6
    [report] = book.problem_reports()
    assert report == ProblemReport(RID, "orders", 0, "unreadable-handover-record:newer-version", None, 8)
    assert book.problem_reports() == []  # reported once


def test_a_malformed_start_record_means_nothing_is_skipped() -> None:
    v = view(replay(), (encode_key(RID, "start", "orders", 0), b'{"v":1,"kind":"start","offset":3}'))
    assert v.active_for(GROUP)[KEY].problem == "unreadable-start-record:bad-field"
    book, seek = released(v)
    assert seek is None and judge(book, range(0, 5)) == [True] * 5


def test_an_unreadable_replay_record_holds_its_partitions_without_skipping() -> None:
    later = encode(ReplayInfo("shop/fix/2", "Handover", "g2", GROUP, ("orders",), PAID))
    v = view(replay(), start(0), later, encode(StartInfo("shop/fix/2", "orders", 0, 0)))
    v.apply(encode_key(RID, "replay"), b"not json")
    active = v.active_for(GROUP)[KEY]
    assert (active.replay_id, active.problem) == (RID, "unreadable-replay-record:malformed-value")


def test_malformed_keys_and_advisory_records_are_only_counted() -> None:
    v = view(replay(), start(0), (b"garbage", b"{}"), (encode_key(RID, "guard", "orders", 0), b"{]"))
    assert v.malformed == 2
    assert v.active_for(GROUP)[KEY].problem is None


def test_a_value_with_a_non_integer_version_is_malformed_not_a_crash() -> None:
    v = view(replay(), start(0), (encode_key(RID, "handover", "orders", 0), b'{"v":"x","kind":"handover"}'))
    assert v.active_for(GROUP)[KEY].problem == "unreadable-handover-record:malformed-value"


# -- a commit mark of a newer format version


NEWER = '{"reprise":2,"replay":"shop/fix/1","skipped":[[1,6]]}'


def test_a_newer_mark_is_unusable_not_absent() -> None:
    mark = CommitMark.decode(NEWER)
    assert mark is not None and not mark.usable and mark.problem == "newer-version"
    assert mark.skip_from is None and mark.finished is None
    assert CommitMark.decode('{"reprise":1,"replay":"r","skip_from":"3"}').problem == "malformed"  # type: ignore[union-attr]
    assert CommitMark.decode('{"owner":"billing"}') is None  # someone else's


def test_a_newer_mark_counts_every_covered_record_from_s_as_skipped() -> None:
    # The previous owner (a newer guard) committed 6: it may have skipped covered records in [1, 6).
    v = view(replay(), start(1))
    book, seek = released(v, committed=6, mark=CommitMark.decode(NEWER))
    assert seek is None
    assert book.parts[KEY].rules.first_skipped == 1  # F := S
    assert book.service_store("orders", 0, 7).metadata == CommitMark(RID, skip_from=1).encode()
    v.apply(*handover(3))
    assert book.apply(v.active_for(GROUP)) == {KEY: 3}  # re-read [3, 6): nothing is lost
    [report] = book.problem_reports()
    assert report.problem == "unusable-commit-mark:newer-version" and report.replay_id == RID


def test_a_newer_mark_with_h_already_known_re_reads_from_h() -> None:
    v = view(replay(), start(1), handover(3))
    _, seek = released(v, committed=6, mark=CommitMark.decode(NEWER))
    assert seek == 3


def test_a_newer_mark_at_or_below_s_needs_nothing() -> None:
    v = view(replay(), start(8))
    book, seek = released(v, committed=6, mark=CommitMark.decode(NEWER))
    assert seek is None and book.parts[KEY].rules.first_skipped is None


def test_an_unusable_mark_never_allows_the_acknowledgement() -> None:
    assert not ack_due(3, 10, CommitMark.decode(NEWER))
    assert ack_due(3, 10, None)


# -- a filter the guard cannot evaluate


@pytest.mark.parametrize(
    "flt, code",
    [
        ({"json": [{"path": "paid", "regex": "t.*"}]}, "unevaluable-filter:bad-operator"),
        ({"fuzzy": {"name": "x"}}, "unevaluable-filter:unknown-field"),
        ({"keysFile": "/etc/reprise/keys.txt"}, "unevaluable-filter:keys-file-not-published"),
    ],
)
def test_an_unevaluable_filter_processes_every_record_and_reports(flt: dict, code: str) -> None:
    v = view(replay(flt), start(0))
    assert v.active_for(GROUP)[KEY].problem == code
    book, _ = released(v)
    assert judge(book, range(0, 4)) == [True] * 4
    assert judge(book, range(4, 6), OTHER) == [True] * 2
    [report] = book.problem_reports()
    assert (report.topic, report.partition, report.problem) == ("orders", 0, code)


# -- the guard record that carries the problem, and the log line


def test_the_guard_record_carries_the_problem_and_reads_back() -> None:
    record = GuardInfo(RID, "orders", 0, None, 8, "live-1", 5, "unevaluable-filter:bad-operator")
    key, value = encode(record)
    assert b'"problem":"unevaluable-filter:bad-operator"' in value
    assert decode(key, value)[1] == record
    # Without a problem the record is what it always was.
    assert b"problem" not in encode(GuardInfo(RID, "orders", 0, 2, 8, "live-1", 5))[1]
