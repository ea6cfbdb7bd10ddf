"""The job's transforms, DataFrame in, DataFrame out, with no I/O: testable on tiny local DataFrames.

Order of a run: prune to the range's day partitions -> evolve to the latest schema (evolution.py) -> keep the
time range [from, to) on the event time -> apply the SQL filter -> label each record with its day, its value
(JSON of the evolved record) and its key -> spread by key and order per key -> Kafka rows with headers.

Per-key order: all records of a key go to one Spark task (`repartition` by key), which sorts them by
(day, event time, value) and numbers them per (key, day) (`_reprise_seq`). Spark's Kafka sink sends a
task's rows in order, a key always maps to the same Kafka partition (murmur2 of the key bytes), and the
producer is idempotent with at most 5 requests in flight, so the partition log keeps that order. Across days
the order is the days' order: the same as event-time order when the lake is partitioned by event date.

The number `_reprise_seq` travels in a header: with the day it names each record, which lets a retry
find which records of a half-written day are already in the topic (job.py).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DateType,
    IntegralType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

# Columns the job adds next to the record's own fields; the record itself never holds them.
DAY = "_reprise_day"
VALUE = "_reprise_value"
KEY = "_reprise_key"
SEQUENCE = "_reprise_seq"
EVENT_TIME = "_reprise_event_time"

HEADER_REPLAY = "reprise-replay"
HEADER_ORIGIN = "reprise-origin"
HEADER_SEQUENCE = "reprise-seq"

DAY_FORMAT = "yyyy-MM-dd"


class FilterError(ValueError):
    """The SQL filter does not compile against the latest schema."""


def path(name: str) -> Column:
    """A column by name, where dots reach into struct fields (`payload.user_id`), as the LakeReplay API allows."""
    return F.col(".".join("`" + part.replace("`", "``") + "`" for part in name.split(".")))


# ---------------------------------------------------------------------------------------------- days


def day_bounds(start: datetime | None, end: datetime) -> tuple[str | None, str]:
    """The first and last UTC day touched by [start, end), as YYYY-MM-DD (first is None without a start)."""
    last = (end - timedelta(microseconds=1)).date()
    return (start.date().isoformat() if start else None), last.isoformat()


def origin_of(origin: str, day_label: str, day: str) -> str:
    """The `reprise-origin` header value of one day: `<origin>#<partition column>=<day>`."""
    return f"{origin}#{day_label}={day}"


def _day_literal(data_type: DataType, day: str) -> Column:
    # A literal of the partition column's own type keeps the predicate a plain partition filter (pruned
    # from the file listing, and pushed into Delta and Iceberg scans).
    if isinstance(data_type, DateType):
        return F.lit(date.fromisoformat(day))
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return F.lit(day).cast(data_type)
    return F.lit(day)


def prune_days(df: DataFrame, partition_column: str, first: str | None, last: str) -> DataFrame:
    """Only the day partitions from `first` (None: the oldest) to `last`, both included."""
    data_type = df.schema[partition_column].dataType
    condition = path(partition_column) <= _day_literal(data_type, last)
    if first is not None:
        condition = condition & (path(partition_column) >= _day_literal(data_type, first))
    return df.where(condition)


def only_days(df: DataFrame, partition_column: str, days: Sequence[str]) -> DataFrame:
    """Only the given day partitions (a resume unit)."""
    data_type = df.schema[partition_column].dataType
    return df.where(path(partition_column).isin(*[_day_literal(data_type, d) for d in days]))


def day_of(data_type: DataType, value: Column) -> Column:
    """A day partition value (date, timestamp or YYYY-MM-DD text) as YYYY-MM-DD text."""
    if isinstance(data_type, StringType):
        return value
    return F.date_format(value, DAY_FORMAT)


# ---------------------------------------------------------------------------------------------- time


def event_time(data_type: DataType, value: Column) -> Column:
    """The event time as a timestamp: timestamps as they are, dates at midnight, text parsed as ISO 8601,
    integers as epoch milliseconds (the common lake encoding)."""
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return value
    if isinstance(data_type, IntegralType):
        return F.timestamp_millis(value)
    return value.cast(TimestampType())


def within_time_range(df: DataFrame, timestamp_column: str, start: datetime | None, end: datetime) -> DataFrame:
    """Only records with start <= event time < end (UTC)."""
    moment = event_time(type_at(df, timestamp_column), path(timestamp_column))
    condition = moment < F.lit(end)
    if start is not None:
        condition = condition & (moment >= F.lit(start))
    return df.where(condition)


def keep_matching(df: DataFrame, sql: str | None) -> DataFrame:
    """Only records for which the SQL condition is true (null counts as false, as in SQL WHERE)."""
    if not sql:
        return df
    try:
        condition = F.expr(sql)
        filtered = df.where(condition)
        filtered.schema  # noqa: B018 - analyse now: a bad filter fails here, with the column names in the message
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FilterError(f"the filter {sql!r} does not apply to the latest schema: {first}") from None
    return filtered


# ---------------------------------------------------------------------------------------------- records


def label_records(
    df: DataFrame, *, fields: Sequence[str], key_column: str, timestamp_column: str, day: Column
) -> DataFrame:
    """The record fields plus its day, its Kafka key text, its event time and its value (JSON of the fields).

    Null fields are written as null (not omitted), so every value carries the whole latest schema.
    """
    record = F.struct(*[F.col("`" + f.replace("`", "``") + "`") for f in fields])
    return df.select(
        *[F.col("`" + f.replace("`", "``") + "`") for f in fields],
        day.alias(DAY),
        path(key_column).cast(StringType()).alias(KEY),
        event_time(type_at(df, timestamp_column), path(timestamp_column)).alias(EVENT_TIME),
        F.to_json(record, {"ignoreNullFields": "false"}).alias(VALUE),
    )


def in_key_order(df: DataFrame, partitions: int) -> DataFrame:
    """Every key in one task, numbered and sorted per key by (day, event time, value).

    The window needs its rows clustered by (key, day); hash-partitioning by key already satisfies that,
    so the data is shuffled once. It also needs them sorted by (key, day, event time, value), and numbers
    them in that order, so that order is also (key, day, sequence): the sort asked for here is the window's
    own, which Spark drops as already satisfied. Sorting by (key, day, sequence) instead planned a second
    full sort of every record (Spark cannot know the sequence follows the window's order), paid by the
    noop side as much as by the Kafka side (about 0.2 CPU-s of the executor threads per million records).
    """
    spread = df.repartition(partitions, F.col(KEY))
    per_key_day = Window.partitionBy(F.col(KEY), F.col(DAY)).orderBy(F.col(EVENT_TIME), F.col(VALUE))
    numbered = spread.withColumn(SEQUENCE, F.row_number().over(per_key_day))
    return numbered.sortWithinPartitions(F.col(KEY), F.col(DAY), F.col(EVENT_TIME), F.col(VALUE))


def resorted(df: DataFrame, partitions: int) -> DataFrame:
    """Numbered records spread by key and sorted again (after an operation that moved rows between tasks)."""
    return df.repartition(partitions, F.col(KEY)).sortWithinPartitions(F.col(KEY), F.col(DAY), F.col(SEQUENCE))


def without_written(records: DataFrame, written: DataFrame) -> DataFrame:
    """`records` minus those already in the topic; `written` has columns day, key, seq (from `replay_headers`)."""
    w = written.select(F.col("day").alias("_w_day"), F.col("key").alias("_w_key"), F.col("seq").alias("_w_seq"))
    condition = (
        (records[DAY] == w["_w_day"]) & records[KEY].eqNullSafe(w["_w_key"]) & (records[SEQUENCE] == w["_w_seq"])
    )
    return records.join(w, condition, "left_anti")


def kafka_rows(df: DataFrame, origin: str, day_label: str) -> DataFrame:
    """The rows Spark's Kafka sink writes: key, value, and the replay headers."""
    origin_header = F.concat(F.lit(f"{origin}#{day_label}="), F.col(DAY))
    headers = F.array(
        F.struct(F.lit(HEADER_REPLAY).alias("key"), F.lit("true").cast("binary").alias("value")),
        F.struct(F.lit(HEADER_ORIGIN).alias("key"), origin_header.cast("binary").alias("value")),
        F.struct(F.lit(HEADER_SEQUENCE).alias("key"), F.col(SEQUENCE).cast("string").cast("binary").alias("value")),
    )
    return df.select(F.col(KEY).alias("key"), F.col(VALUE).alias("value"), headers.alias("headers"))


def in_slice(df: DataFrame, slice_index: int, slices: int) -> DataFrame:
    """One of `slices` disjoint sets of keys (a key is always in the same one), for paced writing."""
    if slices <= 1:
        return df
    return df.where(F.pmod(F.xxhash64(F.col(KEY)), F.lit(slices)) == slice_index)


def counts_per_day(df: DataFrame) -> DataFrame:
    """Records per day: columns day, records."""
    return df.groupBy(F.col(DAY).alias("day")).agg(F.count(F.lit(1)).alias("records"))


# ---------------------------------------------------------------------------------------------- read back


def _header(name: str) -> Column:
    # try_element_at: a record without the header gives null instead of failing under ANSI mode.
    found = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(name))
    return F.try_element_at(found, F.lit(1))["value"].cast("string")


def replay_headers(kafka_df: DataFrame, origin: str, day_label: str, days: Sequence[str] | None = None) -> DataFrame:
    """Records read back from the topic (Spark's Kafka source with headers) whose origin header is this
    replay's (`<origin>#<day_label>=<day>`), only of `days` when given: columns day, key, seq, partition, offset."""
    prefix = f"{origin}#{day_label}="
    origin_header = _header(HEADER_ORIGIN)
    ours = kafka_df.where(origin_header.startswith(prefix))
    labelled = ours.select(
        F.substring(origin_header, len(prefix) + 1, 64).alias("day"),
        F.col("key").cast("string").alias("key"),
        _header(HEADER_SEQUENCE).cast("long").alias("seq"),
        F.col("partition"),
        F.col("offset"),
    )
    if days is not None:
        labelled = labelled.where(F.col("day").isin(*days))
    return labelled


def read_back_checks(records: DataFrame) -> DataFrame:
    """Per day, from `replay_headers` rows: records, duplicates (same key and seq twice) and order breaks
    (a key's record followed in its partition by one of an earlier (day, seq); a copy right after its
    original is a duplicate, not an order break; records without a key have no order). Columns day, records,
    duplicates, out_of_order."""
    along_log = Window.partitionBy(F.col("key")).orderBy(F.col("partition"), F.col("offset"))
    previous_day = F.lag(F.col("day")).over(along_log)
    previous_seq = F.lag(F.col("seq")).over(along_log)
    checked = records.select(
        "day",
        "key",
        "seq",
        # Records without a key have no order to keep: Kafka spreads them over partitions.
        F.when(previous_day.isNull() | F.col("key").isNull(), F.lit(0))
        .when(
            (F.col("day") < previous_day) | ((F.col("day") == previous_day) & (F.col("seq") < previous_seq)), F.lit(1)
        )
        .otherwise(F.lit(0))
        .alias("out_of_order"),
    )
    per_record = checked.groupBy("day", "key", "seq").agg(
        F.count(F.lit(1)).alias("copies"), F.sum("out_of_order").alias("out_of_order")
    )
    return per_record.groupBy("day").agg(
        F.sum("copies").alias("records"),
        F.sum(F.col("copies") - 1).alias("duplicates"),
        F.sum("out_of_order").alias("out_of_order"),
    )


def type_at(df: DataFrame, name: str) -> DataType:
    """The type of a column or nested field of `df`."""
    return df.select(path(name).alias("_t")).schema["_t"].dataType
