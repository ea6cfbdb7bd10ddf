"""LakeReplay's Spark job at the issue's scale, run by hand (`make soak`; tests/soak/conftest.py skips it otherwise): a generated lake of 2,000,000 rows under
three schema versions, partitioned by day, replayed for a sub-range with a filter (the topic must hold exactly
those rows, in the latest schema, in per-key order), and a run killed mid-way and retried (no day twice).

Figures (run time, records per second) are printed, not asserted: timing targets live in benchmarks/.
"""

from __future__ import annotations

import hashlib
import json
import signal
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from spark_app.lakegen import LATEST_SCHEMA, LakeSpec, expected_records, write_lake
from tests.integration.spark_app.conftest import JobRunner, Lake, end_offsets, half_written, job_args, markers

pytestmark = pytest.mark.integration

SPEC = LakeSpec(rows=2_000_000, days=60, keys=10_000)
START = datetime(2024, 1, 6, 8, tzinfo=timezone.utc)
END = datetime(2024, 2, 25, 20, tzinfo=timezone.utc)
FILTER = "event_type <> 'view' AND amount >= 100"


@pytest.fixture(scope="module")
def spark():
    from spark_app.session import local_session, stop_local_session

    session = local_session({"spark.driver.memory": "2g"})
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        stop_local_session(session)


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Lake:
    folder = tmp_path_factory.mktemp("lake2m")
    began = time.monotonic()
    write_lake(spark, SPEC, f"file://{folder}/events", files_per_version_day=2)
    print(f"\nlake of {SPEC.rows:,} rows written in {time.monotonic() - began:.0f}s")
    schema = folder / "latest.json"
    schema.write_text(json.dumps(LATEST_SCHEMA))
    return Lake(f"file://{folder}/events", schema, SPEC)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Iterator[JobRunner]:
    from local_platform.spark_jars import ensure_spark_jars

    runner = JobRunner(",".join(str(p) for p in ensure_spark_jars()), tmp_path_factory.mktemp("jobs2m"))
    try:
        yield runner
    finally:
        runner.stop_all()


def digest(record: dict) -> bytes:
    return hashlib.blake2b(json.dumps(record, sort_keys=True).encode(), digest_size=12).digest()


def as_written(record: dict) -> dict:
    return dict(record, ts=record["ts"].strftime("%Y-%m-%dT%H:%M:%S.000Z"))


def scan_topic(kafka, topic: str, expected: dict[int, bytes] | None) -> dict:
    """Read the whole topic once, partition by partition, checking as it goes (memory stays small)."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": f"{topic}-scan",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    seen: set[int] = set()
    per_day: Counter[str] = Counter()
    wrong, duplicates, order_breaks, split_keys = [], 0, 0, 0
    key_partition: dict[str, int] = {}
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        for partition in partitions:
            end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
            if end == 0:
                continue
            consumer.assign([TopicPartition(topic, partition, 0)])
            last: dict[str, tuple] = {}
            done = False
            while not done:
                for msg in consumer.consume(10_000, timeout=5.0):
                    if msg.error() is not None:
                        assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                        done = True
                        continue
                    value = json.loads(msg.value())
                    headers = {k: v.decode() for k, v in msg.headers()}
                    n = int(value["event_id"][1:])
                    day = headers["reprise-origin"].rsplit("=", 1)[1]
                    per_day[day] += 1
                    if n in seen:
                        duplicates += 1
                    seen.add(n)
                    if expected is not None and expected.get(n) != digest(value) and len(wrong) < 5:
                        wrong.append(value)
                    key = msg.key().decode()
                    if key_partition.setdefault(key, partition) != partition:
                        split_keys += 1
                    position = (day, value["ts"], int(headers["reprise-seq"]))
                    if key in last and position < last[key]:
                        order_breaks += 1
                    last[key] = position
                    if msg.offset() + 1 >= end:
                        done = True
    finally:
        consumer.close()
    return {
        "seen": seen,
        "per_day": per_day,
        "wrong": wrong,
        "duplicates": duplicates,
        "order_breaks": order_breaks,
        "split_keys": split_keys,
    }


def test_two_million_rows_replayed_for_a_sub_range_land_exactly_in_the_topic(lake, kafka, jobs, tmp_path):
    topic = kafka.create_topic(f"soak-lake-{uuid.uuid4().hex[:8]}", 6)
    args = job_args(
        lake,
        kafka,
        topic,
        tmp_path / "progress",
        "--from",
        "2024-01-06T08:00:00Z",
        "--to",
        "2024-02-25T20:00:00Z",
        "--filter",
        FILTER,
    )
    began = time.monotonic()
    code, log = jobs.run(args, "replay-2m")
    seconds = time.monotonic() - began
    assert code == 0, log[-3000:]
    expected = {
        n: digest(as_written(r))
        for n, r in expected_records(SPEC, START, END)
        if r["event_type"] != "view" and r["amount"] >= 100
    }
    print(
        f"\n2M-row lake, {len(expected):,} records in range after the filter: spark-submit ran {seconds:.0f}s "
        f"({len(expected) / seconds:,.0f} records/s end to end, JVM start and validation included)"
    )
    for line in log.splitlines():
        if "spark_app" in line and ("counted in" in line or "wrote" in line or "validated" in line):
            print("  " + line.split(": ", 1)[-1])
    found = scan_topic(kafka, topic, expected)
    assert found["wrong"] == []
    assert found["seen"] == set(expected)
    assert (found["duplicates"], found["order_breaks"], found["split_keys"]) == (0, 0, 0)


def test_two_million_rows_killed_mid_run_and_retried_write_no_day_twice(lake, kafka, jobs, tmp_path):
    topic = kafka.create_topic(f"soak-resume-{uuid.uuid4().hex[:8]}", 6)
    progress = tmp_path / "progress"
    args = job_args(lake, kafka, topic, progress, "--to", "2024-03-01T00:00:00Z", "--max-records-per-write", "300000")
    first = jobs.start(args, "killed-2m")
    per_day = Counter(SPEC.day_text(n) for n in range(SPEC.rows))
    deadline = time.monotonic() + 3600

    def well_into_a_unit() -> bool:  # some days skipped on the retry, and a large part-written unit to resume
        done = markers(progress, ".done")
        return (
            bool(done)
            and half_written(kafka, topic, progress, per_day)
            and end_offsets(kafka, topic) - sum(per_day[d] for d in done) >= 50_000
        )

    while not well_into_a_unit():
        assert first.process.alive(), first.log()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    first.process.stop_signal = signal.SIGKILL
    first.process.stop()
    done, in_topic = markers(progress, ".done"), end_offsets(kafka, topic)
    assert sum(per_day[d] for d in done) < in_topic  # part of an unfinished unit is in the topic
    print(
        f"\nkilled with {len(done)} day(s) done and {in_topic:,} records in the topic, "
        f"{in_topic - sum(per_day[d] for d in done):,} of them from unfinished days"
    )

    code, log = jobs.run(args, "retry-2m")
    assert code == 0, log[-3000:]
    assert "leaving out records already in the topic" in log
    assert f"skipping {len(done)} day(s) written by an earlier attempt" in log
    found = scan_topic(kafka, topic, None)
    assert found["per_day"] == per_day
    assert (found["duplicates"], found["order_breaks"], found["split_keys"]) == (0, 0, 0)
