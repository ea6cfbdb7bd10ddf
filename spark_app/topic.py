"""The backfill topic, through Spark's own Kafka connector: the only code here that talks to Kafka.

Writing uses Spark's Kafka sink (`df.write.format("kafka")`), which sends each task's rows in order through
a cached producer per executor; reading back (for resuming a half-written day and for validation) uses
Spark's Kafka source over the whole topic, earliest to latest, with headers.
"""

from __future__ import annotations

from typing import Mapping

from pyspark.sql import DataFrame, SparkSession


def write(rows: DataFrame, topic: str, options: Mapping[str, str]) -> None:
    """Append `rows` (key, value, headers) to `topic`; returns when every task's producer has flushed."""
    rows.write.format("kafka").options(**options).option("topic", topic).mode("append").save()


def write_nowhere(rows: DataFrame) -> None:
    """Run the same plan into Spark's `noop` sink: everything but the Kafka write (dry runs, benchmarks)."""
    rows.write.format("noop").mode("overwrite").save()


def read(spark: SparkSession, topic: str, options: Mapping[str, str]) -> DataFrame:
    """Every record in `topic` now: key, value, topic, partition, offset, timestamp, headers."""
    return (
        spark.read.format("kafka")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        .load()
    )
