"""Filters: headers, key set, JSON fields; the byte shortcut never changes an answer."""

from __future__ import annotations

import json

import pytest

from replay_worker.filters import FilterSpec, FilterSpecError, RecordFilter, Undecodable, compile_filter


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


@pytest.mark.parametrize("spec", [{"json": [{"path": "a"}]}, {"json": [{"path": "a", "equals": 1, "in": [1]}]},
                                  {"headers": {"a": []}}, {"keys": "abc"}, {"jsn": []}, "[]", {"json": [{"path": "a", "in": []}]}])
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
