"""Delta and Iceberg LakeReplays from the local S3 store with their real jars (resolved because the format asks
for them): each table has a schema change in the window (a column added by its second commit), and each is
replayed as it is now and as of its first version, which has neither the second commit's rows nor its column.

The tables are written once per module by `write_tables.py` under spark-submit; each replay is one more
spark-submit. In `make soak`, not `make test`: seven spark-submits with Delta's and Iceberg's jars took 113 s
on a quiet machine and 400 s at a load of 26 (docs/lakereplay.md)."""

from __future__ import annotations

import json
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from local_platform import processes
from local_platform.lake_jars import resolve_lake_jars
from local_platform.object_store import DEMO_BUCKET
from local_platform.spark_image import spark_submit_executable

from local_platform.spark_jars import ensure_spark_jars
from tests.integration.spark_app.conftest import JobRunner, job_args, read_topic

WRITE_TABLES = Path(__file__).resolve().parents[1] / "integration" / "spark_app" / "write_tables.py"
LATEST = {
    "fields": [
        {"name": "event_id", "type": "string", "nullable": False},
        {"name": "user_id", "type": "string", "nullable": False},
        {"name": "ts", "type": "timestamp", "nullable": False},
        {"name": "qty", "type": "long"},
        {"name": "email", "type": "string", "default": "none@example.com"},
    ]
}

pytestmark = pytest.mark.integration


def s3_conf(store) -> dict[str, str]:
    return {f"spark.hadoop.{key}": value for key, value in store.hadoop_conf().items()}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Iterator[JobRunner]:
    runner = JobRunner(",".join(str(p) for p in ensure_spark_jars()), tmp_path_factory.mktemp("jobs-tables"))
    try:
        yield runner
    finally:
        runner.stop_all()


@pytest.fixture(scope="module")
def tables(object_store, tmp_path_factory) -> dict:
    root = f"s3a://{DEMO_BUCKET}/tables-{uuid.uuid4().hex[:8]}"
    jars = ",".join(str(j) for j in resolve_lake_jars(["s3a", "delta", "iceberg"]))
    argv = [spark_submit_executable(), "--master", "local[2]", "--driver-memory", "1g", "--jars", jars]
    for key, value in s3_conf(object_store).items():
        argv += ["--conf", f"{key}={value}"]
    log_path = tmp_path_factory.mktemp("tables") / "write.log"
    env = {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", **object_store.credentials_env()}
    writer = processes.start("write tables", [*argv, str(WRITE_TABLES), root], log_path, env=env)
    try:
        code = writer.popen.wait(timeout=900)
    finally:
        writer.stop()
    log = log_path.read_text(errors="replace")
    assert code == 0, log[-4000:]
    line = next(x for x in log.splitlines() if x.startswith("TABLES "))
    return json.loads(line[len("TABLES ") :])


def replay(jobs, kafka, store, fmt: str, uri: str, tmp_path: Path, *extra: str):
    schema_path = tmp_path / "latest.json"
    schema_path.write_text(json.dumps(LATEST))
    topic = kafka.create_topic(f"lake-{fmt}-{uuid.uuid4().hex[:8]}", 3)

    class Lake:
        pass

    lake = Lake()
    lake.uri, lake.schema_path = uri, schema_path  # type: ignore[attr-defined]
    args = job_args(lake, kafka, topic, tmp_path / "progress", "--format", fmt, "--to", "2024-04-01T00:00:00Z", *extra)
    code, log = jobs.run(
        args,
        f"{fmt}-replay",
        jars=resolve_lake_jars(["s3a", fmt]),
        conf=s3_conf(store),
        env=store.credentials_env(),
    )
    assert code == 0, log[-4000:]
    return read_topic(kafka, topic)


def days_of(records) -> Counter:
    return Counter(int(r.value["event_id"].split("-")[1]) for r in records)


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_the_whole_table_is_replayed_across_its_schema_change(fmt, tables, object_store, kafka, jobs, tmp_path):
    records = replay(jobs, kafka, object_store, fmt, tables[fmt], tmp_path)
    assert days_of(records) == {day: 30 for day in range(6)}
    assert Counter(r.value["event_id"] for r in records).most_common(1)[0][1] == 1
    for r in records:
        day = int(r.value["event_id"].split("-")[1])
        assert r.value["qty"] == int(r.value["event_id"].split("-")[2]) + day  # int widened to long, kept
        if day >= 3:
            assert r.value["email"].endswith("@example.com") and r.value["email"] != "none@example.com"
        else:
            assert r.value["email"] == "none@example.com"  # written before the column: the latest schema's default


@pytest.mark.parametrize("fmt, first", [("delta", "delta_first_version"), ("iceberg", "iceberg_first_snapshot")])
def test_a_replay_as_of_the_first_version_has_only_its_rows(fmt, first, tables, object_store, kafka, jobs, tmp_path):
    records = replay(jobs, kafka, object_store, fmt, tables[fmt], tmp_path, "--as-of-version", str(tables[first]))
    assert days_of(records) == {day: 30 for day in range(3)}
    assert {r.value["email"] for r in records} == {"none@example.com"}


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_replay_as_of_the_first_commits_time_has_only_its_rows(fmt, tables, object_store, kafka, jobs, tmp_path):
    # The first commit's own time: the table as of then is the first commit, before the second and its
    # schema change.
    at = tables[f"{fmt}_first_time"]
    records = replay(jobs, kafka, object_store, fmt, tables[fmt], tmp_path, "--as-of-timestamp", at)
    assert days_of(records) == {day: 30 for day in range(3)}
    assert {r.value["email"] for r in records} == {"none@example.com"}
