"""Fixtures of the LakeReplay Spark job's integration tests: a generated lake, the Kafka connector jars, the
job run as the SparkApplication runs it (spark-submit, `local[2]`), and the backfill topic read back.

One local Spark session per test session generates the lakes; each job run is its own spark-submit (one JVM
at a time), started in its own process group and stopped by its PID, also when a test fails.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from local_platform import processes
from local_platform.kafka_broker import KafkaBroker
from local_platform.spark_jars import ensure_spark_jars
from local_platform.spark_image import spark_submit_executable
from spark_app.lakegen import LATEST_SCHEMA, LakeSpec, write_lake

REPO = Path(__file__).resolve().parents[3]
MAIN = REPO / "spark_app" / "main.py"
# 50k rows over 12 days, 400 keys: three schema versions, many records per key and day, some same-second ties.
SPEC = LakeSpec(rows=50_000, days=12, keys=400)


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:  # noqa: F821
    from spark_app.session import local_session, stop_local_session

    session = local_session()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        stop_local_session(session)


@dataclass(frozen=True)
class Lake:
    uri: str
    schema_path: Path
    spec: LakeSpec


@pytest.fixture(scope="session")
def lake(spark, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    folder = tmp_path_factory.mktemp("lake")
    uri = f"file://{folder}/events"
    write_lake(spark, SPEC, uri)
    schema_path = folder / "latest-schema.json"
    schema_path.write_text(json.dumps(LATEST_SCHEMA))
    return Lake(uri, schema_path, SPEC)


@pytest.fixture(scope="session")
def spark_jars() -> str:
    return ",".join(str(p) for p in ensure_spark_jars())


@dataclass
class JobRun:
    """One spark-submit of the job."""

    process: processes.ManagedProcess
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait(self, timeout: float = 900.0) -> int:
        try:
            return self.process.popen.wait(timeout=timeout)
        finally:
            self.process.stop()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class JobRunner:
    def __init__(self, jars: str, workdir: Path) -> None:
        self.jars = jars
        self.workdir = workdir
        self.started: list[JobRun] = []

    def start(
        self,
        args: Sequence[str],
        name: str,
        *,
        jars: Sequence[Path] = (),
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> JobRun:
        """spark-submit the job; `jars`, `conf` and `env` add to the Kafka jars, the settings and the environment
        (the lake's jar sets, s3a settings, the store's credentials), as the SparkApplication adds them."""
        extra_conf = [item for key, value in (conf or {}).items() for item in ("--conf", f"{key}={value}")]
        argv = [
            spark_submit_executable(),
            "--master",
            "local[2]",
            "--driver-memory",
            "1g",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            *extra_conf,
            "--jars",
            ",".join([self.jars, *(str(j) for j in jars)]),
            str(MAIN),
            *args,
        ]
        log_path = self.workdir / f"{name}-{len(self.started)}.log"
        process = processes.start(
            f"spark job {name}",
            argv,
            log_path,
            env={
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1",
                **dict(env or {}),
            },
        )
        run = JobRun(process, log_path)
        self.started.append(run)
        return run

    def run(self, args: Sequence[str], name: str, **extra: Any) -> tuple[int, str]:
        job = self.start(args, name, **extra)
        return job.wait(), job.log()

    def stop_all(self) -> None:
        for run in self.started:
            run.process.stop()


@pytest.fixture(scope="module")
def jobs(spark_jars, tmp_path_factory) -> Iterator[JobRunner]:
    runner = JobRunner(spark_jars, tmp_path_factory.mktemp("jobs"))
    try:
        yield runner
    finally:
        runner.stop_all()


def job_args(lake: Lake, broker: KafkaBroker, topic: str, progress: Path, *extra: str) -> list[str]:
    return [
        "--source",
        lake.uri,
        "--partition-column",
        "dt",
        "--timestamp-column",
        "ts",
        "--key-column",
        "user_id",
        "--latest-schema",
        str(lake.schema_path),
        "--bootstrap-servers",
        broker.bootstrap,
        "--topic",
        topic,
        "--progress",
        f"file://{progress}",
        *extra,
    ]


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: str
    value: dict
    headers: dict[str, str]


def read_topic(broker: KafkaBroker, topic: str) -> list[Record]:
    """Every record of `topic`, each partition from its start to its current end."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"{topic}-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        pending = {p for p in partitions if ends[p] > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in pending])
        records: list[Record] = []
        deadline = time.monotonic() + 300  # a bound against a broken broker, not a timing assertion
        while pending:
            assert time.monotonic() < deadline, f"read only {len(records)} records of {topic}"
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    pending.discard(msg.partition())
                    continue
                records.append(
                    Record(
                        msg.partition(),
                        msg.offset(),
                        msg.key().decode() if msg.key() else None,
                        json.loads(msg.value()),
                        {k: v.decode() for k, v in msg.headers() or []},
                    )
                )
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
        return records
    finally:
        consumer.close()


def end_offsets(broker: KafkaBroker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-ends"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)
    finally:
        consumer.close()


def markers(progress: Path, suffix: str) -> set[str]:
    folder = progress / "days"
    return {p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}")} if folder.is_dir() else set()


def half_written(broker: KafkaBroker, topic: str, progress: Path, per_day: dict[str, int]) -> bool:
    """Whether a write unit is part-way into the topic: more records than the finished days hold, fewer than
    the started days hold. Read in this order (offsets, started, done) it never mistakes the moment a
    finished unit is being marked done for a half-written one."""
    in_topic = end_offsets(broker, topic)
    started = markers(progress, ".started")
    done = markers(progress, ".done")
    return sum(per_day[d] for d in done) < in_topic < sum(per_day[d] for d in started)
