"""Filters: headers, key set, JSON fields; the byte shortcut never changes an answer."""

from __future__ import annotations

import json

import pytest

from replay_worker.protocol.filters import FilterSpec, FilterSpecError, RecordFilter, Undecodable, compile_filter


def f(spec) -> RecordFilter:
    return compile_filter(spec)


def value(**fields) -> bytes:
    return json.dumps(fields).encode()


def test_empty_filter_matches_everything() -> None:
    flt = f(None)
    assert flt.matches_everything and flt.matches(None, None, b"not json")


def test_headers_any_value_of_the_named_header() -> None:
    flt = f({"headers": {"type": ["OrderPaid", "OrderShipped"]}})
    assert flt.matches(None, [("type", b"OrderPaid")], None)
    assert flt.matches(None, [("x", b"1"), ("type", b"OrderShipped")], None)
    assert not flt.matches(None, [("type", b"OrderCreated")], None)
    assert not flt.matches(None, None, None)
    assert not flt.matches(None, [("type", None)], None)


def test_every_header_condition_must_hold() -> None:
    flt = f({"headers": {"type": "OrderPaid", "region": ["eu"]}})
    assert flt.matches(None, [("type", b"OrderPaid"), ("region", b"eu")], None)
    assert not flt.matches(None, [("type", b"OrderPaid")], None)


def test_key_set(tmp_path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("c\n\n d \n")
    flt = f({"keys": ["a", "b"], "keysFile": str(keys)})
    assert all(flt.matches(k, None, None) for k in (b"a", b"b", b"c", b"d"))
    assert not flt.matches(b"e", None, None) and not flt.matches(None, None, None)


def test_json_equals_in_and_exists() -> None:
    flt = f({"json": [{"path": "order.status", "equals": "paid"}, {"path": "amount", "in": [1, 2.5]}]})
    assert flt.matches(None, None, value(order={"status": "paid"}, amount=1.0))
    assert not flt.matches(None, None, value(order={"status": "paid"}, amount=3))
    assert not flt.matches(None, None, value(order={"status": "open"}, amount=1))
    assert not flt.matches(None, None, value(amount=1))
    exists = f({"json": [{"path": "items.0.sku", "exists": True}]})
    assert exists.matches(None, None, value(items=[{"sku": "x"}]))
    assert not exists.matches(None, None, value(items=[]))


def test_json_equality_keeps_booleans_apart_from_numbers() -> None:
    flt = f({"json": [{"path": "flag", "equals": 1}]})
    assert flt.matches(None, None, value(flag=1)) and flt.matches(None, None, value(flag=1.0))
    assert not flt.matches(None, None, value(flag=True))


def test_the_byte_shortcut_is_safe_with_escapes() -> None:
    flt = f({"json": [{"path": "status", "equals": "paid"}]})
    escaped = b'{"status": "p\\u0061id"}'
    assert flt.matches(None, None, escaped)
    assert not flt.matches(None, None, b'{"status": "open"}')  # rejected without parsing
    unicode = f({"json": [{"path": "name", "equals": "Zoë"}]})
    assert unicode.matches(None, None, json.dumps({"name": "Zoë"}, ensure_ascii=False).encode())
    assert unicode.matches(None, None, json.dumps({"name": "Zoë"}).encode())  # \\u00eb form


def test_the_shortcut_does_not_hide_undecodable_records() -> None:
    flt = f({"json": [{"path": "status", "equals": "paid"}]})
    assert not flt.matches(None, None, b"garbage")  # "paid" not in it: cannot match
    with pytest.raises(Undecodable):
        flt.matches(None, None, b'"paid" but not json')


def test_tombstones_do_not_match_json_conditions() -> None:
    assert not f({"json": [{"path": "a", "equals": "x"}]}).matches(b"k", None, None)
    assert f({"json": [{"path": "a", "exists": False}]}).matches(b"k", None, None)


@pytest.mark.parametrize(
    "spec",
    [
        {"json": [{"path": "a"}]},
        {"json": [{"path": "a", "equals": 1, "in": [1]}]},
        {"headers": {"a": []}},
        {"keys": "abc"},
        {"jsn": []},
        "[]",
        {"json": [{"path": "a", "in": []}]},
    ],
)
def test_bad_specs(spec) -> None:
    with pytest.raises(FilterSpecError):
        FilterSpec.parse(spec)


def test_spec_round_trip_and_inlined_keys(tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("k2\nk1\n")
    spec = FilterSpec.parse({"headers": {"t": ["a"]}, "keysFile": str(keys), "json": [{"path": "a.b", "in": [1, "x"]}]})
    assert FilterSpec.parse(spec.to_json()) == spec
    inlined = spec.to_obj(inline_keys=True)
    assert inlined["keys"] == ["k1", "k2"] and "keysFile" not in inlined


@pytest.mark.parametrize(
    "raw",
    [
        b'{"kind":"even","n":1}',
        b'{ "n" : 1 , "kind" : "even" }',
        b'{"a":{"kind":"odd"},"kind":"even"}',
        b'{"kind":"odd","kind":"even"}',
        b'{"kind":"even","kind":"odd"}',
        b'{"kind":["even"]}',
        b'["even"]',
        b'{"kind":"even"',
        b'{"kind":"even",}',
        b'{"x":"even"}',
        b'{"kind":"even\\u0021"}',
        b'"even"',
        b'{"n":{"deep":[1,2,{"kind":"even"}]},"kind":"odd"}',
        b'{"kind":"even","tail":broken}',
        b'{"kind":"odd","y":"even"}',
        b'{"kind":"kind"}',
        b'{"kind":"odd","note":"kind"}',
        b'{"kind":"","n":"even"}',
        b'{"kind":"even" }',
        b'{"kind":"odd","k\\u0069nd":"even"}',
        b'{"kind":"ev\\u0065n","n":1}',
        b'{"kind":"evens"}',
        b'{"kind":1,"x":"even"}',
        b'{"kind":null}',
    ],
)
def test_the_shortcuts_agree_with_a_full_parse(raw: bytes) -> None:
    """Whatever the walk answers "yes" to, a full parse answers "yes" or cannot parse (undecodable, which
    also counts as matching for the guard); every "no" is a full parse's answer."""
    flt = f({"json": [{"path": "kind", "equals": "even"}]})
    try:
        document = json.loads(raw)
        expected: bool | None = isinstance(document, dict) and document.get("kind") == "even"
    except ValueError:
        expected = None  # undecodable
    try:
        answer: bool | None = flt.matches(None, None, raw)
    except Undecodable:
        answer = None
    if expected is None:
        assert answer in (True, None)
    else:
        assert answer == expected


def test_nested_paths_walk_and_fall_back() -> None:
    flt = f({"json": [{"path": "order.status", "equals": "paid"}, {"path": "order.items.0.sku", "equals": "x"}]})
    assert flt.matches(None, None, value(order={"id": 1, "status": "paid", "items": [{"sku": "x"}]}))
    assert not flt.matches(None, None, value(order={"status": "paid", "items": [{"sku": "y"}]}))


def test_predicate_reads_only_what_it_needs() -> None:
    from .fakes import FakeMessage

    class Counting(FakeMessage):
        asked: int = 0

        def headers(self):
            Counting.asked += 1
            return super().headers()

    assert f({"json": [{"path": "a", "equals": 1}]}).predicate()(Counting(_value=b'{"a":1}'))
    assert Counting.asked == 0
    assert f({"headers": {"t": ["x"]}}).predicate()(Counting(_headers=[("t", b"x")]))
    assert Counting.asked == 1
    assert f(None).predicate()(Counting())


@pytest.mark.parametrize(
    "raw",
    [
        b'{"kind":"even"}',
        b'{"kind":"odd"}',
        b'{"kind":"ev\\u0065n"}',
        b'{"x":{"kind":"even"}}',
        b'{"kind":"even","kind":"odd"}',
        b'{"kind":"even","k\\u0069nd":"odd"}',
        b'{"kind":"evenx"}',
        b'{"kind":"even","x":{"kind":"odd"}}',
        b'{"kind":"even","n":1}',
        b'{"kind":"even" , "n":1}',
        b'["even"]',
        b'{"kind":["even"]}',
        b'{"kind":"even"',
        None,
        b'{"kind":"even2","y":"even"}',
    ],
)
def test_the_single_field_predicate_answers_like_matches(raw) -> None:
    from .fakes import FakeMessage

    flt = f({"json": [{"path": "kind", "equals": "even"}]})
    predicate = flt.predicate()

    def answer(fn):
        try:
            return fn()
        except Undecodable:
            return "undecodable"

    assert answer(lambda: predicate(FakeMessage(_value=raw))) == answer(lambda: flt.matches(None, None, raw))


def test_a_value_that_opens_with_the_field_as_another_string_does_not_match_on_either_side() -> None:
    """Decided from the bytes, even when the rest is not JSON: the guard (`matches`) and the replay (its
    predicate) run the same function, so neither side ever covers a record the other leaves."""
    from .fakes import FakeMessage

    flt = f({"json": [{"path": "kind", "equals": "even"}]})
    raw = b'{"kind":"odd","y":"even",broken'
    assert flt.matches(None, None, raw) is False
    assert flt.predicate()(FakeMessage(_value=raw)) is False
    assert flt.value_predicate() is not None and flt.value_predicate()(raw) is False


def test_value_predicate_only_without_key_or_header_conditions() -> None:
    assert f({"keys": ["k"], "json": [{"path": "a", "equals": "x"}]}).value_predicate() is None
    assert f({"headers": {"t": ["x"]}}).value_predicate() is None
    nested = f({"json": [{"path": "a.b", "equals": "x"}]}).value_predicate()
    assert nested is not None and nested(b'{"a":{"b":"x"}}') and not nested(b'{"a":{"b":"y"}}')


@pytest.mark.parametrize(
    "raw",
    [
        '{"a":"é"}'.encode("utf-8"),
        '{"a":"é"}'.encode("utf-8-sig"),
        '{"a":"é"}'.encode("utf-16"),
        '{"a":"é"}'.encode("utf-32-le"),
        b"[1, 2]",
        b" {}",
    ],
)
def test_parse_json_is_json_loads(raw: bytes) -> None:
    from replay_worker.protocol.filters import parse_json

    assert parse_json(raw) == json.loads(raw)
