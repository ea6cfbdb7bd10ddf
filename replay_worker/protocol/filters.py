"""Which records a replay acts on: header values, a key set, and JSON field matches. Pure.

The filter runs before anything is deserialised, cheapest test first: headers and keys compare bytes; a JSON
condition first looks for the expected value's bytes in the raw value (a record that does not contain
`"paid"` cannot have `status == "paid"`) and parses only when the bytes are there. That shortcut is only
taken when the value holds no backslash, because JSON may spell a character as `\\u0070`. (Walking the
object only up to the field was tried: in Python it costs as much as the C parser's whole document.)

The common filter, one top-level field equal to one string, is answered from the bytes whenever the record is
compact JSON that opens with that field as a string (`{"kind":"even",...`) and names the key nowhere else:
then the first member is the field, whatever follows. `matches` (the guard) and the replay's predicate run
the same function, so both sides always agree on which records the replay covers (HANDOVER.md section 4).

Every condition must hold (AND); inside one condition any listed value will do (OR). An empty filter matches
everything. The live side's guard evaluates the same filter (published in the handover topic), so the
records the replay covers and the records the guard skips are the same set; see HANDOVER.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .json_limits import MAX_DEPTH, MAX_FILTER_VALUE_BYTES, decoder, loads, too_deep
from .record_values import FORMATS, REGISTRY_FORMATS, SchemaSource, ValueReader

# Re-exported: the replay and the guard catch both where they evaluate a filter.
from .record_values import SchemaUnavailable as SchemaUnavailable
from .record_values import Undecodable as Undecodable

Headers = Sequence[tuple[str, bytes | None]] | None


class FilterSpecError(ValueError):
    """A filter spec that cannot be understood. `field` names the part at fault (`filter.json[0].in`) and
    `code` says what is wrong, in words that stay the same in every language (the conformance vectors)."""

    def __init__(self, message: str, *, field: str = "filter", code: str = "invalid") -> None:
        super().__init__(message)
        self.field = field
        self.code = code


_MISSING = object()


@dataclass(frozen=True)
class JsonMatch:
    """One JSON condition: the field at `path` (dotted; digits index lists) equals one of `values`, or exists."""

    path: tuple[str, ...]
    values: tuple[Any, ...] = ()
    exists: bool | None = None

    def to_obj(self) -> dict[str, Any]:
        body: dict[str, Any] = {"path": ".".join(self.path)}
        if self.exists is not None:
            body["exists"] = self.exists
        elif len(self.values) == 1:
            body["equals"] = self.values[0]
        else:
            body["in"] = list(self.values)
        return body


@dataclass(frozen=True)
class FilterSpec:
    """The filter as configured: `{"headers": {...}, "keys": [...], "keysFile": "...", "json": [...],
    "valueFormat": "avro", "registry": "http://..."}`. `json` conditions read the value decoded in its
    `valueFormat` (json by default; avro and protobuf through the schema `registry`; raw has no fields)."""

    headers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    keys: tuple[str, ...] | None = None
    keys_file: str | None = None
    json_matches: tuple[JsonMatch, ...] = ()
    value_format: str = "json"
    registry: str | None = None

    @property
    def empty(self) -> bool:
        return not self.headers and self.keys is None and self.keys_file is None and not self.json_matches

    @classmethod
    def parse(cls, obj: Any, what: str = "filter") -> "FilterSpec":
        if obj is None or obj == "":
            return cls()
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise FilterSpecError(
                    f"{what}: not valid JSON ({exc.msg} at position {exc.pos})", field=what, code="not-json"
                ) from None
        if not isinstance(obj, Mapping):
            raise FilterSpecError(
                f"{what}: expected a JSON object with headers, keys, keysFile or json", field=what, code="not-an-object"
            )
        unknown = set(obj) - {"headers", "keys", "keysFile", "json", "valueFormat", "registry"}
        if unknown:
            raise FilterSpecError(
                f"{what}: unknown field(s) {sorted(unknown)}; known: headers, keys, keysFile, json, valueFormat, "
                "registry",
                field=f"{what}.{sorted(unknown)[0]}",
                code="unknown-field",
            )
        headers: list[tuple[str, tuple[str, ...]]] = []
        raw_headers = obj.get("headers") or {}
        if not isinstance(raw_headers, Mapping):
            raise FilterSpecError(
                f'{what}.headers: expected {{"name": ["value", ...]}}', field=f"{what}.headers", code="bad-headers"
            )
        for name, values in raw_headers.items():
            values = [values] if isinstance(values, str) else values
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                raise FilterSpecError(
                    f"{what}.headers.{name}: expected a string or a non-empty list of strings",
                    field=f"{what}.headers.{name}",
                    code="bad-header-values",
                )
            headers.append((str(name), tuple(values)))
        keys = obj.get("keys")
        if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
            raise FilterSpecError(f"{what}.keys: expected a list of strings", field=f"{what}.keys", code="bad-keys")
        keys_file = obj.get("keysFile")
        if keys_file is not None and not isinstance(keys_file, str):
            raise FilterSpecError(f"{what}.keysFile: expected a path", field=f"{what}.keysFile", code="bad-keys-file")
        matches: list[JsonMatch] = []
        raw_json = obj.get("json") or []
        if isinstance(raw_json, Mapping):
            raw_json = [raw_json]
        if not isinstance(raw_json, list):
            raise FilterSpecError(
                f"{what}.json: expected a list of {{path, equals|in|exists}}", field=f"{what}.json", code="bad-json"
            )
        for index, cond in enumerate(raw_json):
            where = f"{what}.json[{index}]"
            if not isinstance(cond, Mapping) or not isinstance(cond.get("path"), str) or not cond["path"]:
                raise FilterSpecError(
                    f'{where}: expected {{"path": "a.b", "equals": value}} (or in / exists)',
                    field=where,
                    code="bad-condition",
                )
            ops = [op for op in ("equals", "in", "exists") if op in cond]
            if len(ops) != 1:
                raise FilterSpecError(
                    f"{where}: give exactly one of equals, in, exists", field=where, code="bad-operator"
                )
            path = tuple(cond["path"].split("."))
            if ops[0] == "equals":
                matches.append(JsonMatch(path, (cond["equals"],)))
            elif ops[0] == "in":
                if not isinstance(cond["in"], list) or not cond["in"]:
                    raise FilterSpecError(f"{where}.in: expected a non-empty list", field=f"{where}.in", code="bad-in")
                matches.append(JsonMatch(path, tuple(cond["in"])))
            else:
                if not isinstance(cond["exists"], bool):
                    # "false" (a string) must not read as true: a guard would skip what the replay ignores.
                    raise FilterSpecError(
                        f"{where}.exists: expected true or false", field=f"{where}.exists", code="bad-exists"
                    )
                matches.append(JsonMatch(path, exists=cond["exists"]))
        value_format = obj.get("valueFormat", "json")
        if value_format not in FORMATS:
            raise FilterSpecError(
                f"{what}.valueFormat: expected one of {', '.join(FORMATS)}, not {value_format!r}",
                field=f"{what}.valueFormat",
                code="unknown-format",
            )
        if value_format == "raw" and matches:
            raise FilterSpecError(
                f"{what}.json: raw values have no fields to match; filter on headers or keys, or declare the "
                "values' format (json, avro, protobuf)",
                field=f"{what}.json",
                code="fields-on-raw",
            )
        registry = obj.get("registry")
        if registry is not None and (not isinstance(registry, str) or not registry):
            raise FilterSpecError(f"{what}.registry: expected a URL", field=f"{what}.registry", code="bad-registry")
        if value_format in REGISTRY_FORMATS and registry is None:
            raise FilterSpecError(
                f"{what}.registry: {value_format} values are read by schema id: name the schema registry",
                field=f"{what}.registry",
                code="no-registry",
            )
        return cls(
            tuple(headers),
            tuple(keys) if keys is not None else None,
            keys_file,
            tuple(matches),
            value_format,
            registry,
        )

    def to_obj(self, inline_keys: bool = False) -> dict[str, Any]:
        """The JSON form; `inline_keys` reads `keysFile` into `keys` (what the handover topic publishes,
        because the guard cannot read a file mounted into the replay pods)."""
        body: dict[str, Any] = {}
        if self.headers:
            body["headers"] = {name: list(values) for name, values in self.headers}
        if inline_keys and (self.keys is not None or self.keys_file):
            body["keys"] = sorted(self.all_keys())
        else:
            if self.keys is not None:
                body["keys"] = list(self.keys)
            if self.keys_file:
                body["keysFile"] = self.keys_file
        if self.json_matches:
            body["json"] = [m.to_obj() for m in self.json_matches]
        if self.value_format != "json":
            # Only when not the default: a JSON filter publishes what every older guard understands.
            body["valueFormat"] = self.value_format
        if self.registry is not None:
            body["registry"] = self.registry
        return body

    def to_json(self, inline_keys: bool = False) -> str:
        return json.dumps(self.to_obj(inline_keys), separators=(",", ":"), sort_keys=True)

    def all_keys(self) -> set[str]:
        """The key set: `keys` plus the lines of `keysFile` (blank lines ignored)."""
        keys = set(self.keys or ())
        if self.keys_file:
            try:
                text = Path(self.keys_file).read_text(encoding="utf-8")
            except OSError as exc:
                raise FilterSpecError(
                    f"filter.keysFile {self.keys_file}: cannot read it ({exc.strerror})",
                    field="filter.keysFile",
                    code="keys-file-unreadable",
                ) from None
            keys.update(line.strip() for line in text.splitlines() if line.strip())
        return keys


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: `true` is not `1`, but `1` is `1.0`; inside arrays and objects too."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _lookup(document: Any, path: tuple[str, ...]) -> Any:
    node = document
    for step in path:
        if isinstance(node, dict):
            node = node.get(step, _MISSING)
        elif isinstance(node, list) and step.isascii() and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _needle(value: Any) -> bytes | None:
    """The bytes a JSON string value must appear as, when that is certain (no character JSON would escape)."""
    if not isinstance(value, str):
        return None
    if any(c in value for c in '"\\') or any(ord(c) < 0x20 for c in value):
        return None
    return b'"' + value.encode("utf-8") + b'"'


@dataclass(frozen=True)
class _CompiledJson:
    path: tuple[str, ...]
    values: tuple[Any, ...]
    exists: bool | None
    #: Byte strings of which at least one must occur in the raw value; None when no shortcut is safe.
    needles: tuple[bytes, ...] | None


@dataclass
class RecordFilter:
    """A compiled `FilterSpec`: `matches(key, headers, value)`."""

    headers: dict[str, frozenset[bytes]] = field(default_factory=dict)
    keys: frozenset[bytes] | None = None
    json_conditions: tuple[_CompiledJson, ...] = ()
    #: Reads an Avro or Protobuf value into its document; None for JSON values (parsed here, with shortcuts).
    reader: ValueReader | None = None
    #: The whole filter as a function of the value, when it is one top-level field equal to one string.
    _single: Callable[[bytes | None], bool] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._single = self._single_string_field()

    @classmethod
    def compile(cls, spec: FilterSpec, schemas: SchemaSource | None = None) -> "RecordFilter":
        """The filter, ready to run. An Avro or Protobuf filter with field conditions reads schemas from
        `schemas` (the registry `spec.registry` names, or a vector's inline schemas)."""
        reader = None
        if spec.value_format in REGISTRY_FORMATS and spec.json_matches:
            if schemas is None:
                raise FilterSpecError(
                    f"filter.registry: no schema source for {spec.value_format} values",
                    field="filter.registry",
                    code="no-registry",
                )
            reader = ValueReader(spec.value_format, schemas)
        headers = {name: frozenset(v.encode("utf-8") for v in values) for name, values in spec.headers}
        keys = None
        if spec.keys is not None or spec.keys_file:
            keys = frozenset(k.encode("utf-8") for k in spec.all_keys())
        compiled = []
        for m in spec.json_matches:
            needles: tuple[bytes, ...] | None = None
            if m.exists is None:
                found = [_needle(v) for v in m.values]
                if all(n is not None for n in found):
                    needles = tuple(n for n in found if n is not None)
            if reader is not None:
                needles = None  # the bytes of an encoded value do not spell a JSON string
            compiled.append(_CompiledJson(m.path, m.values, m.exists, needles))
        return cls(headers, keys, tuple(compiled), reader)

    def _single_string_field(self) -> Callable[[Any], bool] | None:
        if self.headers or self.keys is not None or len(self.json_conditions) != 1 or self.reader is not None:
            return None
        cond = self.json_conditions[0]
        if (
            len(cond.path) != 1
            or cond.exists is not None
            or len(cond.values) != 1
            or not isinstance(cond.values[0], str)
            or not cond.needles
        ):
            return None
        return _string_field_predicate(cond.path[0], cond.values[0], cond.needles[0])

    @property
    def matches_everything(self) -> bool:
        return not self.headers and self.keys is None and not self.json_conditions

    def matches(self, key: bytes | None, headers: Headers, value: bytes | None) -> bool:
        """True when the record is one the replay acts on; `Undecodable` when a JSON condition cannot be
        evaluated because the value is not JSON."""
        if self._single is not None:
            return self._single(value)
        if self.keys is not None and (key is None or key not in self.keys):
            return False
        if self.headers:
            if not headers:
                return False
            for name, accepted in self.headers.items():
                if not any(h_name == name and h_value in accepted for h_name, h_value in headers):
                    return False
        if not self.json_conditions:
            return True
        if value is None:
            # A tombstone has no fields: a JSON condition cannot hold (not a poison record).
            return all(c.exists is False for c in self.json_conditions)
        if len(value) > MAX_FILTER_VALUE_BYTES:
            raise Undecodable(f"value of {len(value)} bytes, more than {MAX_FILTER_VALUE_BYTES}")
        if self.reader is not None:
            # Avro or Protobuf: no byte shortcut; `SchemaUnavailable` goes up (a wait, not a decision).
            return self._holds(self.reader.document(value))
        plain = value.find(b"\\") < 0  # memchr; `in` takes twice as long for one byte
        if plain:
            for cond in self.json_conditions:
                needles = cond.needles
                if needles is not None:
                    if len(needles) == 1:
                        if needles[0] not in value:
                            return False
                    elif not any(n in value for n in needles):
                        return False
        return self._holds(parse_record_value(value))

    def _holds(self, document: Any) -> bool:
        for cond in self.json_conditions:
            found = _lookup(document, cond.path)
            if cond.exists is not None:
                if (found is not _MISSING) != cond.exists:
                    return False
            elif found is _MISSING or not any(_json_equal(found, v) for v in cond.values):
                return False
        return True

    def predicate(self) -> Callable[[Any], bool]:
        """`matches` for a confluent_kafka Message, reading only the parts the conditions need (a Message
        builds a new list each time its headers are asked for)."""
        matches = self.matches
        if self.matches_everything:
            return lambda message: True
        by_value = self.value_predicate()
        if by_value is not None:
            return lambda message: by_value(message.value())
        if not self.headers:
            return lambda message: matches(message.key(), None, message.value())
        return lambda message: matches(message.key(), message.headers(), message.value())

    def value_predicate(self) -> Callable[[bytes | None], bool] | None:
        """`matches` as a function of the value alone, when no condition reads the key or the headers (else
        None). The replay maps it over a batch's values: one Python call per record, nothing else."""
        if self.headers or self.keys is not None:
            return None
        if self._single is not None:
            return self._single
        matches = self.matches
        return lambda value: matches(None, None, value)


_decode_document = decoder.decode


_NOT_PLAIN_UTF8 = (b"\xef", b"\x00", b"\xff", b"\xfe")


def parse_json(value: bytes) -> Any:
    """`json.loads` of a record value. UTF-8 (what Kafka records carry) is decoded directly, skipping
    `json.loads`' encoding detection, which costs as much as parsing a small record; a BOM or a UTF-16/32
    value goes the general way."""
    if value[:1] in _NOT_PLAIN_UTF8 or value[1:2] == b"\x00":
        return loads(value)
    return _decode_document(value.decode("utf-8"))


def parse_record_value(value: bytes) -> Any:
    """A record value as a JSON condition reads it (HANDOVER.md section 4, step 8), or `Undecodable`: for a
    value nested deeper than `MAX_DEPTH` (checked before the parser, whose own limit differs by language and
    by the stack's depth), and for every way the parser fails. The caller has checked the size (step 5)."""
    try:
        if value[:1] in _NOT_PLAIN_UTF8 or value[1:2] == b"\x00":
            # UTF-16 or UTF-32 (or a BOM): the depth is counted in the text, which `json.loads` decodes so too.
            text = value.decode(json.detect_encoding(value), "surrogatepass")
            if too_deep(text.encode("utf-8", "surrogatepass")):
                raise Undecodable(f"value is nested deeper than {MAX_DEPTH}")
            return decoder.decode(text)
        if value.count(b"[") + value.count(b"{") > MAX_DEPTH and too_deep(value):
            raise Undecodable(f"value is nested deeper than {MAX_DEPTH}")
        return _decode_document(value.decode("utf-8"))
    except Undecodable:
        raise
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        # Every way the parser fails is the protocol's undecodable, never an exception of the parser's own.
        raise Undecodable(f"value is not JSON: {exc}") from None


def _string_field_predicate(key: str, wanted: str, needle: bytes) -> Callable[[bytes | None], bool]:
    """`matches` of the filter "top-level field `key` equals the string `wanted`", as a function of the value.

    Without a backslash in the value no character is escaped, so a string literal is its own bytes and the
    key can only appear as `key_token`. Then compact JSON that opens with the field as a string, and names the
    key nowhere after it, is answered from the bytes: that first member is the field (a later duplicate, which
    would win, is excluded), and it is the wanted string exactly when it reads `needle`. Otherwise a value
    without the needle cannot match; the rest is parsed. `rfind` looks for the key again because CPython's
    reverse search is about twice as fast as the forward one on long values."""
    loads = parse_record_value
    key_token = json.dumps(key, ensure_ascii=False).encode("utf-8")
    head = b"{" + key_token + b":"
    start = len(head)
    opens = head + b'"'
    hits = (head + needle + b",", head + needle + b"}")

    def match(value: bytes | None) -> bool:
        if value is None:
            return False
        if len(value) > MAX_FILTER_VALUE_BYTES:
            raise Undecodable(f"value of {len(value)} bytes, more than {MAX_FILTER_VALUE_BYTES}")
        if value.find(b"\\") < 0:  # memchr; `in` takes twice as long for one byte
            if value.startswith(opens) and value.rfind(key_token, start) < 0:
                if value.startswith(hits):
                    return True
                if not value.startswith(needle, start):
                    return False  # the field is another string
                # The wanted string, then not `,` or `}` (whitespace, or not JSON): the parser judges.
            elif needle not in value:
                return False  # the same shortcut as `RecordFilter.matches`
        document = loads(value)
        if type(document) is not dict:
            return False
        found = document.get(key, _MISSING)
        return type(found) is str and found == wanted

    return match


def published_filter(obj: Any, schemas: SchemaSource | None = None) -> RecordFilter:
    """The filter of a `replay` record, compiled as a guard evaluates it. The record carries the key set
    inline; a `keysFile` names a file in the replay's pods that no guard can read, so it is refused (a
    guard that cannot evaluate the filter skips nothing for that replay; HANDOVER.md section 4)."""
    spec = FilterSpec.parse(obj)
    if spec.keys_file is not None:
        raise FilterSpecError(
            "filter.keysFile: a published filter carries its keys inline (keys), not a file",
            field="filter.keysFile",
            code="keys-file-not-published",
        )
    return RecordFilter.compile(spec, schemas)


def compile_filter(spec: FilterSpec | Mapping[str, Any] | str | None) -> RecordFilter:
    if not isinstance(spec, FilterSpec):
        spec = FilterSpec.parse(spec)
    return RecordFilter.compile(spec)
