"""filters.json: which records a replay's published filter covers (HANDOVER.md section 4).

Each case is a filter (as the `replay` record publishes it) and a record; the expected `result` is what
`filters.published_filter(...).matches` answers: `match`, `no-match`, or `undecodable` (a JSON condition
needs the value and it is not JSON: the replay dead-letters the record, the guard counts it as covered).
Invalid filters give a stable `code` and the `field` at fault.
"""

from __future__ import annotations

from typing import Any

from ..protocol.filters import FilterSpecError, Undecodable, published_filter
from ..protocol.json_limits import MAX_DEPTH, MAX_FILTER_VALUE_BYTES, MAX_INTEGER_DIGITS
from .encoding import Repeated, headers_to_json, to_json

Headers = list[tuple[str, bytes | None]] | None


def evaluate(spec: Any, key: bytes | None, headers: Headers, value: bytes | None) -> str:
    """The reference answer for one record (the filter must be valid)."""
    try:
        return "match" if published_filter(spec).matches(key, headers, value) else "no-match"
    except Undecodable:
        return "undecodable"


def _case(
    name: str, spec: Any, value: bytes | None, *, key: bytes | None = None, headers: Headers = None, note: str = ""
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if note:
        body["note"] = note
    body.update(
        {
            "filter": spec,
            "key": to_json(key),
            "headers": headers_to_json(headers),
            "value": to_json(value),
            "result": evaluate(spec, key, headers, value),
        }
    )
    return body


def _invalid(name: str, spec: Any, note: str = "") -> dict[str, Any]:
    try:
        published_filter(spec)
    except FilterSpecError as exc:
        body: dict[str, Any] = {"name": name}
        if note:
            body["note"] = note
        body.update({"filter": spec, "error": {"code": exc.code, "field": exc.field}})
        return body
    raise AssertionError(f"{name}: the filter was accepted")


PAID = {"json": [{"path": "status", "equals": "paid"}]}


def cases() -> list[dict[str, Any]]:
    c = _case
    return [
        # -- the empty filter
        c("empty filter matches a record", {}, b'{"a":1}', key=b"k"),
        c("empty filter matches a tombstone with a null key", {}, None),
        c("empty filter matches a value that is not JSON", {}, b"\xff\xfe not json"),
        # -- headers
        c(
            "header with an accepted value",
            {"headers": {"source": ["billing", "shop"]}},
            b"{}",
            headers=[("source", b"shop")],
        ),
        c("header with another value", {"headers": {"source": ["billing"]}}, b"{}", headers=[("source", b"crm")]),
        c("header absent", {"headers": {"source": ["billing"]}}, b"{}", headers=[("other", b"billing")]),
        c("record without headers", {"headers": {"source": ["billing"]}}, b"{}", headers=None),
        c("record with an empty header list", {"headers": {"source": ["billing"]}}, b"{}", headers=[]),
        c("header present with a null value", {"headers": {"source": ["billing"]}}, b"{}", headers=[("source", None)]),
        c(
            "header names are case-sensitive",
            {"headers": {"source": ["billing"]}},
            b"{}",
            headers=[("Source", b"billing")],
        ),
        c(
            "header values compare as bytes (a trailing space differs)",
            {"headers": {"source": ["billing"]}},
            b"{}",
            headers=[("source", b"billing ")],
        ),
        c(
            "header value that is not UTF-8",
            {"headers": {"source": ["billing"]}},
            b"{}",
            headers=[("source", b"bill\xffing")],
        ),
        c(
            "non-ASCII header value compared as its UTF-8 bytes",
            {"headers": {"region": ["zürich"]}},
            b"{}",
            headers=[("region", "zürich".encode())],
        ),
        c(
            "repeated header: any occurrence with an accepted value will do",
            {"headers": {"source": ["billing"]}},
            b"{}",
            headers=[("source", b"crm"), ("source", b"billing")],
        ),
        c(
            "header value given as a string (shorthand for a list of one)",
            {"headers": {"source": "billing"}},
            b"{}",
            headers=[("source", b"billing")],
        ),
        c(
            "two header conditions: both must hold",
            {"headers": {"source": ["billing"], "tenant": ["a"]}},
            b"{}",
            headers=[("source", b"billing")],
        ),
        c(
            "two header conditions, both hold",
            {"headers": {"source": ["billing"], "tenant": ["a"]}},
            b"{}",
            headers=[("tenant", b"a"), ("source", b"billing")],
        ),
        c(
            "header condition fails: the value is not parsed",
            {"headers": {"source": ["billing"]}, **PAID},
            b"not json",
            headers=[("source", b"crm")],
        ),
        # -- keys
        c("key in the set", {"keys": ["acct-1", "acct-2"]}, b"{}", key=b"acct-2"),
        c("key not in the set", {"keys": ["acct-1"]}, b"{}", key=b"acct-3"),
        c("null key with a key set", {"keys": ["acct-1"]}, b"{}", key=None),
        c("key compared as bytes: a prefix is not enough", {"keys": ["acct-1"]}, b"{}", key=b"acct-10"),
        c("key that is not UTF-8", {"keys": ["acct-1"]}, b"{}", key=b"acct-\xff"),
        c("empty key in a set holding the empty string", {"keys": [""]}, b"{}", key=b""),
        c("empty key set matches nothing", {"keys": []}, b"{}", key=b"acct-1"),
        c("non-ASCII key", {"keys": ["kunde-ä"]}, b"{}", key="kunde-ä".encode()),
        c("key outside the set: the value is not parsed", {"keys": ["acct-1"], **PAID}, b"not json", key=b"acct-9"),
        c(
            "key in the set and a value that is not JSON",
            {"keys": ["acct-1"], "json": [{"path": "n", "equals": 1}]},
            b"not json",
            key=b"acct-1",
        ),
        c(
            "key, header and JSON all hold",
            {"keys": ["acct-1"], "headers": {"source": ["billing"]}, **PAID},
            b'{"status":"paid"}',
            key=b"acct-1",
            headers=[("source", b"billing")],
        ),
        # -- JSON: equals a string (the common filter, and its fast path)
        c("compact JSON opening with the field: fast path, match", PAID, b'{"status":"paid","amount":12}'),
        c("compact JSON opening with the field: fast path, the whole object", PAID, b'{"status":"paid"}'),
        c("compact JSON opening with the field: fast path, another string", PAID, b'{"status":"pending","n":1}'),
        c("non-compact twin of the fast-path match", PAID, b'{ "status" : "paid" , "amount" : 12 }'),
        c("non-compact twin of the fast-path no-match", PAID, b'{ "status" : "pending", "n": 1 }'),
        c("field not first", PAID, b'{"amount":12,"status":"paid"}'),
        c("field not first, another string", PAID, b'{"amount":12,"status":"open","note":"paid"}'),
        c("the wanted string elsewhere only", PAID, b'{"status":"open","note":"paid"}'),
        c("the wanted string as a prefix of the field's value", PAID, b'{"status":"paid-later"}'),
        c("field absent", PAID, b'{"amount":12}'),
        c("field is a number", {"json": [{"path": "status", "equals": "1"}]}, b'{"status":1}'),
        c("field null", PAID, b'{"status":null}'),
        c(
            "duplicate member: the last one counts (wanted last)",
            {"json": [{"path": "kind", "equals": "even"}]},
            b'{"kind":"odd","kind":"even"}',
        ),
        c(
            "duplicate member: the last one counts (wanted first)",
            {"json": [{"path": "kind", "equals": "even"}]},
            b'{"kind":"even","kind":"odd"}',
        ),
        c("the field's name appears again inside a string", PAID, b'{"status":"paid","note":"\\"status\\" said"}'),
        c("a top-level JSON string holding the wanted text", PAID, b'"paid"'),
        c("a top-level JSON array", PAID, b'["status","paid"]'),
        c("field nested, not top-level", PAID, b'{"order":{"status":"paid"}}'),
        # -- escaped JSON strings
        c("the wanted string spelled with a \\u escape", PAID, b'{"status":"p\\u0061id"}'),
        c("a backslash elsewhere: parsed, no match", PAID, b'{"note":"a\\\\b","status":"pending"}'),
        c("a backslash elsewhere: parsed, match", PAID, b'{"note":"a\\\\b","status":"paid"}'),
        c(
            "wanted string with a quote (no byte shortcut)",
            {"json": [{"path": "s", "equals": 'say "hi"'}]},
            b'{"s":"say \\"hi\\""}',
        ),
        c("wanted string with a control character", {"json": [{"path": "s", "equals": "a\tb"}]}, b'{"s":"a\\tb"}'),
        c(
            "non-ASCII wanted string, raw UTF-8 in the value",
            {"json": [{"path": "city", "equals": "Zürich"}]},
            '{"city":"Zürich"}'.encode(),
        ),
        c(
            "non-ASCII wanted string, \\u escaped in the value",
            {"json": [{"path": "city", "equals": "Zürich"}]},
            b'{"city":"Z\\u00fcrich"}',
        ),
        # -- values that are not JSON
        c("not JSON and without the wanted bytes: no match (byte shortcut)", PAID, b"plain text"),
        c("not JSON but holding the wanted bytes: undecodable", PAID, b'status "paid" but not json'),
        c("truncated JSON after the wanted value: undecodable", PAID, b'{"status":"paid"'),
        c("fast path: compact prefix with the wanted value, rest not JSON: match", PAID, b'{"status":"paid",oops'),
        c(
            "fast path: compact prefix with another string, rest not JSON: no match",
            PAID,
            b'{"status":"open",oops "paid"',
        ),
        c("not JSON with a backslash: undecodable", PAID, b'{"status":"pa\\id'),
        c("not UTF-8: undecodable", {"json": [{"path": "n", "equals": 1}]}, b'{"n":1,"s":"\xff"}'),
        c(
            "not JSON, number condition (no byte shortcut): undecodable",
            {"json": [{"path": "n", "equals": 1}]},
            b"<xml/>",
        ),
        c("not JSON, exists condition: undecodable", {"json": [{"path": "n", "exists": False}]}, b"<xml/>"),
        c("empty value: undecodable", {"json": [{"path": "n", "exists": True}]}, b""),
        c("empty value without the wanted bytes: no match", PAID, b""),
        # -- tombstones
        c("tombstone and an equals condition", PAID, None, key=b"k"),
        c("tombstone and exists:false", {"json": [{"path": "status", "exists": False}]}, None),
        c("tombstone and exists:true", {"json": [{"path": "status", "exists": True}]}, None),
        c(
            "tombstone: every JSON condition must be exists:false",
            {"json": [{"path": "a", "exists": False}, {"path": "b", "exists": False}]},
            None,
        ),
        c(
            "tombstone: one condition is not exists:false",
            {"json": [{"path": "a", "exists": False}, {"path": "b", "equals": 1}]},
            None,
        ),
        c(
            "tombstone with a matching header and exists:false",
            {"headers": {"op": ["delete"]}, "json": [{"path": "a", "exists": False}]},
            None,
            headers=[("op", b"delete")],
        ),
        # -- JSON equality
        c("true does not equal 1", {"json": [{"path": "f", "equals": True}]}, b'{"f":1}'),
        c("1 does not equal true", {"json": [{"path": "f", "equals": 1}]}, b'{"f":true}'),
        c("false does not equal 0", {"json": [{"path": "f", "equals": False}]}, b'{"f":0}'),
        c("true equals true", {"json": [{"path": "f", "equals": True}]}, b'{"f":true}'),
        c("1 equals 1.0", {"json": [{"path": "n", "equals": 1}]}, b'{"n":1.0}'),
        c("1.0 equals 1", {"json": [{"path": "n", "equals": 1.0}]}, b'{"n":1}'),
        c("1 equals 1e0", {"json": [{"path": "n", "equals": 1}]}, b'{"n":1e0}'),
        c("100 equals 1E2", {"json": [{"path": "n", "equals": 100}]}, b'{"n":1E2}'),
        c("0 equals -0", {"json": [{"path": "n", "equals": 0}]}, b'{"n":-0}'),
        c("1 does not equal 1.5", {"json": [{"path": "n", "equals": 1}]}, b'{"n":1.5}'),
        c("a number does not equal its string", {"json": [{"path": "n", "equals": 1}]}, b'{"n":"1"}'),
        c("a string does not equal the number", {"json": [{"path": "n", "equals": "1"}]}, b'{"n":1}'),
        c(
            "large integers compare exactly",
            {"json": [{"path": "n", "equals": 9007199254740993}]},
            b'{"n":9007199254740993}',
        ),
        c("negative numbers", {"json": [{"path": "n", "equals": -5}]}, b'{"n":-5.0}'),
        c("null equals null", {"json": [{"path": "f", "equals": None}]}, b'{"f":null}'),
        c("null does not equal a missing field", {"json": [{"path": "f", "equals": None}]}, b'{"g":1}'),
        c("null does not equal false", {"json": [{"path": "f", "equals": None}]}, b'{"f":false}'),
        c(
            "object equality, 1 == 1.0 inside",
            {"json": [{"path": "o", "equals": {"a": 1, "b": [2]}}]},
            b'{"o":{"b":[2.0],"a":1.0}}',
        ),
        c("object equality, true != 1 inside", {"json": [{"path": "o", "equals": {"a": True}}]}, b'{"o":{"a":1}}'),
        c(
            "object equality: an extra member differs",
            {"json": [{"path": "o", "equals": {"a": 1}}]},
            b'{"o":{"a":1,"b":2}}',
        ),
        c("array equality is ordered", {"json": [{"path": "l", "equals": [1, 2]}]}, b'{"l":[2,1]}'),
        c("array equality", {"json": [{"path": "l", "equals": [1, "x", None]}]}, b'{"l":[1.0,"x",null]}'),
        c("array equality, true != 1 inside", {"json": [{"path": "l", "equals": [True]}]}, b'{"l":[1]}'),
        c("empty string", {"json": [{"path": "s", "equals": ""}]}, b'{"s":""}'),
        # -- in
        c(
            "in: one of the values",
            {"json": [{"path": "status", "in": ["paid", "refunded"]}]},
            b'{"status":"refunded"}',
        ),
        c("in: none of the values", {"json": [{"path": "status", "in": ["paid", "refunded"]}]}, b'{"status":"open"}'),
        c("in: mixed types, true != 1", {"json": [{"path": "f", "in": [1, "x"]}]}, b'{"f":true}'),
        c("in: mixed types, 1 == 1.0", {"json": [{"path": "f", "in": [True, 1]}]}, b'{"f":1.0}'),
        c(
            "in: not JSON, without any wanted bytes",
            {"json": [{"path": "status", "in": ["paid", "refunded"]}]},
            b"neither",
        ),
        c(
            "in: not JSON, holding one wanted string",
            {"json": [{"path": "status", "in": ["paid", "refunded"]}]},
            b'x "refunded" x',
        ),
        # -- exists
        c("exists:true, present", {"json": [{"path": "a.b", "exists": True}]}, b'{"a":{"b":0}}'),
        c("exists:true, present as null", {"json": [{"path": "a", "exists": True}]}, b'{"a":null}'),
        c("exists:true, absent", {"json": [{"path": "a.b", "exists": True}]}, b'{"a":{}}'),
        c("exists:false, absent", {"json": [{"path": "a.b", "exists": False}]}, b'{"a":1}'),
        c("exists:false, present", {"json": [{"path": "a", "exists": False}]}, b'{"a":false}'),
        # -- paths
        c(
            "nested path",
            {"json": [{"path": "order.customer.tier", "equals": "gold"}]},
            b'{"order":{"customer":{"tier":"gold"}}}',
        ),
        c(
            "nested path through a non-object",
            {"json": [{"path": "order.customer.tier", "equals": "gold"}]},
            b'{"order":{"customer":"gold"}}',
        ),
        c("array index", {"json": [{"path": "items.1.sku", "equals": "B"}]}, b'{"items":[{"sku":"A"},{"sku":"B"}]}'),
        c(
            "array index out of range",
            {"json": [{"path": "items.2.sku", "equals": "B"}]},
            b'{"items":[{"sku":"A"},{"sku":"B"}]}',
        ),
        c("array index with leading zero", {"json": [{"path": "l.01", "equals": "b"}]}, b'{"l":["a","b"]}'),
        c("negative index does not index", {"json": [{"path": "l.-1", "equals": "b"}]}, b'{"l":["a","b"]}'),
        c("a name step on an array", {"json": [{"path": "l.x", "exists": True}]}, b'{"l":["a","b"]}'),
        c(
            "a digit step on an object is a member name",
            {"json": [{"path": "m.0", "equals": "zero"}]},
            b'{"m":{"0":"zero"}}',
        ),
        c("array at the top level", {"json": [{"path": "0.id", "equals": 7}]}, b'[{"id":7}]'),
        c("index into a string does not index", {"json": [{"path": "s.0", "exists": True}]}, b'{"s":"abc"}'),
        c("member name with a space", {"json": [{"path": "a b", "equals": 1}]}, b'{"a b":1}'),
        # -- several conditions
        c(
            "two JSON conditions, both hold",
            {"json": [{"path": "status", "equals": "paid"}, {"path": "amount", "in": [10, 12]}]},
            b'{"status":"paid","amount":12}',
        ),
        c(
            "two JSON conditions, one fails",
            {"json": [{"path": "status", "equals": "paid"}, {"path": "amount", "in": [10, 11]}]},
            b'{"status":"paid","amount":12}',
        ),
        c(
            "json given as one object instead of a list",
            {"json": {"path": "status", "equals": "paid"}},
            b'{"status":"paid"}',
        ),
    ] + limit_cases()


#: Parses whenever the value holds `"even"` or `"odd"` (two values: no single-field prefix rule).
KIND_IN = {"json": [{"path": "kind", "in": ["even", "odd"]}]}
#: Always parses (no byte rule for `exists`).
KIND_EXISTS = {"json": [{"path": "kind", "exists": True}]}
#: The single-field prefix rule applies.
KIND_EVEN = {"json": [{"path": "kind", "equals": "even"}]}


def limit_cases() -> list[dict[str, Any]]:
    """The size and nesting limits of filtered values (HANDOVER.md section 4, steps 5 and 8), at the limit and
    one past it, and where the byte rules answer before either limit is looked at."""
    c = _case
    even = '{"kind":"even","deep":'

    def nested(depth: int, head: str = even, closed: bool = True) -> Repeated:
        levels = depth - 1  # the object holding `kind` is the first level
        if not closed:
            return Repeated((head, 1), ("[", levels))
        return Repeated((head, 1), ("[", levels), ("]", levels), ("}", 1))

    def sized(size: int, head: str = '{"kind":"even","pad":"') -> Repeated:
        return Repeated((head, 1), ("x", size - len(head) - 2), ('"}', 1))

    limit = MAX_FILTER_VALUE_BYTES
    return [
        c(f"nested {MAX_DEPTH} deep (the limit): parsed", KIND_IN, nested(MAX_DEPTH)),
        c(f"nested {MAX_DEPTH + 1} deep: undecodable", KIND_IN, nested(MAX_DEPTH + 1)),
        c(
            f"nested {MAX_DEPTH} deep in objects: parsed",
            KIND_IN,
            Repeated((even, 1), ('{"a":', MAX_DEPTH - 1), ("1", 1), ("}", MAX_DEPTH)),
        ),
        c(
            f"nested {MAX_DEPTH + 1} deep in objects: undecodable",
            KIND_IN,
            Repeated((even, 1), ('{"a":', MAX_DEPTH), ("1", 1), ("}", MAX_DEPTH + 1)),
        ),
        c("nested 5000 deep: undecodable", KIND_IN, nested(5000), note="the review's poison record (H3)"),
        c("nested 5000 deep, not closed: undecodable", KIND_IN, nested(5000, closed=False)),
        c(
            "nested 5000 deep without the wanted bytes: no match",
            KIND_IN,
            Repeated(("[", 5000), ("]", 5000)),
            note="the byte shortcut (step 6) answers before the value is parsed",
        ),
        c(
            "nested 5000 deep after a compact prefix: match",
            KIND_EVEN,
            nested(5000),
            note="the single-field prefix rule (step 7) answers before the value is parsed",
        ),
        c(
            "brackets inside strings are not nesting",
            KIND_IN,
            Repeated(('{"kind":"even","s":"', 1), ("[{", 5000), ('\\"', 1), ("]}", 5000), ('"}', 1)),
        ),
        c(
            f"an escaped backslash ends a string: the brackets after it nest, {MAX_DEPTH} deep",
            KIND_IN,
            nested(MAX_DEPTH, '{"s":"\\\\","kind":"even","deep":'),
        ),
        c(
            f"an escaped backslash ends a string: the brackets after it nest, {MAX_DEPTH + 1} deep",
            KIND_IN,
            nested(MAX_DEPTH + 1, '{"s":"\\\\","kind":"even","deep":'),
        ),
        c(
            f"UTF-16 nested {MAX_DEPTH} deep: parsed",
            KIND_EXISTS,
            ('{"kind":"even","deep":' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}").encode("utf-16"),
        ),
        c(
            f"UTF-16 nested {MAX_DEPTH + 1} deep: undecodable",
            KIND_EXISTS,
            ('{"kind":"even","deep":' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}").encode("utf-16"),
            note="the depth is that of the text, whatever its encoding",
        ),
        c(
            "a member name of 60000 characters: parsed",
            KIND_IN,
            Repeated(('{"kind":"even","', 1), ("n", 60000), ('":1}', 1)),
        ),
        c("a string of a million characters: parsed", KIND_IN, sized(1_000_010)),
        c(f"{limit} bytes (the limit): parsed", KIND_IN, sized(limit)),
        c(f"{limit + 1} bytes: undecodable", KIND_IN, sized(limit + 1)),
        c(
            f"{limit + 1} bytes without the wanted bytes: undecodable",
            KIND_IN,
            sized(limit + 1, '{"kind":"none","pad":"'),
            note="the size (step 5) is checked before the byte shortcut",
        ),
        c(
            f"{limit + 1} bytes after a compact prefix: undecodable",
            KIND_EVEN,
            sized(limit + 1),
            note="the size (step 5) is checked before the single-field prefix rule",
        ),
        c(
            f"an integer of {MAX_INTEGER_DIGITS} digits (the limit): parsed",
            KIND_IN,
            Repeated(('{"kind":"even","n":-', 1), ("7", MAX_INTEGER_DIGITS), ("}", 1)),
        ),
        c(
            f"an integer of {MAX_INTEGER_DIGITS + 1} digits: undecodable",
            KIND_IN,
            Repeated(('{"kind":"even","n":', 1), ("7", MAX_INTEGER_DIGITS + 1), ("}", 1)),
        ),
        c(
            "a number of 6000 digits with a fraction: parsed",
            KIND_IN,
            Repeated(('{"kind":"even","n":', 1), ("7", 6000), (".5}", 1)),
            note="only integers have a digit limit",
        ),
        c("10 MB: undecodable", KIND_IN, sized(10_000_000, '{"kind":"odd","note":"even","pad":"')),
        c("10 MB and a keys filter: the value is not read", {"keys": ["k"]}, sized(10_000_000), key=b"k"),
        c(
            "a tombstone with a 10 MB key: only the value has a limit",
            {"json": [{"path": "kind", "exists": False}]},
            None,
            key=Repeated(("k", 10_000_000)),
            note="a key of any size: only the value has a limit",
        ),
    ]


def invalid_cases() -> list[dict[str, Any]]:
    i = _invalid
    return [
        i("not an object", ["status", "paid"]),
        i("a number", 3),
        i(
            "unknown field",
            {"regex": "pa.d"},
            note="a newer filter feature: a guard that cannot evaluate it skips nothing",
        ),
        i(
            "keysFile in a published filter",
            {"keysFile": "/etc/keys.txt"},
            note="the replay record carries keys inline; a guard cannot read the replay pods' file",
        ),
        i("headers not an object", {"headers": ["source"]}),
        i("header values empty", {"headers": {"source": []}}),
        i("header values not strings", {"headers": {"source": [1]}}),
        i("keys not a list", {"keys": "acct-1"}),
        i("keys not strings", {"keys": ["a", 2]}),
        i("json not a list", {"json": "status=paid"}),
        i("condition not an object", {"json": ["status"]}),
        i("condition without a path", {"json": [{"equals": "paid"}]}),
        i("condition with an empty path", {"json": [{"path": "", "equals": "paid"}]}),
        i("condition with a non-string path", {"json": [{"path": 1, "equals": "paid"}]}),
        i("condition with no operator", {"json": [{"path": "status"}]}),
        i("condition with an unknown operator", {"json": [{"path": "status", "matches": "p.*"}]}),
        i("condition with two operators", {"json": [{"path": "status", "equals": "paid", "exists": True}]}),
        i("in: empty", {"json": [{"path": "status", "in": []}]}),
        i("in: not a list", {"json": [{"path": "status", "in": "paid"}]}),
        i("exists: a string", {"json": [{"path": "status", "exists": "false"}]}),
        i("the second condition is the bad one", {"json": [{"path": "a", "equals": 1}, {"path": "b", "in": []}]}),
    ]


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "filters",
        "spec": "replay_worker/HANDOVER.md section 4",
        "cases": cases(),
        "invalid": invalid_cases(),
    }
