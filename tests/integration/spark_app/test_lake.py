"""Reading the lake in the job's own process (no Kafka): JSON lakes, lakes read without a partition column,
and the dry run into Spark's noop sink."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone

import pytest

from spark_app import transforms as T
from spark_app.job import latest_schema_of, run
from spark_app.lake import LakeFormatUnavailable, LakeLayoutError, LakeTable
from spark_app.lakegen import LATEST_SCHEMA, LakeSpec, expected_records, write_lake
from spark_app.settings import parse_settings

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 2, 12, tzinfo=timezone.utc)
END = datetime(2024, 1, 5, tzinfo=timezone.utc)


def settings(uri, schema_path, *extra):
    return parse_settings(
        [
            "--source",
            uri,
            "--timestamp-column",
            "ts",
            "--key-column",
            "user_id",
            "--from",
            "2024-01-02T12:00:00Z",
            "--to",
            "2024-01-05T00:00:00Z",
            "--latest-schema",
            str(schema_path),
            "--bootstrap-servers",
            "unused:9092",
            "--topic",
            "unused",
            "--progress",
            "file:///unused",
            *extra,
        ]
    )


def values(spark, s):
    frame = LakeTable(spark, s, latest_schema_of(s)).records()
    return {json.loads(r[T.VALUE])["event_id"]: (r[T.DAY], json.loads(r[T.VALUE])) for r in frame.collect()}


@pytest.fixture(scope="module")
def schema_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "latest.json"
    path.write_text(json.dumps(LATEST_SCHEMA))
    return path


def test_a_json_lake_is_read_with_the_latest_schema_and_null_fields_get_defaults(spark, tmp_path, schema_path):
    spec = LakeSpec(rows=3000, days=6, keys=40)
    write_lake(spark, spec, f"file://{tmp_path}/events", fmt="json")
    got = values(
        spark, settings(f"file://{tmp_path}/events", schema_path, "--format", "json", "--partition-column", "dt")
    )
    expected = dict(expected_records(spec, START, END))
    assert len(got) == len(expected)
    for n, want in expected.items():
        day, value = got[want["event_id"]]
        assert day == spec.day_text(n)
        # Spark's JSON writer drops nulls, so a null channel cannot be told from a missing one: it gets the default.
        want = dict(
            want,
            ts=want["ts"].strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            channel=want["channel"] if want["channel"] is not None else "legacy",
        )
        assert value == want


def test_without_a_partition_column_days_come_from_the_event_time(spark, lake):
    got = values(spark, settings(lake.uri, lake.schema_path))
    expected = dict(expected_records(lake.spec, START, END))
    assert sorted(v["event_id"] for _, v in got.values()) == sorted(w["event_id"] for w in expected.values())
    assert Counter(day for day, _ in got.values()) == Counter(lake.spec.day_text(n) for n in expected)


def test_a_dry_run_counts_every_day_and_writes_nothing_anywhere(spark, lake):
    outcome = run(spark, settings(lake.uri, lake.schema_path, "--partition-column", "dt", "--dry-run"))
    assert outcome.day_counts == Counter(lake.spec.day_text(n) for n, _ in expected_records(lake.spec, START, END))
    assert outcome.plan is None  # no progress, no Kafka


def test_a_wrong_partition_column_is_named(spark, lake):
    with pytest.raises(LakeLayoutError, match="no column day"):
        LakeTable(
            spark,
            settings(lake.uri, lake.schema_path, "--format", "json", "--partition-column", "day"),
            latest_schema_of(settings(lake.uri, lake.schema_path)),
        ).records().count()


@pytest.mark.parametrize("fmt, package", [("delta", "io.delta:delta-spark_2.13"), ("iceberg", "iceberg-spark-runtime")])
def test_table_formats_without_their_package_say_what_to_add(spark, lake, fmt, package):
    s = settings(lake.uri, lake.schema_path, "--format", fmt, "--partition-column", "dt")
    with pytest.raises(LakeFormatUnavailable, match=package):
        LakeTable(spark, s, latest_schema_of(s)).records()
