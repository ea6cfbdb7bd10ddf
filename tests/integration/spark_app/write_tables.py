"""Run by spark-submit (with the s3a, Delta and Iceberg jars): write a Delta table and an Iceberg table under
`<root>`, each in two commits with a schema change between them, and print the first commit's version or
snapshot id and its commit time as one JSON line, for the time-travel tests.

    commit 1: days 0-2, columns event_id, user_id, ts, qty int, dt
    commit 2: days 3-5, plus the column email (Delta: mergeSchema; Iceberg: ALTER TABLE ADD COLUMN)
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone

from pyspark.sql import SparkSession

FIRST = datetime(2024, 3, 1, tzinfo=timezone.utc)
PER_DAY = 30
UTC_TEXT = "yyyy-MM-dd HH:mm:ss.SSS"  # then made RFC 3339 by rfc3339()


def rows(days: range, with_email: bool) -> list[tuple]:
    out = []
    for day in days:
        for i in range(PER_DAY):
            ts = FIRST + timedelta(days=day, seconds=1009 * i)
            row = (f"e-{day}-{i}", f"u{i % 5}", ts, i + day, ts.strftime("%Y-%m-%d"))
            out.append(row + ((f"c{i}@example.com",) if with_email else ()))
    return out


def rfc3339(utc_text: str) -> str:
    return utc_text.replace(" ", "T") + "Z"


def main(root: str) -> None:
    spark = (
        SparkSession.builder.appName("write-tables")
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.sql.extensions",
            "io.delta.sql.DeltaSparkSessionExtension,org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        )
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.catalog.lk", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.lk.type", "hadoop")
        .config("spark.sql.catalog.lk.warehouse", f"{root}/iceberg")
        .getOrCreate()
    )
    columns = ["event_id", "user_id", "ts", "qty", "dt"]
    first = spark.createDataFrame(rows(range(0, 3), False), columns)
    second = spark.createDataFrame(rows(range(3, 6), True), [*columns, "email"])

    delta = f"{root}/delta"
    first.write.format("delta").partitionBy("dt").save(delta)
    # Commit times as UTC text, formatted by Spark in the session's zone (collect() would use the machine's).
    history = spark.sql(f"DESCRIBE HISTORY delta.`{delta}`").where("version = 0")
    delta_first_time = history.selectExpr(f"date_format(timestamp, '{UTC_TEXT}')").first()[0]
    second.write.format("delta").mode("append").option("mergeSchema", "true").save(delta)

    spark.sql(
        "CREATE TABLE lk.db.events (event_id string, user_id string, ts timestamp, qty int, dt string) USING iceberg PARTITIONED BY (dt)"
    )
    first.writeTo("lk.db.events").append()
    snapshot, iceberg_first_time = spark.sql(
        f"SELECT snapshot_id, date_format(committed_at, '{UTC_TEXT}') FROM lk.db.events.snapshots ORDER BY committed_at"
    ).first()
    spark.sql("ALTER TABLE lk.db.events ADD COLUMN email string")
    second.writeTo("lk.db.events").append()
    print(
        "TABLES "
        + json.dumps(
            {
                "delta": delta,
                "delta_first_version": 0,
                "iceberg": f"{root}/iceberg/db/events",
                "iceberg_first_snapshot": snapshot,
                "delta_first_time": rfc3339(delta_first_time),
                "iceberg_first_time": rfc3339(iceberg_first_time),
            }
        ),
        flush=True,
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
