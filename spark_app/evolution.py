"""Schema evolution: records written under an older schema, brought to the latest one (pure DataFrame code).

For each field of the latest schema, `evolve()` takes the first of its names present in the input (its
latest name, then its older names from the renames), widens the type if needed, and otherwise gives the
field its default (or null when it is nullable). Fields the latest schema dropped are dropped.

Whether a null may be replaced by the default depends on what is known of the writer's schema:

- `writer_schema_known=True` (Parquet, read one group of files with the same footer schema at a time): the
  default goes only to records whose files lack the field; a null written under the latest schema stays null,
  as in Avro schema resolution.
- `writer_schema_known=False` (JSON, Delta, Iceberg: one merged schema for all records): absent and null
  cannot be told apart (Spark's JSON writer omits nulls), so a null field with a default gets the default.

Widening follows Avro's promotions and Spark's type widening: byte < short < int < long, integers to
float/double and to wide enough decimals, float to double, decimals to more digits, date to timestamp,
recursively through structs (by field name), arrays and maps. Anything narrower is a SchemaError naming the
field: a silent cast would lose data.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from .schema import LatestSchema, SchemaError

_INTEGRAL_DIGITS = {ByteType: 3, ShortType: 5, IntegerType: 10, LongType: 20}
_INTEGRAL_RANK = {ByteType: 1, ShortType: 2, IntegerType: 3, LongType: 4}


def column(name: str) -> Column:
    """A top-level column by its exact name, even when the name holds dots or backticks."""
    return F.col("`" + name.replace("`", "``") + "`")


def widens(source: DataType, target: DataType) -> bool:
    """Whether every value of `source` converts to `target` without loss of range (primitive types)."""
    if source == target or isinstance(source, NullType):
        return True
    s, t = type(source), type(target)
    if s in _INTEGRAL_RANK:
        if t in _INTEGRAL_RANK:
            return _INTEGRAL_RANK[t] > _INTEGRAL_RANK[s]
        if t in (FloatType, DoubleType):
            return True  # Avro's promotions: large longs lose precision, never range
        if t is DecimalType:
            return target.precision - target.scale >= _INTEGRAL_DIGITS[s]  # type: ignore[attr-defined]
        return False
    if s is FloatType:
        return t is DoubleType
    if s is DecimalType and t is DecimalType:
        return (
            target.scale >= source.scale  # type: ignore[attr-defined]
            and target.precision - target.scale >= source.precision - source.scale
        )  # type: ignore[attr-defined]
    if s is DateType:
        return t in (TimestampType, TimestampNTZType)
    if s is TimestampNTZType:
        return t is TimestampType
    return False


def convert(value: Column, source: DataType, target: DataType, path: str) -> Column:
    """`value` (of type `source`) as `target`, widening recursively; SchemaError when it would narrow."""
    if source == target:
        return value
    if isinstance(source, NullType):
        return F.lit(None).cast(target)
    if isinstance(source, StructType) and isinstance(target, StructType):
        present = {f.name: f for f in source.fields}
        parts = []
        for wanted in target.fields:
            if wanted.name in present:
                parts.append(
                    convert(
                        value[wanted.name], present[wanted.name].dataType, wanted.dataType, f"{path}.{wanted.name}"
                    ).alias(wanted.name)
                )
            elif wanted.nullable:
                parts.append(F.lit(None).cast(wanted.dataType).alias(wanted.name))
            else:
                raise SchemaError(f"field {path}.{wanted.name} is missing from older records and is not nullable")
        return F.when(value.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*parts))
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return F.transform(value, lambda item: convert(item, source.elementType, target.elementType, f"{path}[]"))
    if isinstance(source, MapType) and isinstance(target, MapType):
        if source.keyType != target.keyType:
            raise SchemaError(
                f"field {path}: map keys changed from {source.keyType.simpleString()} to "
                f"{target.keyType.simpleString()}, which is not a widening"
            )
        return F.transform_values(value, lambda _, v: convert(v, source.valueType, target.valueType, f"{path}{{}}"))
    if widens(source, target):
        return value.cast(target)
    raise SchemaError(
        f"field {path}: {source.simpleString()} in older records cannot be widened to "
        f"{target.simpleString()} of the latest schema"
    )


def default_value(field: StructField, value: Any) -> Column:
    """The default of `field` as a typed literal; strings are cast, so timestamps may be given as text."""
    if value is None:
        return F.lit(None).cast(field.dataType)
    if isinstance(field.dataType, (StructType, ArrayType, MapType)):
        # A nested default is JSON: parse it with the field's own type.
        holder = StructType([StructField("v", field.dataType)])
        return F.from_json(F.lit(json.dumps({"v": value})), holder)["v"]
    return F.lit(value).cast(field.dataType)


def evolve(df: DataFrame, latest: LatestSchema, *, writer_schema_known: bool, carry: Sequence[str] = ()) -> DataFrame:
    """`df` with exactly the latest schema's fields, in its order, followed by the `carry` columns as they are."""
    present = {f.name: f.dataType for f in df.schema.fields}
    selected: list[Column] = []
    for target in latest.struct.fields:
        names = [n for n in (target.name, *latest.older_names(target.name)) if n in present]
        has_default = target.name in latest.defaults
        if names:
            candidates = [convert(column(n), present[n], target.dataType, n) for n in names]
            value = candidates[0] if len(candidates) == 1 else F.coalesce(*candidates)
            if has_default and not writer_schema_known:
                value = F.coalesce(value, default_value(target, latest.defaults[target.name]))
        elif has_default:
            value = default_value(target, latest.defaults[target.name])
        elif target.nullable:
            value = F.lit(None).cast(target.dataType)
        else:
            raise SchemaError(
                f"field {target.name} is missing from records written under an older schema, "
                f"is not nullable and has no default: give it one (--default {target.name}=...)"
            )
        selected.append(value.alias(target.name))
    selected.extend(column(c) for c in carry)
    return df.select(*selected)
