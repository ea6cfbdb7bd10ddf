"""Killing the job mid-run (its spark-submit, by PID, with SIGKILL) and retrying writes no day twice."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from datetime import datetime, timezone

import pytest

from spark_app.lakegen import expected_records

from .conftest import end_offsets, half_written, job_args, markers, read_topic

pytestmark = pytest.mark.integration

END = datetime(2024, 1, 13, tzinfo=timezone.utc)


def test_a_killed_run_retried_leaves_every_day_exactly_once_in_the_topic(lake, kafka, jobs, tmp_path):
    topic = kafka.create_topic(f"lake-resume-{uuid.uuid4().hex[:8]}", 3)
    progress = tmp_path / "progress"
    args = job_args(lake, kafka, topic, progress, "--to", "2024-01-13T00:00:00Z", "--max-records-per-write", "6000")
    # Paced, so there is time to kill it between a finished unit and the end of the next one.
    first = jobs.start(args + ["--max-records-per-second", "3000", "--slice-seconds", "1"], "killed")

    expected_per_day = Counter(lake.spec.day_text(n) for n, _ in expected_records(lake.spec, None, END))
    deadline = time.monotonic() + 600  # a bound against a hung job, not a timing assertion
    while not (markers(progress, ".done") and half_written(kafka, topic, progress, expected_per_day)):
        assert first.process.alive(), f"the job ended before it could be killed:\n{first.log()[-3000:]}"
        assert time.monotonic() < deadline, first.log()[-3000:]
        time.sleep(0.1)
    first.process.stop_signal = signal.SIGKILL  # a crash: no shutdown hooks, producers not flushed
    first.process.stop()
    done = markers(progress, ".done")
    in_topic_at_kill = end_offsets(kafka, topic)
    # Killed part-way through a unit: some days not marked done already have records in the topic.
    assert done and sum(expected_per_day[d] for d in done) < in_topic_at_kill

    code, log = jobs.run(args, "retry")

    assert code == 0, log[-3000:]
    assert f"skipping {len(done)} day(s) written by an earlier attempt" in log
    assert "leaving out records already in the topic" in log
    records = read_topic(kafka, topic)
    assert len(records) > in_topic_at_kill
    found_per_day = Counter(r.headers["reprise-origin"].rsplit("=", 1)[1] for r in records)
    assert found_per_day == expected_per_day
    assert len({r.value["event_id"] for r in records}) == len(records)  # no record twice
