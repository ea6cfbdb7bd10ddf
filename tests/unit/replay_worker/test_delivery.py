"""Delivery: the forward mapping, dead letters, and finding poison records in a failing batch."""

from __future__ import annotations

import pytest

from replay_worker.replay.delivery import (
    DLQ_HEADERS,
    DeadLetters,
    ForwardDelivery,
    HandlerDelivery,
    HandlerLoadError,
    choose_partition_mapping,
    dead_letter_args,
    forward_args,
    load_handler,
)

from .fakes import FakeMessage, FakeProducer


def test_partition_mapping() -> None:
    assert choose_partition_mapping({"a": 12, "b": 12}, 12) == "same"
    assert choose_partition_mapping({"a": 12, "b": 6}, 12) == "key"
    assert choose_partition_mapping({"a": 12}, 24) == "key"


def test_forward_keeps_key_value_headers_timestamp_and_partition() -> None:
    args = forward_args("orders", 7, b"k", b"v", [("h", b"1")], (1, 1234), "copy", "same")
    assert args == {
        "topic": "copy",
        "key": b"k",
        "value": b"v",
        "headers": [("h", b"1")],
        "timestamp": 1234,
        "partition": 7,
    }
    by_key = forward_args("orders", 7, b"k", None, None, (0, -1), "copy", "key")
    assert by_key == {"topic": "copy", "key": b"k", "value": None}  # a tombstone stays one; no timestamp to keep


def test_the_fast_forward_loop_produces_what_forward_args_says() -> None:
    delivery = ForwardDelivery.__new__(ForwardDelivery)  # no real producer: only deliver() is exercised
    delivery.producer, delivery.target, delivery.mapping = FakeProducer(), "copy", "same"
    messages = [
        FakeMessage(_partition=p, _offset=o, _key=k, _value=v, _headers=h, _timestamp=ts)
        for p, o, k, v, h, ts in [
            (0, 1, b"a", b"1", None, (1, 10)),
            (3, 2, None, None, [("x", b"y")], (2, 20)),
            (1, 3, b"c", b"3", [], (0, -1)),
        ]
    ]
    outcome = delivery.deliver(messages)
    assert outcome.delivered == 3
    expected = [
        forward_args(m.topic(), m.partition(), m.key(), m.value(), m.headers(), m.timestamp(), "copy", "same")
        for m in messages
    ]
    assert delivery.producer.produced == expected


def test_dead_letters_carry_the_origin() -> None:
    args = dead_letter_args(
        "orders", 2, 99, b"k", b"v", [("reprise.error", b"old"), ("own", b"1")], (1, 5), "dlq", "r/1", "boom"
    )
    headers = dict(args["headers"])
    assert args["topic"] == "dlq" and args["key"] == b"k" and args["value"] == b"v" and "partition" not in args
    assert headers["own"] == b"1" and headers["reprise.error"] == b"boom"
    assert headers["reprise.source.offset"] == b"99" and headers["reprise.source.partition"] == b"2"
    assert set(DLQ_HEADERS) <= set(headers)


def test_handler_batches_and_poison_records_found_one_by_one() -> None:
    seen: list[list[int]] = []

    def handler(batch) -> None:
        seen.append([m.offset() for m in batch])
        if any(m.value() == b"poison" for m in batch):
            raise ValueError("cannot apply")

    producer = FakeProducer()
    delivery = HandlerDelivery(handler, DeadLetters("r/1", "dlq", producer), retries=1, backoff=0)
    batch = [FakeMessage(_offset=o, _value=b"poison" if o == 2 else b"ok") for o in range(4)]
    outcome = delivery.deliver(batch)
    assert (outcome.delivered, outcome.dead_lettered, outcome.poison_skipped) == (3, 1, 0)
    assert seen[0] == [0, 1, 2, 3]
    assert seen.count([2]) == 2  # one try and one retry
    assert [dict(p["headers"])["reprise.source.offset"] for p in producer.produced] == [b"2"]


def test_poison_without_a_dead_letter_topic_is_counted_and_skipped() -> None:
    def handler(batch) -> None:
        raise RuntimeError("always")

    delivery = HandlerDelivery(handler, DeadLetters("r/1", None, None), retries=0, backoff=0)
    outcome = delivery.deliver([FakeMessage(_offset=1), FakeMessage(_offset=2)])
    assert (outcome.delivered, outcome.poison_skipped) == (0, 2)


def test_load_handler() -> None:
    assert load_handler("json:dumps")([1]) == "[1]"
    with pytest.raises(HandlerLoadError, match="cannot import"):
        load_handler("no_such_module_x:f")
    with pytest.raises(HandlerLoadError, match="has no"):
        load_handler("json:nothing_here")
