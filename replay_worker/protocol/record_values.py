"""What a record value says, in the format its topic declares: JSON, Avro, Protobuf or raw bytes. Pure.

A filter's field conditions (HANDOVER.md section 4) read the value as a document: objects, arrays, strings,
numbers, booleans and null. This module turns a value into that document, or says why it cannot:

- `json`: the value parsed as JSON (`filters.parse_record_value`; the byte shortcuts stay in `filters`).
- `avro` and `protobuf`: the Confluent wire format, a zero byte and a 4-byte big-endian schema id, then (for
  Protobuf) the message indexes, then the payload, written under the schema the registry holds for that id.
- `raw`: bytes with no fields; a field condition on raw values is refused when the filter is compiled.

Two kinds of failure, and they must not be confused (HANDOVER.md section 4, "Schemas"):
- `Undecodable`: a decision. The value is not framed, its schema id is unknown to the registry, or the payload
  does not read under its schema. The replay dead-letters the record and the guard counts it as covered, as for
  a value that is not JSON.
- `SchemaUnavailable`: no decision. The registry could not be asked (refused, timed out, a 5xx). Neither side
  may guess: the replay holds the partition and retries, the guard holds the record back, and status names the
  wait.

The schemas come from a `SchemaSource`: the registry (`connection.schema_registry`, with a bounded cache) in the
worker and the guard, or the schemas inline in a conformance vector.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Protocol

if TYPE_CHECKING:
    from google.protobuf.message import Message

# fastavro and protobuf are imported where a value is read, not here: every guard imports this module, and
# importing both costs about 25 ms of CPU at start (5% of the idle guard's overhead budget on a million
# records) for the many services whose topics carry JSON.


#: The formats a topic's keys or values may declare (the API's `valueFormat`).
FORMATS = ("json", "avro", "protobuf", "raw")
#: The formats whose values carry a schema id, and so need a registry.
REGISTRY_FORMATS = ("avro", "protobuf")
#: The Confluent wire format: the magic byte, then a 4-byte schema id.
MAGIC = 0
HEADER_BYTES = 5
#: A schema's message indexes are a handful at most; a count beyond this is a corrupt value, not a schema.
MAX_MESSAGE_INDEXES = 64


class Undecodable(ValueError):
    """The record's value is not what a field condition needs (not JSON, not framed, an unknown schema id, a
    payload its schema does not read): a poison record, a decision. `filters` re-exports it."""


class SchemaUnavailable(Exception):
    """The registry could not be asked for a schema: a wait, never a decision (the record is not judged)."""


@dataclass(frozen=True)
class Schema:
    """One registered schema, as the registry returns it by id: its type (`AVRO` or `PROTOBUF`) and its text
    (Avro: the JSON schema; Protobuf: a serialized FileDescriptorProto in base64, the registry's
    `format=serialized`)."""

    schema_type: str
    text: str


class SchemaSource(Protocol):
    """Schemas by id. `schema(id)` is None for an id the registry does not know (a decision), and raises
    `SchemaUnavailable` when the registry cannot be reached (a wait)."""

    def schema(self, schema_id: int) -> Schema | None: ...


class InlineSchemas:
    """Schemas given up front (a conformance vector's), or none reachable at all (`unreachable=True`)."""

    def __init__(self, schemas: Mapping[int, Schema], *, unreachable: bool = False) -> None:
        self._schemas = dict(schemas)
        self._unreachable = unreachable

    def schema(self, schema_id: int) -> Schema | None:
        if self._unreachable:
            raise SchemaUnavailable("the registry is unreachable (a vector's registry)")
        return self._schemas.get(schema_id)


def framed_id(value: bytes) -> int:
    """The schema id of a Confluent-framed value, or `Undecodable` for a value that is not framed."""
    if len(value) < HEADER_BYTES or value[0] != MAGIC:
        raise Undecodable("value is not in the Confluent wire format (a zero byte, then a 4-byte schema id)")
    return int.from_bytes(value[1:HEADER_BYTES], "big")


def _strip_logical_types(node: Any) -> Any:
    """The schema with every `logicalType` removed: a field reads as its underlying type (a timestamp as its
    long, a decimal as its bytes), the same in every language, instead of each library's own date or decimal."""
    if isinstance(node, dict):
        return {k: _strip_logical_types(v) for k, v in node.items() if k != "logicalType"}
    if isinstance(node, list):
        return [_strip_logical_types(v) for v in node]
    return node


class _Readers:
    """Compiled readers per schema id: parsing a schema costs far more than reading a record."""

    def __init__(self) -> None:
        self.avro: dict[tuple[int, str], Any] = {}
        self.protobuf: dict[tuple[int, str, tuple[int, ...]], type[Message]] = {}


def _avro_schema(schema_id: int, schema: Schema, readers: _Readers) -> Any:
    key = (schema_id, schema.text)
    parsed = readers.avro.get(key)
    if parsed is None:
        import fastavro

        try:
            parsed = fastavro.parse_schema(_strip_logical_types(json.loads(schema.text)))
        except Exception as exc:  # noqa: BLE001 - any fault of a registered schema is the record's
            raise Undecodable(f"schema {schema_id} is not a readable Avro schema: {exc}") from None
        readers.avro[key] = parsed
    return parsed


def _read_varint(value: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (the wire format's message indexes) at `pos`: (value, next position)."""
    shift = result = 0
    while True:
        if pos >= len(value) or shift > 63:
            raise Undecodable("value ends inside its Protobuf message indexes")
        byte = value[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def message_indexes(value: bytes) -> tuple[tuple[int, ...], int]:
    """The message indexes after the 5-byte header, and where the payload starts. A lone 0 is `[0]`, the
    first message of the file (the common case's one-byte shorthand)."""
    count, pos = _read_varint(value, HEADER_BYTES)
    if count == 0:
        return (0,), pos
    if count < 0 or count > MAX_MESSAGE_INDEXES:
        raise Undecodable(f"value declares {count} Protobuf message indexes")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(value, pos)
        if index < 0:
            raise Undecodable("value has a negative Protobuf message index")
        indexes.append(index)
    return tuple(indexes), pos


def _protobuf_class(schema_id: int, schema: Schema, indexes: tuple[int, ...], readers: _Readers) -> type[Message]:
    key = (schema_id, schema.text, indexes)
    cls = readers.protobuf.get(key)
    if cls is not None:
        return cls
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.text, validate=True))
        # A pool of its own per schema: two schemas may define the same full names differently.
        pool = descriptor_pool.DescriptorPool()
        file_descriptor = pool.Add(fdp) and pool.FindFileByName(fdp.name)
    except Exception as exc:  # noqa: BLE001 - .proto text, imports, or a corrupt descriptor
        raise Undecodable(
            f"schema {schema_id} is not a serialized FileDescriptorProto without imports "
            f"(the registry's format=serialized): {exc}"
        ) from None
    messages = file_descriptor.message_types_by_name
    ordered = [messages[m.name] for m in fdp.message_type]
    descriptor = None
    for depth, index in enumerate(indexes):
        if index >= len(ordered):
            raise Undecodable(f"message index {list(indexes)} is not in schema {schema_id} (step {depth})")
        descriptor = ordered[index]
        ordered = list(descriptor.nested_types)
    assert descriptor is not None
    cls = message_factory.GetMessageClass(descriptor)
    readers.protobuf[key] = cls
    return cls


class ValueReader:
    """`document(value)`: a framed value read under its schema, as a filter's field conditions see it.

    Avro: the writer's schema read as written, records as objects, enums as their symbol, a union as the
    branch's value, bytes and fixed as bytes, logical types as their underlying type. Protobuf: the canonical
    proto3 JSON mapping with the field names of the .proto (64-bit integers as strings, enums by name, every
    field without presence shown with its default), as each language's JSON printer gives it."""

    def __init__(self, value_format: str, schemas: SchemaSource) -> None:
        if value_format not in REGISTRY_FORMATS:
            raise ValueError(f"{value_format} values carry no schema id")
        self.value_format = value_format
        self.schemas = schemas
        self._readers = _Readers()
        # Bound once here, not imported per record (see the note on the imports above).
        if value_format == "avro":
            import fastavro

            self._read_avro = fastavro.schemaless_reader
        else:
            from google.protobuf import json_format
            from google.protobuf.message import DecodeError

            self._to_document = json_format.MessageToDict
            self._decode_error = DecodeError

    def _schema(self, schema_id: int) -> Schema:
        schema = self.schemas.schema(schema_id)  # SchemaUnavailable goes up: a wait
        if schema is None:
            raise Undecodable(f"schema id {schema_id} is unknown to the registry")
        expected = "AVRO" if self.value_format == "avro" else "PROTOBUF"
        if schema.schema_type != expected:
            raise Undecodable(f"schema id {schema_id} is a {schema.schema_type} schema, not {expected}")
        return schema

    def document(self, value: bytes) -> Any:
        schema_id = framed_id(value)
        schema = self._schema(schema_id)
        if self.value_format == "avro":
            parsed = _avro_schema(schema_id, schema, self._readers)
            payload = io.BytesIO(value)
            payload.seek(HEADER_BYTES)
            try:
                datum = self._read_avro(payload, parsed, None)
            except Exception as exc:  # noqa: BLE001 - every way the payload fails to read is the record's
                raise Undecodable(f"value does not read under Avro schema {schema_id}: {exc}") from None
            if payload.tell() != len(value):
                raise Undecodable(f"value has {len(value) - payload.tell()} bytes after its Avro datum")
            # bytes and fixed stay bytes, which equal no JSON value a filter can name.
            return datum
        indexes, start = message_indexes(value)
        cls = _protobuf_class(schema_id, schema, indexes, self._readers)
        try:
            message = cls.FromString(value[start:])
        except self._decode_error as exc:
            raise Undecodable(f"value does not read under Protobuf schema {schema_id}: {exc}") from None
        return self._to_document(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def avro_schema_text(schema: Mapping[str, Any]) -> str:
    """An Avro schema as the registry holds it (compact JSON)."""
    return json.dumps(schema, separators=(",", ":"))


def encode_avro(schema_id: int, schema: Mapping[str, Any], datum: Mapping[str, Any]) -> bytes:
    """A Confluent-framed Avro value (what a producer's serializer writes): for tests and the vectors."""
    import fastavro

    out = io.BytesIO()
    out.write(bytes([MAGIC]) + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(dict(schema)), dict(datum))
    return out.getvalue()


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def encode_protobuf(schema_id: int, indexes: tuple[int, ...], payload: bytes) -> bytes:
    """A Confluent-framed Protobuf value: the header, the message indexes (`[0]` as the lone byte 0), the
    payload. For tests and the vectors."""
    if indexes == (0,):
        framed = _zigzag(0)
    else:
        framed = _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big") + framed + payload
