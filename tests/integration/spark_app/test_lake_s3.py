"""The job reading Avro lake files of three schema versions from the local S3 store (S3Proxy, through s3a with
the slim AWS SDK jar set) into a real broker: every record once, in the latest schema, the older versions'
fields filled by Avro's resolution rules. And the bad cases, each failing before anything is written, with a
message naming the cause: a missing bucket, wrong credentials, a version that cannot be evolved, a
truncated file.

Each test is one spark-submit (about a minute on a loaded 2-core machine)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from local_platform.lake_jars import needed_sets, resolve_lake_jars
from local_platform.object_store import DEMO_BUCKET, ObjectStore

from . import avro_lake as A
from .conftest import job_args, read_topic

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class S3Lake:
    uri: str
    schema_path: Path
    spec: None = None


def put_lake(store: ObjectStore, files: dict[str, bytes], tmp_path: Path, schema=A.LATEST) -> S3Lake:
    prefix = f"orders-{uuid.uuid4().hex[:8]}"
    for key, data in files.items():
        store.put_object(DEMO_BUCKET, f"{prefix}/{key}", data)
    schema_path = tmp_path / "latest.avsc"
    schema_path.write_text(json.dumps(schema))
    return S3Lake(f"s3a://{DEMO_BUCKET}/{prefix}", schema_path)


def all_days() -> dict[str, bytes]:
    return {key: data for day in range(A.DAYS) for key, data in A.day_files(day).items()}


def replay(jobs, kafka, store: ObjectStore, lake: S3Lake, tmp_path: Path, *, env=None, name="s3"):
    topic = kafka.create_topic(f"lake-s3-{uuid.uuid4().hex[:8]}", 3)
    args = job_args(lake, kafka, topic, tmp_path / "progress", "--format", "avro", "--to", "2024-04-01T00:00:00Z")
    code, log = jobs.run(
        args,
        name,
        jars=resolve_lake_jars(needed_sets(lake.uri, "avro")),
        conf={f"spark.hadoop.{key}": value for key, value in store.hadoop_conf().items()},
        env=env if env is not None else store.credentials_env(),
    )
    return topic, code, log


def test_avro_files_of_three_versions_from_s3_land_once_each_in_the_latest_schema(object_store, kafka, jobs, tmp_path):
    lake = put_lake(object_store, all_days(), tmp_path)
    topic, code, log = replay(jobs, kafka, object_store, lake, tmp_path)
    assert code == 0, log[-4000:]
    assert "in 3 writer schema version(s)" in log
    records = read_topic(kafka, topic)
    assert len(records) == A.DAYS * A.PER_DAY
    counts = Counter(r.value["event_id"] for r in records)
    assert set(counts.values()) == {1}  # every record once
    by_id = {r.value["event_id"]: r for r in records}
    for day in range(A.DAYS):
        for i in range(A.PER_DAY):
            want = A.expected(day, i)
            got = by_id[want["event_id"]]
            assert dict(got.value, ts=datetime.fromisoformat(got.value["ts"])) == want, (day, i)
            assert got.key == want["user_id"]
            assert got.headers["reprise-origin"] == f"{lake.uri}#dt={A.day_text(day)}"
    # No null where a value existed: v1/v2's customer came through the alias, and every default was applied.
    assert all(r.value["customer_name"] for r in records)
    assert Counter(A.version_of(int(r.value["event_id"].split("-")[1])) for r in records) == {
        1: 3 * A.PER_DAY,
        2: 3 * A.PER_DAY,
        3: 3 * A.PER_DAY,
    }
    assert object_store.secret_key not in log


def test_a_version_that_cannot_be_evolved_fails_the_plan_naming_the_file_and_the_field(
    object_store, kafka, jobs, tmp_path
):
    files = all_days()
    bad_key = f"dt={A.day_text(4)}/part-9.avro"
    files[bad_key] = A.avro_file(A.INCOMPATIBLE, [dict(A.written(1, 0), qty="many")])
    lake = put_lake(object_store, files, tmp_path)
    topic, code, log = replay(jobs, kafka, object_store, lake, tmp_path, name="incompatible")
    assert code != 0
    assert f"{lake.uri}/{bad_key} was written under a schema version that cannot be evolved" in log
    assert "/fields/3/type" in log  # qty, the field that cannot be resolved
    assert read_topic(kafka, topic) == []  # the plan failed: nothing written


def test_a_file_truncated_in_its_header_fails_the_plan_naming_the_file(object_store, kafka, jobs, tmp_path):
    files = all_days()
    cut_key = f"dt={A.day_text(7)}/part-1.avro"
    files[cut_key] = files[cut_key][:40]  # cut inside the header, as an upload stopped early leaves it
    lake = put_lake(object_store, files, tmp_path)
    topic, code, log = replay(jobs, kafka, object_store, lake, tmp_path, name="truncated")
    assert code != 0
    assert f"{lake.uri}/{cut_key} is not a readable Avro file" in log
    assert read_topic(kafka, topic) == []


def test_a_file_truncated_in_its_records_fails_before_anything_is_written(object_store, kafka, jobs, tmp_path):
    files = all_days()
    cut_key = f"dt={A.day_text(2)}/part-0.avro"
    files[cut_key] = files[cut_key][:-40]  # the header is whole, the block of records is not
    lake = put_lake(object_store, files, tmp_path)
    topic, code, log = replay(jobs, kafka, object_store, lake, tmp_path, name="truncated-records")
    assert code != 0
    assert cut_key in log  # Spark's read error names the file
    assert read_topic(kafka, topic) == []  # the count of every day comes before the first write


def test_a_missing_bucket_is_named(object_store, kafka, jobs, tmp_path):
    lake = put_lake(object_store, {}, tmp_path)
    missing = S3Lake(lake.uri.replace(f"s3a://{DEMO_BUCKET}/", "s3a://no-such-bucket/"), lake.schema_path)
    topic, code, log = replay(jobs, kafka, object_store, missing, tmp_path, name="no-bucket")
    assert code != 0
    assert "no-such-bucket" in log and ("NoSuchBucket" in log or "does not exist" in log), log[-3000:]
    assert read_topic(kafka, topic) == []


def test_wrong_credentials_fail_without_showing_them(object_store, kafka, jobs, tmp_path):
    lake = put_lake(object_store, all_days(), tmp_path)
    wrong = {"AWS_ACCESS_KEY_ID": object_store.access_key, "AWS_SECRET_ACCESS_KEY": "wrong-" + uuid.uuid4().hex}
    topic, code, log = replay(jobs, kafka, object_store, lake, tmp_path, env=wrong, name="wrong-credentials")
    assert code != 0
    assert "403" in log or "AccessDenied" in log or "SignatureDoesNotMatch" in log, log[-3000:]
    assert wrong["AWS_SECRET_ACCESS_KEY"] not in log and object_store.secret_key not in log
    assert read_topic(kafka, topic) == []
