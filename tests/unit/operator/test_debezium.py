"""Debezium signals (exact format, SQL quoting) and notifications (parsing, following one snapshot)."""

import json

import pytest

from reprise_operator.doors.debezium import (
    IN_LIST_LIMIT,
    Notification,
    SignalError,
    SnapshotProgress,
    execute_snapshot,
    follow_all,
    key_filter,
    parse_notification,
    pause_snapshot,
    resume_snapshot,
    signal_id,
    sql_literal,
    stop_snapshot,
)

ID = "reprise-0b1c"


def test_execute_snapshot_signal_has_debeziums_exact_shape():
    record = execute_snapshot(ID, "crm", "public.customers", "id", ["1017", "2044", "3090"], "ns/bf")
    assert record.key == b"crm"
    assert record.value == (
        b'{"id":"reprise-0b1c","type":"execute-snapshot","data":{"data-collections":["public.customers"],'
        b'"type":"incremental","additional-conditions":[{"data-collection":"public.customers",'
        b"\"filter\":\"id IN ('1017','2044','3090')\"}]}}"
    )
    assert dict(record.headers) == {"reprise.io/backfill": b"ns/bf"}


def test_signal_body_parses_back():
    body = execute_snapshot(ID, "crm", "inventory.orders", "order_no", ["A-1"]).body()
    assert body["type"] == "execute-snapshot"
    assert body["data"]["data-collections"] == ["inventory.orders"]
    assert body["data"]["additional-conditions"] == [
        {"data-collection": "inventory.orders", "filter": "order_no IN ('A-1')"}
    ]


def test_single_quotes_are_doubled():
    assert sql_literal("O'Brien") == "'O''Brien'"
    assert key_filter("name", ["O'Brien", "x' OR '1'='1"]) == "name IN ('O''Brien','x'' OR ''1''=''1')"


def test_unicode_keys_are_kept():
    record = execute_snapshot(ID, "crm", "public.t", "k", ["Zoë", "東京"])
    assert "k IN ('Zoë','東京')" in record.value.decode("utf-8")


@pytest.mark.parametrize("key", ["a\\b", "line\nbreak", "nul\x00", "tab\t"])
def test_unsafe_keys_are_refused(key):
    with pytest.raises(SignalError):
        key_filter("id", [key])


def test_many_keys_become_ored_lists_of_at_most_1000():
    keys = [str(i) for i in range(2500)]
    text = key_filter("id", keys)
    parts = text.split(" OR ")
    assert len(parts) == 3 and all(p.startswith("id IN (") for p in parts)
    assert parts[0].count(",") == IN_LIST_LIMIT - 1 and parts[2].count(",") == 499


def test_no_keys_and_oversized_signals_are_refused():
    with pytest.raises(SignalError):
        key_filter("id", [])
    with pytest.raises(SignalError, match="bytes"):
        execute_snapshot(ID, "crm", "public.t", "id", ["k" * 1000 + str(i) for i in range(1000)])


def test_pause_resume_and_stop_signals():
    assert pause_snapshot("p", "crm").body() == {"id": "p", "type": "pause-snapshot", "data": {"type": "incremental"}}
    assert resume_snapshot("r", "crm").body()["type"] == "resume-snapshot"
    stop = stop_snapshot("s", "crm", "public.customers")
    assert stop.key == b"crm"
    assert stop.body() == {
        "id": "s",
        "type": "stop-snapshot",
        "data": {"data-collections": ["public.customers"], "type": "incremental"},
    }


def test_signal_id_is_stable_per_object():
    assert signal_id("abc-123") == signal_id("abc-123") == "reprise-abc-123"


def note(type_: str, id_: str = ID, **extra: str) -> bytes:
    return json.dumps(
        {
            "id": id_,
            "aggregate_type": "Incremental Snapshot",
            "type": type_,
            "additional_data": {"connector_name": "crm", **extra},
            "timestamp": "1695817046353",
        }
    ).encode()


def test_parse_plain_and_enveloped_notifications():
    plain = parse_notification(note("STARTED"))
    assert plain == Notification(ID, "Incremental Snapshot", "STARTED", {"connector_name": "crm"}, 1695817046353)
    enveloped = json.dumps({"schema": {"type": "struct"}, "payload": json.loads(note("COMPLETED"))}).encode()
    assert parse_notification(enveloped).type == "COMPLETED"


@pytest.mark.parametrize("value", [None, b"", b"not json", b"[1,2]", b'{"no":"type"}'])
def test_non_notifications_are_ignored(value):
    assert parse_notification(value) is None


def test_following_a_snapshot_to_completed():
    notes = [
        parse_notification(note(t, **extra))
        for t, extra in [
            ("STARTED", {}),
            ("IN_PROGRESS", {"current_collection_in_progress": "public.customers"}),
            (
                "TABLE_SCAN_COMPLETED",
                {"data_collection": "public.customers", "total_rows_scanned": "3", "status": "SUCCEEDED"},
            ),
        ]
    ]
    progress = follow_all(SnapshotProgress(), notes, ID)
    assert progress.last == "TABLE_SCAN_COMPLETED" and not progress.completed and progress.rows_scanned == 3
    progress = follow_all(progress, [parse_notification(note("COMPLETED"))], ID)
    assert progress.completed and progress.failure is None and progress.seen == 4 and progress.at_ms == 1695817046353


def test_other_snapshots_notifications_change_nothing():
    progress = follow_all(SnapshotProgress(), [parse_notification(note("COMPLETED", id_="someone-else"))], ID)
    assert progress == SnapshotProgress()


@pytest.mark.parametrize(
    "raw, failed",
    [
        (note("ABORTED"), "aborted"),
        (note("TABLE_SCAN_COMPLETED", status="SQL_EXCEPTION", data_collection="public.customers"), "SQL_EXCEPTION"),
        (note("TABLE_SCAN_COMPLETED", status="NO_PRIMARY_KEY"), "NO_PRIMARY_KEY"),
    ],
)
def test_failures_are_reported(raw, failed):
    progress = follow_all(SnapshotProgress(), [parse_notification(raw)], ID)
    assert progress.failure is not None and failed in progress.failure


def test_empty_table_scan_is_not_a_failure():
    progress = follow_all(SnapshotProgress(), [parse_notification(note("TABLE_SCAN_COMPLETED", status="EMPTY"))], ID)
    assert progress.failure is None
