"""The progress markers of a LakeReplay run in a real Hadoop file system (through the local Spark's JVM): a
unit's markers, written several at a time, are all there when the call returns, and a retry reads them back,
whether the driver wrote them to its own disk (`file:`) or Hadoop did (every other scheme)."""

import json

import pytest

from spark_app.progress import HadoopProgress, ProgressMismatch

DAYS = tuple(f"2024-02-{d:02d}" for d in range(1, 21))  # more days than markers written at once


@pytest.mark.parametrize("local_writes", [True, False], ids=["written-by-the-driver", "written-through-hadoop"])
def test_a_units_markers_are_all_written_when_the_call_returns(spark, tmp_path, local_writes):
    uri = f"file://{tmp_path}/progress"
    progress = HadoopProgress(spark, uri, local_writes=local_writes)
    progress.claim({"source": "s3a://lake/events", "topic": "backfill"})
    progress.mark_started(DAYS)
    assert progress.started_days() == set(DAYS) and progress.done_days() == set()

    progress.mark_done({day: number for number, day in enumerate(DAYS[:15], start=1)})
    retry = HadoopProgress(spark, uri)
    assert retry.done_days() == set(DAYS[:15])
    assert retry.started_days() == set(DAYS)
    assert json.loads((tmp_path / "progress" / "days" / f"{DAYS[14]}.done").read_text())["records"] == 15
    # Hadoop's local file system writes a checksum file beside each marker; the driver's own writes do not.
    assert (tmp_path / "progress" / "days" / f".{DAYS[14]}.done.crc").exists() is not local_writes
    with pytest.raises(ProgressMismatch, match="topic was 'backfill', now 'other'"):
        retry.claim({"source": "s3a://lake/events", "topic": "other"})


def test_a_single_marker_and_none(spark, tmp_path):
    progress = HadoopProgress(spark, f"file://{tmp_path}/progress")
    progress.mark_done({})
    assert progress.done_days() == set()
    progress.mark_started(DAYS[:1])
    progress.mark_done({DAYS[0]: 7})
    assert progress.started_days() == progress.done_days() == {DAYS[0]}
