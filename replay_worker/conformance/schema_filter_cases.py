"""schema_filters.json: filters over Avro and Protobuf values read by schema id (HANDOVER.md section 4, "Schemas").

Each case carries the registry it runs against inline: `schemas` (id -> type and text, as the registry returns
them with `format=serialized`) and `registry` (`up`, or `unreachable`: every request fails). No registry is
needed to run them. The expected `result` is `match`, `no-match`, `undecodable` (a decision: the replay
dead-letters the record, the guard counts it as covered) or `wait` (no decision: the registry could not be
asked, so neither side judges the record yet).
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ..protocol.filters import FilterSpecError, SchemaUnavailable, Undecodable, published_filter
from ..protocol.record_values import (
    InlineSchemas,
    Schema,
    avro_schema_text,
    encode_avro,
    encode_protobuf,
)
from .encoding import headers_to_json, to_json

REGISTRY = "http://schema-registry.invalid/apis/ccompat/v7"

# -- Avro: two versions of one subject; the second adds `region` (a union with null, default null).
_TIER = {"type": "enum", "name": "Tier", "symbols": ["BRONZE", "SILVER", "GOLD"]}
_CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "fields": [{"name": "name", "type": "string"}, {"name": "tier", "type": _TIER}],
}
_LINE = {
    "type": "record",
    "name": "Line",
    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
}
_V1_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "long"},
    {"name": "status", "type": "string"},
    {"name": "customer", "type": _CUSTOMER},
    {"name": "discount", "type": ["null", "double"], "default": None},
    {"name": "lines", "type": {"type": "array", "items": _LINE}},
    {"name": "checksum", "type": "bytes"},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": _V1_FIELDS}
ORDER_V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [*_V1_FIELDS, {"name": "region", "type": ["null", "string"], "default": None}],
}
V1, V2, PROTO, UNKNOWN = 1, 2, 3, 99


def _order(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": 7,
        "status": "paid",
        "customer": {"name": "Ada", "tier": "GOLD"},
        "discount": None,
        "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
        "checksum": b"\x01\x02",
        "placed_at": 1700000000000,
    }
    base.update(changes)
    return base


def _v1(**changes: Any) -> bytes:
    return encode_avro(V1, ORDER_V1, _order(**changes))


def _v2(region: str | None = "eu", **changes: Any) -> bytes:
    return encode_avro(V2, ORDER_V2, {**_order(**changes), "region": region})


# -- Protobuf: one file, three messages (Envelope at [0], Order at [1], Order.Line at [1, 0]) and an enum.
def _proto_file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    envelope = f.message_type.add(name="Envelope")
    envelope.field.add(name="source", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    order = f.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=T.TYPE_INT32, label=T.LABEL_OPTIONAL)
    status = f.enum_type.add(name="Status")
    status.value.add(name="STATUS_UNSPECIFIED", number=0)
    status.value.add(name="PAID", number=1)
    status.value.add(name="SHIPPED", number=2)
    order.field.add(name="id", number=1, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    order.field.add(name="status", number=2, type=T.TYPE_ENUM, type_name=".shop.Status", label=T.LABEL_OPTIONAL)
    order.field.add(name="lines", number=3, type=T.TYPE_MESSAGE, type_name=".shop.Order.Line", label=T.LABEL_REPEATED)
    order.field.add(name="region", number=4, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    return f


PROTO_FILE = _proto_file()
PROTO_TEXT = base64.b64encode(PROTO_FILE.SerializeToString()).decode("ascii")
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(PROTO_FILE)


def _proto(full_name: str, indexes: tuple[int, ...], fields: dict[str, Any], schema_id: int = PROTO) -> bytes:
    cls = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name))
    message = cls()
    for name, value in fields.items():
        if isinstance(value, list):
            for item in value:
                getattr(message, name).add(**item)
        else:
            setattr(message, name, value)
    return encode_protobuf(schema_id, indexes, message.SerializeToString())


SCHEMAS = {
    V1: Schema("AVRO", avro_schema_text(ORDER_V1)),
    V2: Schema("AVRO", avro_schema_text(ORDER_V2)),
    PROTO: Schema("PROTOBUF", PROTO_TEXT),
}


def _avro(*conditions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"valueFormat": "avro", "registry": REGISTRY, "json": list(conditions), **extra}


def _protobuf(*conditions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"valueFormat": "protobuf", "registry": REGISTRY, "json": list(conditions), **extra}


def evaluate(spec: Any, key: bytes | None, headers: Any, value: bytes | None, registry: str) -> str:
    schemas = InlineSchemas(SCHEMAS, unreachable=registry == "unreachable")
    try:
        return "match" if published_filter(spec, schemas).matches(key, headers, value) else "no-match"
    except Undecodable:
        return "undecodable"
    except SchemaUnavailable:
        return "wait"


def _case(
    name: str,
    spec: Any,
    value: bytes | None,
    *,
    key: bytes | None = None,
    headers: list[tuple[str, bytes | None]] | None = None,
    registry: str = "up",
    note: str = "",
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if note:
        body["note"] = note
    body.update(
        {
            "filter": spec,
            "registry": registry,
            "key": to_json(key),
            "headers": headers_to_json(headers),
            "value": to_json(value),
            "result": evaluate(spec, key, headers, value, registry),
        }
    )
    return body


def _invalid(name: str, spec: Any) -> dict[str, Any]:
    try:
        published_filter(spec, InlineSchemas(SCHEMAS))
    except FilterSpecError as exc:
        return {"name": name, "filter": spec, "error": {"code": exc.code, "field": exc.field}}
    raise AssertionError(f"{name}: the filter was accepted")


REGION_EU = {"path": "region", "equals": "eu"}


def cases() -> list[dict[str, Any]]:
    c = _case
    return [
        # -- schema evolution: a field the second version added
        c("avro v2 record with the added field equal", _avro(REGION_EU), _v2("eu")),
        c("avro v2 record with the added field different", _avro(REGION_EU), _v2("us")),
        c(
            "avro v1 record lacks the field the v2 schema added",
            _avro(REGION_EU),
            _v1(),
            note="read under its writer's schema (v1): the field is absent, so equals does not hold",
        ),
        c("avro v1 record: exists false holds for the added field", _avro({"path": "region", "exists": False}), _v1()),
        c(
            "avro v2 record with the added field null: present (exists true)",
            _avro({"path": "region", "exists": True}),
            _v2(None),
        ),
        c("avro v2 record with the added field null does not equal a string", _avro(REGION_EU), _v2(None)),
        c("avro field of both versions, v1 record", _avro({"path": "status", "equals": "paid"}), _v1()),
        c("avro field of both versions, v2 record", _avro({"path": "status", "in": ["new", "paid"]}), _v2()),
        # -- nested records, enums, unions, arrays, bytes, logical types
        c("avro nested record field", _avro({"path": "customer.name", "equals": "Ada"}), _v2()),
        c("avro enum reads as its symbol", _avro({"path": "customer.tier", "equals": "GOLD"}), _v1()),
        c("avro enum symbol differs", _avro({"path": "customer.tier", "equals": "SILVER"}), _v1()),
        c(
            "avro union branch double equals a JSON number",
            _avro({"path": "discount", "equals": 0.5}),
            _v2(discount=0.5),
        ),
        c("avro union double 2.0 equals the integer 2", _avro({"path": "discount", "equals": 2}), _v2(discount=2.0)),
        c("avro union null branch is present as null", _avro({"path": "discount", "equals": None}), _v1()),
        c("avro long equals a JSON integer", _avro({"path": "id", "equals": 7}), _v1()),
        c("avro array element by index", _avro({"path": "lines.1.sku", "equals": "B-2"}), _v2()),
        c("avro array index out of range is absent", _avro({"path": "lines.2", "exists": False}), _v2()),
        c(
            "avro bytes never equal a string",
            _avro({"path": "checksum", "equals": "\u0001\u0002"}),
            _v1(),
            note="bytes and fixed are not JSON values; exists still works on them",
        ),
        c("avro bytes field exists", _avro({"path": "checksum", "exists": True}), _v1()),
        c(
            "avro logical type reads as its underlying long",
            _avro({"path": "placed_at", "equals": 1700000000000}),
            _v1(),
        ),
        # -- what is not a decodable value
        c("unframed value (JSON text) in an avro topic", _avro(REGION_EU), b'{"region":"eu"}'),
        c("magic byte not zero", _avro(REGION_EU), b"\x01" + _v2("eu")[1:]),
        c("value shorter than the 5-byte header", _avro(REGION_EU), b"\x00\x00\x00"),
        c("empty value", _avro(REGION_EU), b""),
        c("unknown schema id", _avro(REGION_EU), encode_avro(UNKNOWN, ORDER_V2, {**_order(), "region": "eu"})),
        c("payload truncated", _avro(REGION_EU), _v2("eu")[:-3]),
        c("bytes after the datum", _avro(REGION_EU), _v2("eu") + b"\x00"),
        c(
            "avro filter, the id names a protobuf schema",
            _avro(REGION_EU),
            _proto("shop.Order", (1,), {"region": "eu"}),
        ),
        c("tombstone: a field condition does not hold", _avro(REGION_EU), None),
        c("tombstone: exists false holds", _avro({"path": "region", "exists": False}), None),
        # -- the registry cannot be asked: a wait, never a decision
        c("registry unreachable: wait", _avro(REGION_EU), _v2("eu"), registry="unreachable"),
        c(
            "registry unreachable, unframed value: undecodable without asking",
            _avro(REGION_EU),
            b"not framed",
            registry="unreachable",
        ),
        c(
            "registry unreachable, key not listed: no-match without asking",
            _avro(REGION_EU, keys=["k1"]),
            _v2("eu"),
            key=b"k2",
            registry="unreachable",
        ),
        c(
            "registry unreachable, no field condition: match",
            {"valueFormat": "avro", "registry": REGISTRY, "headers": {"source": ["shop"]}},
            _v2("eu"),
            headers=[("source", b"shop")],
            registry="unreachable",
        ),
        c(
            "key and field conditions both hold",
            _avro(REGION_EU, keys=["k1"]),
            _v2("eu"),
            key=b"k1",
        ),
        # -- protobuf: message indexes
        c(
            "protobuf first message ([0], the lone 0 byte)",
            _protobuf({"path": "source", "equals": "shop"}),
            _proto("shop.Envelope", (0,), {"source": "shop"}),
        ),
        c(
            "protobuf second message ([1])",
            _protobuf({"path": "region", "equals": "eu"}),
            _proto("shop.Order", (1,), {"id": 5, "status": 1, "region": "eu"}),
        ),
        c(
            "protobuf enum reads as its name",
            _protobuf({"path": "status", "equals": "PAID"}),
            _proto("shop.Order", (1,), {"id": 5, "status": 1}),
        ),
        c(
            "protobuf int64 reads as a string (the JSON mapping)",
            _protobuf({"path": "id", "equals": "5"}),
            _proto("shop.Order", (1,), {"id": 5}),
        ),
        c(
            "protobuf int64 does not equal a JSON number",
            _protobuf({"path": "id", "equals": 5}),
            _proto("shop.Order", (1,), {"id": 5}),
        ),
        c(
            "protobuf field left at its default is present with it",
            _protobuf({"path": "region", "equals": ""}),
            _proto("shop.Order", (1,), {"id": 5}),
        ),
        c(
            "protobuf repeated nested message by index",
            _protobuf({"path": "lines.0.qty", "equals": 3}),
            _proto("shop.Order", (1,), {"lines": [{"sku": "A-1", "qty": 3}]}),
        ),
        c(
            "protobuf nested message as the value ([1, 0])",
            _protobuf({"path": "sku", "equals": "A-1"}),
            _proto("shop.Order.Line", (1, 0), {"sku": "A-1", "qty": 1}),
        ),
        c(
            "protobuf message index out of range",
            _protobuf({"path": "sku", "equals": "A-1"}),
            encode_protobuf(PROTO, (7,), b""),
        ),
        c(
            "protobuf message indexes cut short",
            _protobuf({"path": "sku", "equals": "A-1"}),
            b"\x00\x00\x00\x00\x03\x04",
        ),
        c(
            "protobuf payload that is not a message",
            _protobuf({"path": "region", "equals": "eu"}),
            encode_protobuf(PROTO, (1,), b"\xff\xff\xff"),
        ),
        c(
            "protobuf unknown schema id",
            _protobuf({"path": "region", "equals": "eu"}),
            encode_protobuf(UNKNOWN, (1,), b""),
        ),
        c("protobuf filter, the id names an avro schema", _protobuf(REGION_EU), _v2("eu")),
        c(
            "protobuf registry unreachable: wait",
            _protobuf(REGION_EU),
            _proto("shop.Order", (1,), {"region": "eu"}),
            registry="unreachable",
        ),
        # -- raw values: headers and keys only
        c(
            "raw values with a header filter",
            {"valueFormat": "raw", "headers": {"source": ["shop"]}},
            b"\x00\xff anything",
            headers=[("source", b"shop")],
        ),
        c("raw values with a key filter", {"valueFormat": "raw", "keys": ["k1"]}, b"\xff", key=b"k2"),
        c("json declared explicitly is the default", {"valueFormat": "json", "json": [REGION_EU]}, b'{"region":"eu"}'),
    ]


def invalid_cases() -> list[dict[str, Any]]:
    return [
        _invalid("unknown value format", {"valueFormat": "xml", "keys": ["a"]}),
        _invalid("field condition on raw values", {"valueFormat": "raw", "json": [REGION_EU]}),
        _invalid("avro without a registry", {"valueFormat": "avro", "json": [REGION_EU]}),
        _invalid("protobuf without a registry", {"valueFormat": "protobuf", "keys": ["a"]}),
        _invalid("registry that is not a string", {"valueFormat": "avro", "registry": 5, "json": [REGION_EU]}),
    ]


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "schema_filters",
        "spec": "replay_worker/HANDOVER.md section 4 (Schemas)",
        "schemas": {str(i): {"schemaType": s.schema_type, "schema": s.text} for i, s in SCHEMAS.items()},
        "cases": cases(),
        "invalid": invalid_cases(),
    }
