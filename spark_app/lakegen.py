"""Generated lakes for tests and benchmarks: N events over D days, partitioned by day (`dt=YYYY-MM-DD`),
written under three schema versions, plus the exact records a replay must produce from them.

Every column is a simple function of the row number `n` (its day is `n % days`, its rank within the day
`m = n // days`, which the attributes derive from so they do not follow the day), computed by Spark for the
files and mirrored in Python by `expected_record(n)`, so a test knows exactly what the topic must hold
without trusting the job.

    version 1 (first third of the days):  event_id, user_id, ts, amount int, kind, score float
    version 2 (second third):             ... amount long, kind renamed event_type, + currency
    version 3 (last third; its first day  ... score double, + channel (null for every tenth event)
               also holds version 2 files for even m)

The latest schema (`LATEST_SCHEMA`) gives currency the default "N/A" and channel the default "legacy",
so records from older files are recognisable in the topic, while a null channel written under version 3
must stay null.

Run `python -m spark_app.lakegen --rows 2000000 --days 60 --out file:///tmp/lake` to make one by hand.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, Iterator

KINDS = ("click", "view", "buy")
CURRENCIES = ("EUR", "USD")
CHANNELS = ("web", "app")
SECONDS_STEP = 7919  # a prime: spreads events over the day, and gives some keys two events at the same second

LATEST_SCHEMA: dict[str, Any] = {
    "fields": [
        {"name": "event_id", "type": "string", "nullable": False},
        {"name": "user_id", "type": "string", "nullable": False},
        {"name": "ts", "type": "timestamp", "nullable": False},
        {"name": "amount", "type": "long"},
        {"name": "event_type", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "currency", "type": "string", "default": "N/A"},
        {"name": "channel", "type": "string", "default": "legacy"},
    ],
    "renames": {"kind": "event_type"},
}


@dataclass(frozen=True)
class LakeSpec:
    rows: int
    days: int
    keys: int
    first_day: date = date(2024, 1, 1)

    def day_of(self, n: int) -> int:
        return n % self.days

    def version_of(self, n: int) -> int:
        day = self.day_of(n)
        second_era, third_era = self.days // 3, (2 * self.days) // 3
        if day < second_era:
            return 1
        if day < third_era:
            return 2
        if day == third_era and (n // self.days) % 2 == 0:
            return 2  # the switch day holds files of both versions
        return 3

    def timestamp_of(self, n: int) -> datetime:
        start = datetime.combine(self.first_day, datetime.min.time(), tzinfo=timezone.utc)
        return start + timedelta(days=self.day_of(n), seconds=(n * SECONDS_STEP) % 86400)

    def day_text(self, n: int) -> str:
        return (self.first_day + timedelta(days=self.day_of(n))).isoformat()


def expected_record(spec: LakeSpec, n: int) -> dict[str, Any]:
    """Row `n` evolved to the latest schema, as the job's JSON value decodes (ts as an aware datetime)."""
    version = spec.version_of(n)
    m = n // spec.days
    return {
        "event_id": f"e{n}",
        "user_id": f"u{(n * 31) % spec.keys}",
        "ts": spec.timestamp_of(n),
        "amount": m % 1000,
        "event_type": KINDS[m % 3],
        "score": (m % 100) / 4.0,
        "currency": CURRENCIES[m % 2] if version >= 2 else "N/A",
        "channel": (None if m % 10 == 0 else CHANNELS[m % 2]) if version == 3 else "legacy",
    }


def expected_records(spec: LakeSpec, start: datetime | None, end: datetime) -> Iterator[tuple[int, dict[str, Any]]]:
    """(n, record) of every row with start <= ts < end, in row order."""
    for n in range(spec.rows):
        moment = spec.timestamp_of(n)
        if (start is None or moment >= start) and moment < end:
            yield n, expected_record(spec, n)


def write_lake(spark: Any, spec: LakeSpec, uri: str, fmt: str = "parquet", files_per_version_day: int = 1) -> None:
    """Write the lake of `spec` at `uri` (Parquet or JSON), one write per schema version."""
    from pyspark.sql import functions as F

    first_epoch = int(datetime.combine(spec.first_day, datetime.min.time(), tzinfo=timezone.utc).timestamp())
    n = F.col("id")
    day = n % spec.days
    m = F.floor(n / spec.days)
    second_era, third_era = spec.days // 3, (2 * spec.days) // 3
    version = (
        F.when(day < second_era, 1).when(day < third_era, 2).when((day == third_era) & (m % 2 == 0), 2).otherwise(3)
    )
    ts = F.timestamp_seconds(F.lit(first_epoch) + day * 86400 + (n * SECONDS_STEP) % 86400)
    base = spark.range(0, spec.rows, 1, max(1, spark.sparkContext.defaultParallelism)).select(
        n.alias("n"),
        version.alias("version"),
        F.concat(F.lit("e"), n.cast("string")).alias("event_id"),
        F.concat(F.lit("u"), ((n * 31) % spec.keys).cast("string")).alias("user_id"),
        ts.alias("ts"),
        (m % 1000).alias("amount"),
        F.element_at(F.array(*[F.lit(k) for k in KINDS]), (m % 3 + 1).cast("int")).alias("kind"),
        ((m % 100) / F.lit(4.0)).alias("score"),
        F.element_at(F.array(*[F.lit(c) for c in CURRENCIES]), (m % 2 + 1).cast("int")).alias("currency"),
        F.when(m % 10 == 0, F.lit(None).cast("string"))
        .otherwise(F.element_at(F.array(*[F.lit(c) for c in CHANNELS]), (m % 2 + 1).cast("int")))
        .alias("channel"),
        F.to_date(ts).alias("dt"),
    )
    versions = {
        1: [
            F.col("event_id"),
            F.col("user_id"),
            F.col("ts"),
            F.col("amount").cast("int").alias("amount"),
            F.col("kind"),
            F.col("score").cast("float").alias("score"),
        ],
        2: [
            F.col("event_id"),
            F.col("user_id"),
            F.col("ts"),
            F.col("amount").cast("long").alias("amount"),
            F.col("kind").alias("event_type"),
            F.col("score").cast("float").alias("score"),
            F.col("currency"),
        ],
        3: [
            F.col("event_id"),
            F.col("user_id"),
            F.col("ts"),
            F.col("amount").cast("long").alias("amount"),
            F.col("kind").alias("event_type"),
            F.col("score").cast("double").alias("score"),
            F.col("currency"),
            F.col("channel"),
        ],
    }
    for number, columns in versions.items():
        rows = base.where(F.col("version") == number).select(*columns, F.col("dt"))
        rows = rows.repartition(files_per_version_day, F.col("dt")) if files_per_version_day else rows
        writer = rows.write.mode("append").partitionBy("dt")
        if fmt == "json":
            writer.json(uri)
        else:
            writer.parquet(uri)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_app.lakegen", description="Write a generated lake (see module doc).")
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--format", choices=("parquet", "json"), default="parquet")
    parser.add_argument("--out", required=True, help="Hadoop URI of the lake folder (must not exist)")
    parser.add_argument("--schema-out", help="also write the latest schema JSON to this path")
    args = parser.parse_args(argv)
    from spark_app.session import local_session, stop_local_session

    spark = local_session()
    try:
        write_lake(spark, LakeSpec(args.rows, args.days, args.keys), args.out, args.format)
    finally:
        stop_local_session(spark)
    if args.schema_out:
        with open(args.schema_out, "w", encoding="utf-8") as handle:
            json.dump(LATEST_SCHEMA, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
