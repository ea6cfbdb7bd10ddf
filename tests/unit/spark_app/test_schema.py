"""The latest schema in its three JSON forms, overrides from the spec, and clear errors."""

import json

import pytest
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_app.schema import SchemaError, parse_latest_schema, with_overrides


def test_short_form_with_type_aliases_defaults_and_renames():
    latest = parse_latest_schema(
        json.dumps(
            {
                "fields": [
                    {"name": "id", "type": "bigint", "nullable": False},
                    {"name": "amount", "type": "decimal(12,2)", "default": "0.00"},
                    {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": True}},
                    {"name": "kind", "type": "text"},
                ],
                "renames": {"type": "kind"},
            }
        )
    )
    assert latest.struct == StructType(
        [
            StructField("id", LongType(), False),
            StructField("amount", DecimalType(12, 2), True),
            StructField("tags", ArrayType(StringType(), True), True),
            StructField("kind", StringType(), True),
        ]
    )
    assert latest.defaults == {"amount": "0.00"}
    assert latest.older_names("kind") == ["type"]


def test_spark_struct_json_with_default_and_aliases_in_metadata():
    struct = StructType(
        [
            StructField("user_id", StringType(), False),
            StructField("country", StringType(), True, {"default": "unknown", "aliases": ["cc", "country_code"]}),
        ]
    )
    latest = parse_latest_schema(struct.json())
    assert latest.names == ["user_id", "country"]
    assert latest.defaults == {"country": "unknown"}
    assert latest.renames == {"cc": "country", "country_code": "country"}


def test_avro_record_schema():
    latest = parse_latest_schema(
        json.dumps(
            {
                "type": "record",
                "name": "Event",
                "fields": [
                    {"name": "id", "type": "long"},
                    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
                    {"name": "note", "type": ["null", "string"], "default": None},
                    {
                        "name": "kind",
                        "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]},
                        "aliases": ["type"],
                    },
                    {
                        "name": "origin",
                        "type": {
                            "type": "record",
                            "name": "Origin",
                            "fields": [{"name": "region", "type": "string", "default": "eu"}],
                        },
                    },
                    {"name": "attrs", "type": {"type": "map", "values": "int"}, "default": {}},
                    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
                    {"name": "again", "type": "Kind"},
                ],
            }
        )
    )
    types = {f.name: (f.dataType, f.nullable) for f in latest.struct.fields}
    assert types["id"] == (LongType(), False)
    assert types["ts"] == (TimestampType(), False)
    assert types["day"] == (DateType(), False)
    assert types["note"] == (StringType(), True)
    assert types["kind"] == (StringType(), False)
    assert types["origin"][0] == StructType([StructField("region", StringType(), False)])
    assert types["attrs"][0] == MapType(StringType(), IntegerType(), False)
    assert types["price"][0] == DecimalType(9, 2)
    assert types["again"][0] == StringType()
    assert latest.defaults == {"note": None, "attrs": {}}
    assert latest.renames == {"type": "kind"}


def test_overrides_from_the_spec_win_over_the_schema():
    latest = parse_latest_schema(
        json.dumps({"fields": [{"name": "a", "type": "int", "default": 1}, {"name": "b", "type": "double"}]})
    )
    merged = with_overrides(latest, renames={"old_b": "b"}, defaults={"a": 2, "b": 0.5})
    assert merged.defaults == {"a": 2, "b": 0.5}
    assert merged.renames == {"old_b": "b"}


@pytest.mark.parametrize(
    "document, message",
    [
        ("not json", "not JSON"),
        ('{"type": "record", "fields": [{"name": "x", "type": ["int", "string"]}]}', "only unions of null"),
        ('{"fields": [{"name": "x", "type": "varchar2"}]}', "unknown type"),
        ('{"fields": [{"name": "x", "type": "int"}, {"name": "x", "type": "int"}]}', "more than once"),
        ('{"fields": [{"name": "x", "type": "int"}], "renames": {"y": "z"}}', "no field z"),
        ('{"fields": [{"name": "x", "type": "int"}], "renames": {"x": "x"}}', "still a field"),
        ('{"fields": [{"name": "x", "type": "int", "nullable": false, "default": null}]}', "not nullable"),
        ('{"something": "else"}', "must be an Avro record"),
    ],
)
def test_bad_schemas_are_refused_naming_the_field(document, message):
    with pytest.raises(SchemaError, match=message):
        parse_latest_schema(document)


def test_a_default_for_an_unknown_field_is_refused():
    latest = parse_latest_schema('{"fields": [{"name": "x", "type": "int"}]}')
    with pytest.raises(SchemaError, match="does not have"):
        with_overrides(latest, defaults={"y": 1})


AVRO_LATEST = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer_name", "type": "string", "aliases": ["customer"]},
        {"name": "channel", "type": "string", "default": "web"},
    ],
}


def test_an_avro_latest_schema_is_the_reader_schema_with_the_specs_renames_and_defaults_folded_in():
    latest = with_overrides(
        parse_latest_schema(json.dumps(AVRO_LATEST)), renames={"buyer": "customer_name"}, defaults={"channel": "shop"}
    )
    reader = json.loads(latest.avro_reader_schema())
    fields = {f["name"]: f for f in reader["fields"]}
    assert fields["customer_name"]["aliases"] == ["buyer", "customer"]
    assert fields["channel"]["default"] == "shop"
    assert fields["id"] == {"name": "id", "type": "long"}


@pytest.mark.parametrize(
    "document",
    [
        {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]},
        {"fields": [{"name": "id", "type": "long"}]},
    ],
)
def test_a_latest_schema_that_is_not_avro_cannot_be_a_reader_schema(document):
    with pytest.raises(SchemaError, match="need the latest schema as an Avro record schema"):
        parse_latest_schema(json.dumps(document)).avro_reader_schema()
