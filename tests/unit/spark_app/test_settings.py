"""The job's command line: the contract with the operator, and its readable refusals."""

from datetime import datetime, timezone

import pytest

from spark_app.settings import parse_settings

REQUIRED = [
    "--source",
    "s3a://lake/events/",
    "--timestamp-column",
    "ts",
    "--key-column",
    "user_id",
    "--to",
    "2024-03-01T00:00:00Z",
    "--bootstrap-servers",
    "kafka:9092",
    "--topic",
    "events.backfill",
    "--progress",
    "s3a://lake/_reprise/progress/lr-1",
]


def test_required_flags_give_defaults_for_the_rest():
    s = parse_settings(REQUIRED)
    assert s.source == "s3a://lake/events"  # trailing slash dropped: origins and identity stay stable
    assert s.end == datetime(2024, 3, 1, tzinfo=timezone.utc)
    assert (s.start, s.partition_column, s.format, s.filter, s.latest_schema) == (None, None, "parquet", None, None)
    assert (s.max_records_per_second, s.validate, s.dry_run) == (0, True, False)
    assert s.origin == "s3a://lake/events"


def test_every_flag_is_read():
    s = parse_settings(
        REQUIRED
        + [
            "--format",
            "json",
            "--partition-column",
            "dt",
            "--from",
            "2024-02-01T00:00:00+01:00",
            "--filter",
            "  event_type <> 'view'  ",
            "--latest-schema",
            "/etc/schema.json",
            "--rename",
            "kind=event_type",
            "--default",
            'currency="EUR"',
            "--kafka-settings",
            "/etc/kafka",
            "--origin-id",
            "ns/lr-1",
            "--max-records-per-second",
            "5000",
            "--no-validate",
            "--max-records-per-write",
            "10",
            "--write-partitions",
            "4",
            "--slice-seconds",
            "2.5",
            "--spark-conf",
            "spark.jars=/a.jar,/b.jar",
        ]
    )
    assert s.start == datetime(2024, 1, 31, 23, tzinfo=timezone.utc)  # converted to UTC
    assert s.filter == "event_type <> 'view'"
    assert s.renames == (("kind", "event_type"),)
    assert s.defaults == (("currency", '"EUR"'),)
    assert (s.kafka_settings, s.origin, s.max_records_per_second, s.validate) == ("/etc/kafka", "ns/lr-1", 5000, False)
    assert (s.max_records_per_write, s.write_partitions, s.slice_seconds) == (10, 4, 2.5)
    assert s.spark_conf == (("spark.jars", "/a.jar,/b.jar"),)
    assert s.identity()["from"] == "2024-01-31T23:00:00Z"


def test_nested_key_columns_are_allowed():
    s = parse_settings([a if a != "user_id" else "payload.user_id" for a in REQUIRED])
    assert s.key_column == "payload.user_id"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--from", "2024-03-01T00:00:00Z"], "must be after --from"),
        (["--from", "2024-02-01T00:00:00"], "no UTC offset"),
        (["--from", "yesterday"], "not an RFC 3339 timestamp"),
        (["--format", "orc"], "invalid choice"),
        (["--max-records-per-second", "-1"], "negative"),
        (["--default", "currency=EUR"], "not JSON text"),
        (["--rename", "kind=event_type"], "need --latest-schema"),
        (["--partition-column", "dt; drop"], "not a column name"),
        (["--max-records-per-write", "0"], "at least 1"),
        (["--format", "avro"], "--format avro needs --latest-schema"),
        (["--as-of-version", "1"], "are for --format delta or iceberg, not parquet"),
        (["--format", "delta", "--as-of-version", "1", "--as-of-timestamp", "2024-01-01T00:00:00Z"], "not both"),
    ],
)
def test_bad_values_are_refused_with_a_readable_line(extra, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_settings(REQUIRED + extra)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_required_flag_is_named(capsys):
    with pytest.raises(SystemExit):
        parse_settings([a for a in REQUIRED if a not in ("--topic", "events.backfill")])
    assert "--topic" in capsys.readouterr().err


def test_identity_changes_with_anything_that_changes_the_records():
    base = parse_settings(REQUIRED).identity()
    assert parse_settings(REQUIRED + ["--filter", "amount > 1"]).identity() != base
    assert parse_settings(REQUIRED + ["--max-records-per-second", "10"]).identity() == base  # pacing is not content


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2024-03-01T00:00:00Z", datetime(2024, 3, 1, tzinfo=timezone.utc)),
        ("2024-03-01t01:02:03.5z", datetime(2024, 3, 1, 1, 2, 3, 500000, tzinfo=timezone.utc)),
        ("2024-03-01 01:02:03.123456789+02:00", datetime(2024, 2, 29, 23, 2, 3, 123456, tzinfo=timezone.utc)),
    ],
)
def test_rfc3339_forms_python_3_10_would_refuse_are_read(text, expected):
    from spark_app.settings import parse_time

    assert parse_time(text) == expected


def test_avro_settings_without_a_reader_schema_cannot_be_made():
    from dataclasses import replace

    s = parse_settings(REQUIRED)
    with pytest.raises(ValueError, match="format avro needs latest_schema"):
        replace(s, format="avro")


def test_time_travel_is_part_of_the_replays_identity():
    delta = REQUIRED + ["--format", "delta"]
    base = parse_settings(delta).identity()
    assert "as_of_version" not in base  # replays that predate time travel keep their identity
    assert parse_settings(delta + ["--as-of-version", "2"]).identity() != base
    assert parse_settings(delta + ["--as-of-timestamp", "2024-01-01T00:00:00Z"]).identity() != base
