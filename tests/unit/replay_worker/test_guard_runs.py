"""The guard's run-at-once rules (`GuardPartition.skips_by_value`, `GuardBook.judge_run`) decide exactly what
`verdict` decides record by record, and leave the same state; where they decline, they change nothing."""

from __future__ import annotations

import copy
import json
import random

import pytest

from replay_worker.protocol.filters import FilterSpec, RecordFilter
from replay_worker.guard.guard_book import GuardBook
from replay_worker.protocol.guard_rules import ActiveHandover, GuardPartition, Verdict

RID = "shop/orders-fix/1a2b3c4d"
BY_KIND = RecordFilter.compile(FilterSpec.parse({"json": [{"path": "kind", "equals": "paid"}]}))
BY_HEADER = RecordFilter.compile(FilterSpec.parse({"headers": {"type": ["paid"]}}))


def value(rng: random.Random) -> bytes:
    kind = rng.choice(["paid", "open", "void"])
    return rng.choice(
        [
            json.dumps({"kind": kind, "n": 1}, separators=(",", ":")).encode(),
            json.dumps({"n": 1, "kind": kind}).encode(),
            b"not json",
            b'{"kind":"pa\\u0069d"}',
        ]
    )


def guard_in_state(rng: random.Random, flt: RecordFilter) -> GuardPartition:
    guard = GuardPartition("orders", 0)
    guard.restore(rng.choice([None, 0, 40]), None)
    if rng.random() < 0.8:
        start = rng.randrange(0, 60)
        handover = rng.choice([None, None, start + rng.randrange(0, 60)])
        guard.update(ActiveHandover(RID, start, None, flt))
        if handover is not None:
            guard.update(ActiveHandover(RID, start, handover, flt))
    if rng.random() < 0.2:
        guard.reread_until = rng.randrange(0, 120)
    return guard


def state(guard: GuardPartition) -> dict:
    return {k: v for k, v in vars(guard).items() if k not in ("matcher", "value_matcher", "reread_matcher")}


@pytest.mark.parametrize("seed", range(300))
def test_a_run_is_judged_as_its_records_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    guard = guard_in_state(rng, rng.choice([BY_KIND, BY_KIND, BY_HEADER]))
    first = rng.randrange(0, 120)
    offsets = sorted(rng.sample(range(first, first + 80), rng.randrange(1, 30)))  # gaps: compaction, markers
    values = [value(rng) for _ in offsets]
    one_by_one = copy.deepcopy(guard)
    before = state(guard)
    skips = guard.skips_by_value(offsets, values)
    if skips is None:
        assert state(guard) == before
        return
    expected = [one_by_one.verdict(o, None, None, v) is Verdict.SKIP for o, v in zip(offsets, values)]
    assert skips == expected
    assert state(guard) == state(one_by_one)


def test_runs_are_taken_in_the_common_cases() -> None:
    guard = GuardPartition("orders", 0)
    guard.update(ActiveHandover(RID, 10, None, BY_KIND))
    paid, open_ = b'{"kind":"paid"}', b'{"kind":"open"}'
    assert guard.skips_by_value([0, 1], [paid, paid]) == [False, False]  # before S
    assert guard.skips_by_value([10, 12, 13], [open_, paid, paid]) == [False, True, True]  # from S, H unknown
    assert guard.first_skipped == 12 and guard.seen_until == 14 and guard.skipped == 2
    assert guard.skips_by_value([9, 10], [paid, paid]) is None  # across S: record by record
    assert guard.skips_by_value([20], [b'x "paid"']) is None  # undecodable: covered, record by record


def test_the_book_hands_a_run_and_notes_what_was_handed() -> None:
    book = GuardBook()
    book.assign(("orders", 0), None, None, ticket=0)
    book.release(("orders", 0), ActiveHandover(RID, 0, None, BY_KIND))
    paid, open_ = b'{"kind":"paid"}', b'{"kind":"open"}'
    assert book.judge_run(("orders", 0), [0, 1, 2, 3], [open_, open_, paid, paid]) == [True, True, False, False]
    assert book.parts[("orders", 0)].handed_until == 2


@pytest.mark.parametrize("seed", range(50))
def test_a_run_judged_through_its_messages_offsets_is_judged_as_through_a_list(seed: int) -> None:
    from confluent_kafka import Message

    from replay_worker.guard.consumer import _RunOffsets

    rng = random.Random(seed)
    first = rng.randrange(0, 120)
    offsets = sorted(rng.sample(range(first, first + 80), rng.randrange(1, 30)))  # gaps: compaction, markers
    values = [value(rng) for _ in offsets]
    run = [Message(topic="orders", partition=0, offset=o, value=v) for o, v in zip(offsets, values)]
    lazy = _RunOffsets(run)
    assert len(lazy) == len(offsets) and list(lazy) == offsets and lazy[-1] == offsets[-1]
    assert lazy[1:3] == offsets[1:3]
    start = rng.randrange(0, 120)
    books = []
    for given in (offsets, lazy):
        book = GuardBook()
        book.assign(("orders", 0), None, None, ticket=0)
        book.release(("orders", 0), ActiveHandover(RID, start, None, BY_KIND))
        books.append((book, book.judge_run(("orders", 0), given, values)))
    (by_list, handed_list), (by_lazy, handed_lazy) = books
    assert handed_lazy == handed_list
    assert state(by_lazy.parts[("orders", 0)].rules) == state(by_list.parts[("orders", 0)].rules)
    assert by_lazy.parts[("orders", 0)].handed_until == by_list.parts[("orders", 0)].handed_until
