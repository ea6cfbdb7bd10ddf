"""The object store stopped in the middle of a LakeReplay from S3: the job fails (its driver's termination
message, which the LakeReplay's status shows, says the store could not be reached), and a rerun once the store
is back resumes from the days already written, writing no day twice.

In `make soak`: it paces the job (one day per write, 40 records a second) so that the store can be stopped
between two days, which makes it the slowest of the S3 tests."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from typing import Iterator

import pytest

from local_platform.lake_jars import needed_sets, resolve_lake_jars
from local_platform.spark_jars import ensure_spark_jars
from tests.integration.spark_app import avro_lake as A
from tests.integration.spark_app.conftest import JobRunner, job_args, markers, read_topic
from tests.integration.spark_app.test_lake_s3 import all_days, put_lake

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Iterator[JobRunner]:
    runner = JobRunner(",".join(str(p) for p in ensure_spark_jars()), tmp_path_factory.mktemp("jobs-s3"))
    try:
        yield runner
    finally:
        runner.stop_all()


def test_the_store_stopped_mid_replay_fails_the_job_and_a_rerun_writes_no_day_twice(
    object_store, kafka, jobs, tmp_path
):
    lake = put_lake(object_store, all_days(), tmp_path)
    topic = kafka.create_topic(f"lake-s3-outage-{uuid.uuid4().hex[:8]}", 3)
    progress = tmp_path / "progress"
    termination = tmp_path / "termination-log"
    args = job_args(
        lake,
        kafka,
        topic,
        progress,
        "--format",
        "avro",
        "--to",
        "2024-04-01T00:00:00Z",
        "--max-records-per-write",
        str(A.PER_DAY),
        "--max-records-per-second",
        str(A.PER_DAY),
    )
    extra = dict(
        jars=resolve_lake_jars(needed_sets(lake.uri, "avro")),
        conf={f"spark.hadoop.{k}": v for k, v in object_store.hadoop_conf().items()}
        | {"spark.hadoop.fs.s3a.attempts.maximum": "2", "spark.hadoop.fs.s3a.retry.limit": "2"},
        env=object_store.credentials_env()
        | {"REPRISE_PATH_PREFIX_MAP": json.dumps({"/dev/termination-log": str(termination)})},
    )
    first = jobs.start(args, "outage", **extra)
    deadline = time.monotonic() + 600  # a bound against a stuck job, not a timing assertion
    while not markers(progress, ".done") and first.process.alive():
        assert time.monotonic() < deadline, first.log()[-3000:]
        time.sleep(0.5)
    object_store.stop()
    try:
        code = first.wait()
        done_before = markers(progress, ".done")
        assert code != 0, "the job finished although the store was stopped after its first day"
        assert 0 < len(done_before) < A.DAYS
        reason = termination.read_text()
        assert "127.0.0.1" in reason or "Connect" in reason or "refused" in reason.lower(), reason
        assert object_store.secret_key not in first.log() + reason
    finally:
        object_store.start()  # same port, same data, same credentials: the next tests find it as it was

    code, log = jobs.run(args, "outage-rerun", **extra)
    assert code == 0, log[-3000:]
    assert "skipping" in log and "written by an earlier attempt" in log
    records = read_topic(kafka, topic)
    per_event = Counter(r.value["event_id"] for r in records)
    assert len(per_event) == A.DAYS * A.PER_DAY and set(per_event.values()) == {1}  # every record once
    per_day = Counter(r.headers["reprise-origin"].rsplit("=", 1)[1] for r in records)
    assert per_day == {A.day_text(day): A.PER_DAY for day in range(A.DAYS)}  # no day twice
