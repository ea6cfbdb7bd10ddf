"""Schema evolution on tiny DataFrames: defaults, renames, widening, and refusals that name the field."""

import json
from datetime import date, datetime
from decimal import Decimal

import pytest
from pyspark.sql.types import (
    ArrayType,
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
    TimestampType,
)

from spark_app.evolution import evolve, widens
from spark_app.schema import LatestSchema, SchemaError, parse_latest_schema

LATEST = parse_latest_schema(
    json.dumps(
        {
            "fields": [
                {"name": "id", "type": "long", "nullable": False},
                {"name": "event_type", "type": "string"},
                {"name": "amount", "type": "long"},
                {"name": "score", "type": "double"},
                {"name": "currency", "type": "string", "default": "N/A"},
                {
                    "name": "tags",
                    "type": {"type": "array", "elementType": "string", "containsNull": True},
                    "default": ["none"],
                },
            ],
            "renames": {"kind": "event_type"},
        }
    )
)

V1 = StructType(
    [
        StructField("id", IntegerType()),
        StructField("kind", StringType()),
        StructField("amount", IntegerType()),
        StructField("score", FloatType()),
    ]
)
V3 = StructType(
    [
        StructField("id", LongType()),
        StructField("event_type", StringType()),
        StructField("amount", LongType()),
        StructField("score", DoubleType()),
        StructField("currency", StringType()),
        StructField("tags", ArrayType(StringType())),
    ]
)


def rows(df):
    return [r.asDict(recursive=True) for r in df.orderBy("id").collect()]


def test_older_records_get_renamed_widened_and_defaulted_fields(spark):
    old = spark.createDataFrame([(1, "click", 7, 0.25)], V1)
    evolved = evolve(old, LATEST, writer_schema_known=True)
    assert evolved.columns == LATEST.names
    assert [f.dataType for f in evolved.schema.fields] == [f.dataType for f in LATEST.struct.fields]
    assert rows(evolved) == [
        {"id": 1, "event_type": "click", "amount": 7, "score": 0.25, "currency": "N/A", "tags": ["none"]}
    ]


def test_a_null_written_under_the_latest_schema_stays_null_when_the_writer_schema_is_known(spark):
    new = spark.createDataFrame([(2, "view", 8, 1.5, None, None)], V3)
    assert rows(evolve(new, LATEST, writer_schema_known=True))[0]["currency"] is None


def test_without_a_writer_schema_null_fields_get_their_default(spark):
    # JSON: one merged read schema for every record; absent and null look the same.
    merged = spark.createDataFrame(
        [(1, None, "click", 7, 0.5, None, None), (2, "view", None, 8, 1.0, "EUR", ["a"])],
        "id long, event_type string, kind string, amount long, score double, currency string, tags array<string>",
    )
    result = rows(evolve(merged, LATEST, writer_schema_known=False))
    assert [(r["event_type"], r["currency"], r["tags"]) for r in result] == [
        ("click", "N/A", ["none"]),
        ("view", "EUR", ["a"]),
    ]


def test_fields_dropped_from_the_latest_schema_are_dropped_and_carried_columns_kept(spark):
    df = spark.createDataFrame(
        [(1, "x", 3, 1.0, "2024-01-01", "gone")],
        "id long, event_type string, amount long, score double, dt string, legacy string",
    )
    evolved = evolve(df, LATEST, writer_schema_known=True, carry=["dt"])
    assert evolved.columns == LATEST.names + ["dt"]


def test_nested_structs_arrays_and_maps_widen_by_field_name(spark):
    latest = LatestSchema(
        StructType(
            [
                StructField("id", LongType()),
                StructField(
                    "origin",
                    StructType(
                        [
                            StructField("region", StringType()),
                            StructField("zone", IntegerType()),
                            StructField("weight", DoubleType()),
                        ]
                    ),
                ),
                StructField("counts", ArrayType(LongType())),
                StructField("prices", MapType(StringType(), DecimalType(12, 2))),
                StructField("day", TimestampType()),
            ]
        )
    )
    old = spark.createDataFrame(
        [(1, {"weight": 2.5, "region": "eu"}, [1, 2], {"a": 3}, date(2024, 1, 2))],
        "id int, origin struct<weight: float, region: string>, counts array<int>, prices map<string,int>, day date",
    )
    result = rows(evolve(old, latest, writer_schema_known=True))[0]
    assert result["origin"] == {"region": "eu", "zone": None, "weight": 2.5}
    assert result["counts"] == [1, 2]
    assert result["prices"] == {"a": Decimal("3.00")}
    assert result["day"] == datetime(2024, 1, 2)  # midnight UTC, shown naive in the UTC session


@pytest.mark.parametrize(
    "ddl, message",
    [
        ("id long, amount string", "amount: string in older records cannot be widened to bigint"),
        ("id long, score decimal(38,10)", "score: decimal(38,10) in older records cannot be widened to double"),
        ("id long, tags map<string,string>", "tags: map<string,string> in older records cannot be widened"),
    ],
)
def test_narrowing_or_changing_a_type_is_refused(spark, ddl, message):
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evolve(spark.createDataFrame([], ddl), LATEST, writer_schema_known=True)


def test_a_missing_required_field_without_default_is_refused(spark):
    with pytest.raises(SchemaError, match="field id is missing .* not nullable"):
        evolve(spark.createDataFrame([], "amount long"), LATEST, writer_schema_known=True)


def test_widening_rules():
    assert widens(IntegerType(), LongType()) and widens(LongType(), DoubleType()) and widens(FloatType(), DoubleType())
    assert widens(IntegerType(), DecimalType(10, 0)) and not widens(IntegerType(), DecimalType(10, 2))
    assert widens(DecimalType(10, 2), DecimalType(12, 3)) and not widens(DecimalType(10, 2), DecimalType(10, 3))
    assert widens(DateType(), TimestampType())
    assert not widens(LongType(), IntegerType()) and not widens(DoubleType(), FloatType())
    assert not widens(StringType(), LongType()) and not widens(TimestampType(), DateType())
