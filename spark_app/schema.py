"""The latest schema records are evolved to: its fields, their defaults, and the renames from older versions.

Three JSON forms are read, all without a running Spark:

- an Avro record schema (`{"type": "record", "fields": [...]}`): unions with null are nullable fields, a
  field's `default` and `aliases` (older names) are used, logical types map to date, timestamp and decimal;
- a Spark StructType (`{"type": "struct", "fields": [...]}`, as `df.schema.json()` writes it), where a
  field's metadata may carry `"default"` (a JSON value) and `"aliases"` (older names, as in Avro);
- a short form: `{"fields": [{"name": "amount", "type": "long", "default": 0, "nullable": true}],
  "renames": {"kind": "event_type"}}`, types as Spark type names (`long`, `int`, `bigint`, `double`,
  `decimal(10,2)`, `timestamp`, ...) or as Spark type JSON for nested types.

`with_overrides()` lays renames and defaults given apart from the schema (the LakeReplay spec has both)
over any of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    _parse_datatype_json_value,
)


class SchemaError(ValueError):
    """The latest schema cannot be read, or a record cannot be evolved to it; the message names the field."""


# SQL spellings people write, mapped to the names Spark's JSON type form uses.
_TYPE_ALIASES = {
    "int": "integer",
    "bigint": "long",
    "smallint": "short",
    "tinyint": "byte",
    "bool": "boolean",
    "real": "float",
    "str": "string",
    "text": "string",
    "bytes": "binary",
    "timestamp_ltz": "timestamp",
}


@dataclass(frozen=True)
class LatestSchema:
    """The target of schema evolution."""

    struct: StructType
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Field name -> JSON value used when a record was written under a schema without that field."""
    renames: Mapping[str, str] = field(default_factory=dict)
    """Older field name -> its name in the latest schema."""
    avro: Mapping[str, Any] | None = None
    """The Avro record schema it was given as, if it was: Avro lake files are read with it (see reader_schema)."""

    def avro_reader_schema(self) -> str:
        """The Avro reader schema of Avro lake files: the Avro form of this schema, with the renames and
        defaults given apart from it folded in as aliases and defaults, so Avro's own resolution applies them.

        Spark infers the schema of Avro files from one file only, and then reads files of other versions as
        nulls or fails, depending on listing order: Avro files are never read without this schema."""
        if self.avro is None:
            raise SchemaError(
                "Avro lake files need the latest schema as an Avro record schema (the reader schema); "
                "a Spark StructType or the short form cannot be one"
            )
        document = json.loads(json.dumps(self.avro))
        for spec in document["fields"]:
            name = spec["name"]
            older = [old for old, new in self.renames.items() if new == name]
            if older:
                spec["aliases"] = sorted({*(spec.get("aliases") or []), *older})
            if name in self.defaults:
                spec["default"] = self.defaults[name]
        return json.dumps(document)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.struct.fields]

    def field(self, name: str) -> StructField:
        return self.struct[name]

    def older_names(self, name: str) -> list[str]:
        """The names `name` had in older versions, in the order they were declared."""
        return [old for old, new in self.renames.items() if new == name]

    def require(self, *columns: str) -> None:
        missing = [c for c in columns if c not in self.names]
        if missing:
            raise SchemaError(f"the latest schema has no field {', '.join(missing)}; it has {', '.join(self.names)}")

    def digest_source(self) -> str:
        """A stable text of the schema (for a replay's identity)."""
        return json.dumps(
            {"struct": self.struct.jsonValue(), "defaults": dict(self.defaults), "renames": dict(self.renames)},
            sort_keys=True,
        )


def parse_type(spec: Any, where: str) -> DataType:
    """A Spark DataType from a type name (`long`, `decimal(10,2)`) or Spark's JSON form of a type."""
    if isinstance(spec, str):
        name = spec.strip().lower()
        spec = _TYPE_ALIASES.get(name, name)
    try:
        return _parse_datatype_json_value(spec)
    except Exception as exc:  # pyspark raises ValueError or KeyError depending on the form
        raise SchemaError(f"{where}: unknown type {spec!r} ({exc})") from None


def parse_latest_schema(text: str) -> LatestSchema:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"the latest schema is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise SchemaError("the latest schema must be a JSON object")
    if document.get("type") == "struct":
        return _from_struct_json(document)
    if document.get("type") == "record":
        return _from_avro(document)
    if isinstance(document.get("fields"), list):
        return _from_short_form(document)
    raise SchemaError(
        'the latest schema must be an Avro record ({"type": "record", ...}), a Spark StructType '
        '({"type": "struct", ...}) or {"fields": [...], "renames": {...}}'
    )


def load_latest_schema(path: str) -> LatestSchema:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise SchemaError(f"cannot read the latest schema {path}: {exc.strerror}") from None
    return parse_latest_schema(text)


def _from_struct_json(document: Mapping[str, Any]) -> LatestSchema:
    try:
        struct = StructType.fromJson(dict(document))
    except Exception as exc:
        raise SchemaError(f"the latest schema is not a valid Spark StructType: {exc}") from None
    defaults: dict[str, Any] = {}
    renames: dict[str, str] = {}
    for f in struct.fields:
        if "default" in f.metadata:
            defaults[f.name] = f.metadata["default"]
        for old in f.metadata.get("aliases", []) or []:
            renames[str(old)] = f.name
    return _checked(struct, defaults, renames)


def _from_short_form(document: Mapping[str, Any]) -> LatestSchema:
    fields: list[StructField] = []
    defaults: dict[str, Any] = {}
    for position, spec in enumerate(document["fields"]):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or "type" not in spec:
            raise SchemaError(f"field #{position + 1} of the latest schema needs a name and a type")
        name = spec["name"]
        fields.append(StructField(name, parse_type(spec["type"], f"field {name}"), bool(spec.get("nullable", True))))
        if "default" in spec:
            defaults[name] = spec["default"]
    renames = document.get("renames") or {}
    if not isinstance(renames, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in renames.items()):
        raise SchemaError('"renames" must map old field names to new ones')
    return _checked(StructType(fields), defaults, dict(renames))


def _checked(
    struct: StructType, defaults: dict[str, Any], renames: dict[str, str], avro: Mapping[str, Any] | None = None
) -> LatestSchema:
    names = [f.name for f in struct.fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SchemaError(f"the latest schema names {', '.join(duplicates)} more than once")
    for old, new in renames.items():
        if new not in names:
            raise SchemaError(f"rename {old} -> {new}: the latest schema has no field {new}")
        if old in names:
            raise SchemaError(f"rename {old} -> {new}: {old} is still a field of the latest schema")
    for name, value in defaults.items():
        if value is None and not struct[name].nullable:
            raise SchemaError(f"field {name} is not nullable but its default is null")
    return LatestSchema(struct, defaults, renames, avro)


def with_overrides(
    latest: LatestSchema, renames: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None
) -> LatestSchema:
    """`latest` with more renames (old -> new) and defaults (field -> JSON value) laid over its own."""
    merged_renames = {**latest.renames, **dict(renames or {})}
    merged_defaults = {**latest.defaults, **dict(defaults or {})}
    unknown = sorted(set(defaults or {}) - set(latest.names))
    if unknown:
        raise SchemaError(f"a default is given for {', '.join(unknown)}, which the latest schema does not have")
    return _checked(latest.struct, merged_defaults, merged_renames, latest.avro)


# ------------------------------------------------------------------------------------------------ Avro

_AVRO_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}


def _from_avro(document: Mapping[str, Any]) -> LatestSchema:
    named: dict[str, DataType] = {}
    struct = _avro_record(document, named, "the latest schema")
    defaults: dict[str, Any] = {}
    renames: dict[str, str] = {}
    for spec in document.get("fields", []):
        if "default" in spec:
            defaults[spec["name"]] = spec["default"]
        for old in spec.get("aliases", []) or []:
            renames[str(old)] = spec["name"]
    return _checked(struct, defaults, renames, document)


def _avro_record(spec: Mapping[str, Any], named: dict[str, DataType], where: str) -> StructType:
    fields = spec.get("fields")
    if not isinstance(fields, list):
        raise SchemaError(f"{where}: an Avro record needs a list of fields")
    struct = StructType()
    if spec.get("name"):
        named[str(spec["name"])] = struct  # filled below; recursive records are not supported by Spark anyway
    for position, field_spec in enumerate(fields):
        if not isinstance(field_spec, dict) or not isinstance(field_spec.get("name"), str) or "type" not in field_spec:
            raise SchemaError(f"{where}: field #{position + 1} needs a name and a type")
        name = field_spec["name"]
        data_type, nullable = _avro_type(field_spec["type"], named, f"{where}, field {name}")
        struct.add(name, data_type, nullable)
    return struct


def _avro_type(spec: Any, named: dict[str, DataType], where: str) -> tuple[DataType, bool]:
    """The Spark type of an Avro type, and whether it admits null."""
    if isinstance(spec, list):
        branches = [b for b in spec if b != "null"]
        if len(branches) != 1:
            raise SchemaError(f"{where}: only unions of null and one type map to a Spark field, not {spec!r}")
        data_type, _ = _avro_type(branches[0], named, where)
        return data_type, len(branches) != len(spec)
    if isinstance(spec, str):
        if spec in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[spec], False
        if spec in named:
            return named[spec], False
        raise SchemaError(f"{where}: unknown Avro type {spec!r}")
    if not isinstance(spec, dict):
        raise SchemaError(f"{where}: unknown Avro type {spec!r}")
    logical = spec.get("logicalType")
    kind = spec.get("type")
    if logical == "date":
        return DateType(), False
    if logical in ("timestamp-millis", "timestamp-micros", "timestamp-nanos"):
        return TimestampType(), False
    if logical in ("local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos"):
        return TimestampNTZType(), False
    if logical == "decimal":
        return DecimalType(int(spec.get("precision", 10)), int(spec.get("scale", 0))), False
    if kind == "record":
        return _avro_record(spec, named, where), False
    if kind == "array":
        items, items_null = _avro_type(spec.get("items"), named, f"{where} items")
        return ArrayType(items, items_null), False
    if kind == "map":
        values, values_null = _avro_type(spec.get("values"), named, f"{where} values")
        return MapType(StringType(), values, values_null), False
    if kind == "enum":
        result: DataType = StringType()
    elif kind == "fixed":
        result = BinaryType()
    else:
        return _avro_type(kind, named, where)
    if spec.get("name"):
        named[str(spec["name"])] = result
    return result, False
