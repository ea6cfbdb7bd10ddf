"""One LakeReplay run: count, plan, write day groups in key order with pacing, record progress, validate.

    1. count the records of every day in range (after evolution, time range and filter): one aggregation;
    2. claim the progress folder (a retry must be the same replay) and plan the write units (plan.py):
       days already done are skipped;
    3. per unit: mark its days started; order its records per key; leave out records a killed attempt
       already wrote (read back by their headers); write with Spark's Kafka sink, slice by slice when
       rate-limited, waiting between slices; then mark its days done;
    4. read the topic back and compare every day's count, duplicates and per-key order with the lake
       (validation.py); any difference raises ValidationFailed.

A record's sequence number is fixed by the lake's content (its rank in its key and day by event time and
value), so any attempt numbers the same record the same way, and leaving out what a killed attempt wrote
is an anti-join on (day, key, sequence).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from . import topic
from . import transforms as T
from .kafka_settings import describe, java_client_settings, load_client_settings, spark_options
from .lake import LakeTable
from .plan import Pacer, ReplayPlan, plan_writes
from .progress import HadoopProgress, Progress
from .schema import LatestSchema, load_latest_schema, with_overrides
from .settings import ReplaySettings
from .validation import DayCheck, DayInTopic, ValidationFailed, compare, failures

log = logging.getLogger("spark_app.job")


@dataclass
class ReplayOutcome:
    """What a run did, for its last log line and for tests and benchmarks."""

    day_counts: dict[str, int] = field(default_factory=dict)
    plan: ReplayPlan | None = None
    units_written: int = 0
    records_in_range: int = 0
    seconds_writing: float = 0.0
    seconds_paced: float = 0.0
    seconds_marking: float = 0.0
    """Of `seconds_writing`, the time spent writing progress markers (two per day)."""
    checks: list[DayCheck] = field(default_factory=list)


def latest_schema_of(settings: ReplaySettings) -> LatestSchema | None:
    if not settings.latest_schema:
        return None
    latest = with_overrides(
        load_latest_schema(settings.latest_schema),
        renames=dict(settings.renames),
        defaults={name: json.loads(value) for name, value in settings.defaults},
    )
    latest.require(*{c.split(".")[0] for c in (settings.key_column, settings.timestamp_column)})
    return latest


def run(spark: SparkSession, settings: ReplaySettings, progress: Progress | None = None) -> ReplayOutcome:
    """Replay the lake range of `settings` into its topic; raises ValidationFailed when the topic is wrong."""
    outcome = ReplayOutcome()
    latest = latest_schema_of(settings)
    lake = LakeTable(spark, settings, latest)
    partitions = settings.write_partitions or spark.sparkContext.defaultParallelism
    origin, label = settings.origin, lake.day_label

    began = time.monotonic()
    counts = {row["day"]: int(row["records"]) for row in T.counts_per_day(lake.records()).collect()}
    outcome.day_counts = counts
    outcome.records_in_range = sum(counts.values())
    log.info(
        "lake %s: %d records in %d day(s) of the range, counted in %.1fs",
        settings.source,
        outcome.records_in_range,
        len(counts),
        time.monotonic() - began,
    )

    if settings.dry_run:
        began = time.monotonic()
        rows = T.kafka_rows(T.in_key_order(lake.records(), partitions), origin, label)
        topic.write_nowhere(rows)
        outcome.seconds_writing = time.monotonic() - began
        log.info(
            "dry run: %d records read, evolved and ordered into the noop sink in %.1fs",
            outcome.records_in_range,
            outcome.seconds_writing,
        )
        return outcome

    client = java_client_settings(load_client_settings(settings.kafka_settings))
    if settings.kafka_settings:
        log.info("Kafka client settings from %s: %s", settings.kafka_settings, describe(client))
    producer = spark_options(settings.bootstrap_servers, client, producer=True)
    consumer = spark_options(settings.bootstrap_servers, client, producer=False)

    progress = progress or HadoopProgress(spark, settings.progress)
    progress.claim(settings.identity())
    plan = plan_writes(
        counts,
        progress.done_days(),
        progress.started_days(),
        max_records_per_write=settings.max_records_per_write,
        max_records_per_second=settings.max_records_per_second,
        slice_seconds=settings.slice_seconds,
    )
    outcome.plan = plan
    if plan.already_written:
        log.info(
            "skipping %d day(s) written by an earlier attempt: %s",
            len(plan.already_written),
            _days_text(plan.already_written),
        )
    log.info(
        "writing %d records of %d day(s) in %d unit(s) to %s",
        plan.records,
        sum(len(u.days) for u in plan.units),
        len(plan.units),
        settings.topic,
    )

    pacer = Pacer(settings.max_records_per_second)
    began = time.monotonic()
    for number, unit in enumerate(plan.units, start=1):
        marking = time.monotonic()
        progress.mark_started(unit.days)
        outcome.seconds_marking += time.monotonic() - marking
        records = T.in_key_order(lake.records(unit.days), partitions)
        if unit.resume:
            written = T.replay_headers(topic.read(spark, settings.topic, consumer), origin, label, unit.resume)
            written = written.select("day", "key", "seq").persist(StorageLevel.MEMORY_AND_DISK)
            records = T.resorted(T.without_written(records, written), partitions)
            log.info(
                "unit %d: %s started by an earlier attempt: leaving out records already in the topic (%d)",
                number,
                _days_text(unit.resume),
                written.count(),
            )
        if unit.slices > 1:
            records = records.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            pacer.begin()
            per_slice = unit.records // unit.slices
            for index in range(unit.slices):
                topic.write(
                    T.kafka_rows(T.in_slice(records, index, unit.slices), origin, label), settings.topic, producer
                )
                last = index == unit.slices - 1
                outcome.seconds_paced += pacer.wrote(unit.records - per_slice * index if last else per_slice)
        finally:
            if unit.slices > 1:
                records.unpersist()
            if unit.resume:
                written.unpersist()
        marking = time.monotonic()
        progress.mark_done({day: counts[day] for day in unit.days})
        outcome.seconds_marking += time.monotonic() - marking
        outcome.units_written += 1
        log.info(
            "unit %d/%d written: %s, %d records, %d slice(s)",
            number,
            len(plan.units),
            _days_text(unit.days),
            unit.records,
            unit.slices,
        )
    outcome.seconds_writing = time.monotonic() - began
    log.info(
        "wrote %d records in %.1fs (%.1fs of it pacing, %.1fs progress markers)",
        plan.records,
        outcome.seconds_writing,
        outcome.seconds_paced,
        outcome.seconds_marking,
    )

    if settings.validate:
        outcome.checks = validate(spark, settings, counts, consumer, label)
    return outcome


def validate(
    spark: SparkSession, settings: ReplaySettings, counts: dict[str, int], consumer: dict[str, str], label: str
) -> list[DayCheck]:
    """Compare the topic with the lake per day; raise ValidationFailed on any difference."""
    began = time.monotonic()
    in_topic = T.read_back_checks(T.replay_headers(topic.read(spark, settings.topic, consumer), settings.origin, label))
    found = {
        row["day"]: DayInTopic(int(row["records"]), int(row["duplicates"]), int(row["out_of_order"]))
        for row in in_topic.collect()
    }
    checks = compare(counts, found)
    bad = failures(checks)
    if bad:
        raise ValidationFailed(bad, settings.topic)
    log.info(
        "validated %d day(s) in %.1fs: every day's count matches the lake, no duplicates, per-key order kept",
        len(checks),
        time.monotonic() - began,
    )
    return checks


def _days_text(days: tuple[str, ...]) -> str:
    if len(days) <= 3:
        return ", ".join(days)
    return f"{days[0]} .. {days[-1]} ({len(days)} days)"
