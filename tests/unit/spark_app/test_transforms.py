"""The job's DataFrame steps on tiny frames: day pruning, time range, filter, per-key order, headers, read-back."""

from datetime import date, datetime, timezone

import pytest
from pyspark.sql import functions as F

from spark_app import transforms as T

UTC = timezone.utc


@pytest.fixture(scope="module")
def day_partitioned(spark, tmp_path_factory):
    """A parquet table of 4 day partitions, 2 rows each (tiny files in a temp folder)."""
    folder = tmp_path_factory.mktemp("lake") / "events"
    rows = [
        (f"u{i % 3}", datetime(2024, 1, 1 + d, 6 * i, tzinfo=UTC), date(2024, 1, 1 + d))
        for d in range(4)
        for i in range(2)
    ]
    spark.createDataFrame(rows, "user_id string, ts timestamp, dt date").write.partitionBy("dt").parquet(str(folder))
    return spark.read.parquet(str(folder))


def test_day_bounds_cover_the_half_open_range():
    assert T.day_bounds(datetime(2024, 1, 2, 5, tzinfo=UTC), datetime(2024, 1, 4, tzinfo=UTC)) == (
        "2024-01-02",
        "2024-01-03",
    )
    assert T.day_bounds(None, datetime(2024, 1, 4, 0, 0, 1, tzinfo=UTC)) == (None, "2024-01-04")


def files_read(df):
    """The day folders whose files a scan of `df` actually opens."""
    return sorted(
        {r.path.split("dt=")[1][:10] for r in df.select(F.col("_metadata.file_path").alias("path")).collect()}
    )


def test_pruning_reads_only_the_files_of_the_range_days(day_partitioned):
    assert files_read(day_partitioned) == ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
    pruned = T.prune_days(day_partitioned, "dt", "2024-01-02", "2024-01-03")
    assert "PartitionFilters: [isnotnull(dt" in pruned._jdf.queryExecution().executedPlan().toString()
    assert files_read(pruned) == ["2024-01-02", "2024-01-03"]
    assert files_read(T.prune_days(day_partitioned, "dt", None, "2024-01-01")) == ["2024-01-01"]
    assert files_read(T.only_days(day_partitioned, "dt", ["2024-01-01", "2024-01-04"])) == ["2024-01-01", "2024-01-04"]


def test_days_as_text_partitions_prune_too(spark):
    df = spark.createDataFrame([("a", "2024-01-01"), ("b", "2024-01-02")], "k string, day string")
    assert [r.k for r in T.prune_days(df, "day", "2024-01-02", "2024-01-09").collect()] == ["b"]
    assert [r.d for r in df.select(T.day_of(df.schema["day"].dataType, F.col("day")).alias("d")).collect()] == [
        "2024-01-01",
        "2024-01-02",
    ]


def test_time_range_is_from_inclusive_to_exclusive_for_every_event_time_encoding(spark):
    start, end = datetime(2024, 1, 2, tzinfo=UTC), datetime(2024, 1, 3, tzinfo=UTC)
    stamps = [datetime(2024, 1, 1, 23, 59, 59, tzinfo=UTC), start, datetime(2024, 1, 2, 23, 59, 59, tzinfo=UTC), end]
    as_timestamps = spark.createDataFrame([(i, s) for i, s in enumerate(stamps)], "i int, ts timestamp")
    as_millis = spark.createDataFrame([(i, int(s.timestamp() * 1000)) for i, s in enumerate(stamps)], "i int, ts long")
    as_text = spark.createDataFrame([(i, s.isoformat()) for i, s in enumerate(stamps)], "i int, ts string")
    for df in (as_timestamps, as_millis, as_text):
        assert sorted(r.i for r in T.within_time_range(df, "ts", start, end).collect()) == [1, 2]
    assert sorted(r.i for r in T.within_time_range(as_timestamps, "ts", None, end).collect()) == [0, 1, 2]


def test_sql_filter_keeps_only_true_rows_and_a_bad_one_names_the_problem(spark):
    df = spark.createDataFrame([("view", 5), ("buy", 50), (None, 500)], "event_type string, amount long")
    kept = T.keep_matching(df, "event_type <> 'view' AND amount >= 10")
    assert [r.amount for r in kept.collect()] == [50]  # null <> 'view' is null: left out, as in SQL
    assert T.keep_matching(df, None) is df
    with pytest.raises(T.FilterError, match="no_such_column"):
        T.keep_matching(df, "no_such_column = 1")


def labelled(spark, rows):
    df = spark.createDataFrame(rows, "user_id string, ts timestamp, amount long, note string, dt string")
    return T.label_records(
        df, fields=["user_id", "ts", "amount", "note"], key_column="user_id", timestamp_column="ts", day=F.col("dt")
    )


def test_labels_carry_key_day_event_time_and_a_json_value_with_nulls(spark):
    row = labelled(spark, [("u1", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), 7, None, "2024-01-02")]).first()
    assert (row[T.KEY], row[T.DAY]) == ("u1", "2024-01-02")
    assert row[T.VALUE] == '{"user_id":"u1","ts":"2024-01-02T03:04:05.000Z","amount":7,"note":null}'


def test_records_are_ordered_and_numbered_per_key_and_day_in_one_shuffle(spark):
    t = lambda h, m=0: datetime(2024, 1, 2, h, m, tzinfo=UTC)  # noqa: E731
    rows = [
        ("u1", t(5), 3, None, "2024-01-02"),
        ("u2", t(1), 1, None, "2024-01-02"),
        ("u1", t(1), 2, None, "2024-01-02"),
        ("u1", t(1), 1, None, "2024-01-02"),  # same time: value decides
        ("u1", datetime(2024, 1, 1, 23, tzinfo=UTC), 9, None, "2024-01-01"),
        ("u3", t(2), 4, None, "2024-01-02"),
    ]
    ordered = T.in_key_order(labelled(spark, rows), partitions=2)
    plan = ordered._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan
    assert plan.count("Sort [") == 1, plan  # the window's sort is the only one: the output keeps its order
    per_task = ordered.rdd.glom().collect()
    where = {}
    for task, task_rows in enumerate(per_task):
        for r in task_rows:
            where.setdefault(r[T.KEY], set()).add(task)
    assert all(len(tasks) == 1 for tasks in where.values())  # every key in exactly one task
    u1 = [(r[T.DAY], r[T.SEQUENCE], r["amount"]) for task_rows in per_task for r in task_rows if r[T.KEY] == "u1"]
    assert u1 == [("2024-01-01", 1, 9), ("2024-01-02", 1, 1), ("2024-01-02", 2, 2), ("2024-01-02", 3, 3)]


def test_kafka_rows_have_key_value_and_replay_headers(spark):
    ordered = T.in_key_order(labelled(spark, [("u1", datetime(2024, 1, 2, tzinfo=UTC), 1, "x", "2024-01-02")]), 1)
    row = T.kafka_rows(ordered, "s3a://lake/events", "dt").first()
    assert row.key == "u1"
    assert [(h.key, bytes(h.value)) for h in row.headers] == [
        ("reprise-replay", b"true"),
        ("reprise-origin", b"s3a://lake/events#dt=2024-01-02"),
        ("reprise-seq", b"1"),
    ]


def test_slices_split_keys_into_disjoint_sets_that_cover_everything(spark):
    df = spark.range(200).select(F.concat(F.lit("k"), (F.col("id") % 37).cast("string")).alias(T.KEY))
    slices = [{r[T.KEY] for r in T.in_slice(df, i, 3).collect()} for i in range(3)]
    assert set().union(*slices) == {f"k{i}" for i in range(37)}
    assert sum(len(s) for s in slices) == 37
    assert T.in_slice(df, 0, 1) is df


def kafka_like(spark, records):
    """Rows shaped like Spark's Kafka source with headers: (key, partition, offset, origin, seq)."""
    rows = [
        (
            k.encode() if k is not None else None,
            p,
            o,
            [("reprise-replay", b"true"), ("reprise-origin", origin.encode()), ("reprise-seq", str(seq).encode())],
        )
        for k, p, o, origin, seq in records
    ]
    return spark.createDataFrame(
        rows, "key binary, partition int, offset long, headers array<struct<key: string, value: binary>>"
    )


def test_read_back_finds_this_replays_days_and_its_duplicates_and_order_breaks(spark):
    o = "file:///lake#dt="
    topic = kafka_like(
        spark,
        [
            ("a", 0, 0, o + "2024-01-01", 1),
            ("a", 0, 1, o + "2024-01-01", 2),
            ("a", 0, 2, o + "2024-01-01", 2),
            ("b", 1, 0, o + "2024-01-02", 2),
            ("b", 1, 1, o + "2024-01-02", 1),
            ("c", 1, 2, "file:///other#dt=2024-01-01", 1),
            (None, 0, 3, o + "2024-01-02", 2),
            (None, 1, 3, o + "2024-01-02", 1),  # no key: spread over partitions, no order to check
        ],
    )
    mine = T.replay_headers(topic, "file:///lake", "dt")
    assert mine.count() == 7
    checks = {r.day: (r.records, r.duplicates, r.out_of_order) for r in T.read_back_checks(mine).collect()}
    assert checks == {"2024-01-01": (3, 1, 0), "2024-01-02": (4, 0, 1)}
    assert T.replay_headers(topic, "file:///lake", "dt", ["2024-01-02"]).count() == 4


def test_records_already_in_the_topic_are_left_out_null_keys_included(spark):
    records = spark.createDataFrame(
        [
            ("2024-01-01", "a", 1),
            ("2024-01-01", "a", 2),
            ("2024-01-01", None, 1),
            ("2024-01-01", None, 2),
            ("2024-01-02", "a", 1),
        ],
        f"{T.DAY} string, {T.KEY} string, {T.SEQUENCE} int",
    )
    written = spark.createDataFrame(
        [("2024-01-01", "a", 1), ("2024-01-01", None, 1)], "day string, key string, seq long"
    )
    left = sorted((r[T.DAY], r[T.KEY] or "-", r[T.SEQUENCE]) for r in T.without_written(records, written).collect())
    assert left == [("2024-01-01", "-", 2), ("2024-01-01", "a", 2), ("2024-01-02", "a", 1)]
