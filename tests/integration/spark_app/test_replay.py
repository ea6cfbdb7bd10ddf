"""The job against a real broker: a generated lake under three schema versions, replayed for a sub-range with a
filter, lands in the backfill topic exactly, in the latest schema, in per-key order; a wrong topic fails loudly."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from confluent_kafka import Producer

from spark_app.lakegen import expected_records

from .conftest import Record, job_args, read_topic

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 2, 10, tzinfo=timezone.utc)  # mid-day bounds: partitions pruned, then rows by time
END = datetime(2024, 1, 10, 6, tzinfo=timezone.utc)
FILTER = "event_type <> 'view' AND amount >= 100"


def passes(record: dict) -> bool:
    return record["event_type"] != "view" and record["amount"] >= 100


@dataclass
class Replayed:
    topic: str
    args: list[str]
    exit_code: int
    log: str
    records: list[Record]


@pytest.fixture(scope="module")
def replayed(lake, kafka, jobs, tmp_path_factory) -> Replayed:
    topic = kafka.create_topic(f"lake-replay-{uuid.uuid4().hex[:8]}", 3)
    progress = tmp_path_factory.mktemp("progress")
    args = job_args(
        lake,
        kafka,
        topic,
        progress,
        "--from",
        "2024-01-02T10:00:00Z",
        "--to",
        "2024-01-10T06:00:00Z",
        "--filter",
        FILTER,
        "--max-records-per-write",
        "8000",
    )
    code, log = jobs.run(args, "replay")
    return Replayed(topic, args, code, log, read_topic(kafka, topic) if code == 0 else [])


def test_the_topic_holds_exactly_the_rows_in_range_that_pass_the_filter_in_the_latest_schema(replayed, lake):
    assert replayed.exit_code == 0, replayed.log[-3000:]
    assert "3 schema group(s)" in replayed.log
    expected = {r["event_id"]: (n, r) for n, r in expected_records(lake.spec, START, END) if passes(r)}
    assert len(replayed.records) == len(expected)  # nothing twice
    by_id = {rec.value["event_id"]: rec for rec in replayed.records}
    assert set(by_id) == set(expected)
    for event_id, (n, want) in expected.items():
        record = by_id[event_id]
        got = dict(record.value, ts=datetime.fromisoformat(record.value["ts"]))
        assert got == want, event_id
        assert record.key == want["user_id"]
        assert record.headers["reprise-replay"] == "true"
        assert record.headers["reprise-origin"] == f"{lake.uri}#dt={lake.spec.day_text(n)}"
    # The range spans all three schema versions, so renames, widening and both kinds of defaults were exercised.
    wanted = [w for _, w in expected.values()]
    assert {lake.spec.version_of(n) for n, _ in expected.values()} == {1, 2, 3}
    assert any(w["currency"] == "N/A" for w in wanted) and any(w["channel"] == "legacy" for w in wanted)
    assert any(w["channel"] is None for w in wanted)  # written as null under the latest schema: kept null


def test_each_key_is_in_one_partition_in_day_and_event_time_order(replayed):
    assert replayed.exit_code == 0, replayed.log[-3000:]
    by_key: dict[str, list[Record]] = defaultdict(list)
    for record in sorted(replayed.records, key=lambda r: (r.partition, r.offset)):
        by_key[record.key].append(record)
    assert len(by_key) > 100
    for key, records in by_key.items():
        assert len({r.partition for r in records}) == 1, key
        order = [(r.headers["reprise-origin"], r.value["ts"], int(r.headers["reprise-seq"])) for r in records]
        assert order == sorted(order), key
        per_day: dict[str, list[int]] = defaultdict(list)
        for origin, _, seq in order:
            per_day[origin].append(seq)
        assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in per_day.values()), key


def test_validation_fails_loudly_when_the_topic_holds_a_record_twice(replayed, kafka, jobs):
    assert replayed.exit_code == 0, replayed.log[-3000:]
    copy = replayed.records[len(replayed.records) // 2]
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(
        replayed.topic,
        key=copy.key.encode(),
        value=__import__("json").dumps(copy.value).encode(),
        partition=copy.partition,
        headers=[(k, v.encode()) for k, v in copy.headers.items()],
    )
    assert producer.flush(60) == 0
    day = copy.headers["reprise-origin"].rsplit("=", 1)[1]
    in_lake = sum(1 for r in replayed.records if r.headers["reprise-origin"] == copy.headers["reprise-origin"])

    code, log = jobs.run(replayed.args, "revalidate")

    assert code == 3, log[-3000:]
    assert "skipping" in log  # every day was written: nothing is written again
    assert "validation failed: 1 day(s) of topic" in log
    assert f"day {day}: lake {in_lake} records, topic {in_lake + 1}: 1 more than in the lake; 1 duplicate(s)" in log
