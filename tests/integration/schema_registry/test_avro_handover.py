"""A Python/Python Handover over Avro values (and over Protobuf values), on the real broker and the real
schema registry.

The topic holds records written under two versions of one subject's schema; the second version added
`region`, and the replay's filter is `region == "eu"`, so the v1 records (no region) never match and the v2
records match by their value. The live service is the guarded test service (`live_service.py`), the replay
the Python worker with the test sink; both read the schemas from the registry by id. The ledgers must be exact:
the replay processes every matching record in [S, H) once and nothing else (nothing below S, nothing at or
above H, no record that does not match), and from the first record the guard skipped on, every record is
processed by exactly one of the two groups, with nothing lost.

The second test cuts the registry off (a relay in front of it refuses every connection) before the replay
starts: the replay and the guard must wait and say so, judging nothing, and the handover must complete with
the same exact ledgers once the registry is reachable again.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from local_platform.schema_registry import CCOMPAT_PATH, SchemaRegistry
from replay_worker.protocol.record_values import encode_avro, encode_protobuf
from replay_worker.topic.handover_topic import HandoverTopic
from tests.integration.replay_worker.harness import (
    Processes,
    check_split,
    committed,
    end_offsets,
    read_log_lines,
    settle,
    wait_for,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
HISTORY = 3000
LIVE_RECORDS = 3000
V1 = {"type": "record", "name": "Order", "namespace": "e2e", "fields": [{"name": "n", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "e2e",
    "fields": [{"name": "n", "type": "long"}, {"name": "region", "type": ["null", "string"], "default": None}],
}
REGIONS = ("eu", "us", None)


PROTO_V1 = 'syntax = "proto3";\npackage e2e;\nmessage Order { int64 n = 1; }\n'
PROTO_V2 = 'syntax = "proto3";\npackage e2e;\nmessage Order { int64 n = 1; string region = 2; }\n'


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _proto_order(n: int, region: str | None) -> bytes:
    """An `Order` message by hand (field 1 varint, field 2 length-delimited): what any serializer writes."""
    body = b"\x08" + _varint(n)
    if region:
        body += b"\x12" + _varint(len(region)) + region.encode()
    return body


def _value(n: int, ids: dict[str, Any]) -> bytes:
    """Record n: the first half of the history under v1, everything after under v2 (eu, us, null in turn)."""
    version = "v1" if n < HISTORY // 2 else "v2"
    region = None if version == "v1" else REGIONS[n % 3]
    if ids["format"] == "protobuf":
        return encode_protobuf(ids[version], (0,), _proto_order(n, region))
    if version == "v1":
        return encode_avro(ids["v1"], V1, {"n": n})
    return encode_avro(ids["v2"], V2, {"n": n, "region": region})


def _matches(n: int) -> bool:
    return n >= HISTORY // 2 and REGIONS[n % 3] == "eu"


class _Writer(threading.Thread):
    """Writes records `first`..`first + total - 1` at about `rate` a second, recording each offset's n."""

    def __init__(self, bootstrap: str, topic: str, ids: dict[str, Any], first: int, total: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.topic, self.ids, self.first, self.total, self.rate = topic, ids, first, total, rate
        self.written: dict[tuple[int, int], int] = {}
        self.error: str | None = None

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.written[(msg.partition(), msg.offset())] = int(msg.key())
        else:
            self.error = str(err)

    def run(self) -> None:
        began = time.monotonic()
        try:
            for i in range(self.total):
                n = self.first + i
                self.producer.produce(
                    self.topic,
                    value=_value(n, self.ids),
                    key=str(n).encode(),
                    partition=n % PARTITIONS,
                    on_delivery=self._delivered,
                )
                if self.rate and i % 20 == 0:
                    self.producer.poll(0)
                    ahead = i / self.rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
            self.producer.flush(60)
        except Exception as exc:  # surfaced by the test
            self.error = repr(exc)


class RegistryLink:
    """A loopback TCP relay to the registry that the test can cut (every connection refused at once: the
    registry is unreachable) and restore, on the same address; the registry behind it keeps its schemas."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = threading.Event()
        self.up.set()
        self.refused = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up.is_set():
                self.refused += 1
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s_ in (source, sink):
                try:
                    s_.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


def _log_says(folder: Path, prefix: str, text: str) -> bool:
    return any(text in path.read_text(errors="replace") for path in folder.glob(f"{prefix}*.log"))


def test_handover_of_avro_values_filtered_on_a_field_the_second_version_added(
    kafka, schema_registry: SchemaRegistry, topic_name, tmp_path: Path
) -> None:
    _run_avro_handover(kafka, schema_registry, topic_name, tmp_path, outage=False)


def test_handover_of_protobuf_values_filtered_on_a_field_the_second_version_added(
    kafka, schema_registry: SchemaRegistry, topic_name, tmp_path: Path
) -> None:
    _run_avro_handover(kafka, schema_registry, topic_name, tmp_path, outage=False, value_format="protobuf")


def test_an_unreachable_registry_is_a_wait_and_the_handover_completes_exactly_once_it_is_back(
    kafka, schema_registry: SchemaRegistry, topic_name, tmp_path: Path
) -> None:
    _run_avro_handover(kafka, schema_registry, topic_name, tmp_path, outage=True)


def _run_avro_handover(
    kafka, schema_registry: SchemaRegistry, topic_name: str, tmp_path: Path, outage: bool, value_format: str = "avro"
) -> None:
    bootstrap = kafka.bootstrap
    link = RegistryLink(schema_registry.port)
    registry_url = link.url(CCOMPAT_PATH)
    subject = f"{topic_name}-value"
    ids: dict[str, Any] = {"format": value_format}
    if value_format == "protobuf":
        ids["v1"] = schema_registry.register(subject, PROTO_V1, "PROTOBUF")
        ids["v2"] = schema_registry.register(subject, PROTO_V2, "PROTOBUF")  # BACKWARD: a new field is fine
    else:
        ids["v1"] = schema_registry.register(subject, json.dumps(V1))
        ids["v2"] = schema_registry.register(subject, json.dumps(V2))  # BACKWARD: adding a defaulted field is fine
    assert ids["v1"] != ids["v2"]
    out_dir, handover_topic = tmp_path / "out", f"{topic_name}-handover"
    out_dir.mkdir()
    procs = Processes(tmp_path / "logs")
    try:
        kafka.create_topic(topic_name, PARTITIONS)
        made = HandoverTopic(bootstrap, handover_topic, timeout=30)
        try:
            made.ensure(create=True)
        finally:
            made.close()
        history = _Writer(bootstrap, topic_name, ids, 0, HISTORY, rate=0)
        history.run()
        assert history.error is None and len(history.written) == HISTORY
        live_group = f"{topic_name}-live"
        lives = [procs.live("live1", bootstrap, live_group, topic_name, out_dir, handover_topic, 100)]
        wait_for(
            lambda: all(
                committed(bootstrap, live_group, topic_name, PARTITIONS)[p][0] >= end
                for p, end in end_offsets(bootstrap, topic_name, PARTITIONS).items()
            ),
            120,
            "the live service caught up with the history",
            processes_to_watch=lives,
        )
        live_from = {p: o for p, (o, _) in committed(bootstrap, live_group, topic_name, PARTITIONS).items()}
        live = _Writer(bootstrap, topic_name, ids, HISTORY, LIVE_RECORDS, rate=300)
        live.start()
        replay_id = f"test/{topic_name}"
        env = {
            "REPRISE_BOOTSTRAP_SERVERS": bootstrap,
            "REPRISE_REPLAY_ID": replay_id,
            "REPRISE_TOPICS": topic_name,
            "REPRISE_REPLAY_GROUP": f"{topic_name}-replay",
            "REPRISE_HANDLER": "tests.integration.replay_worker.sink:record",
            "REPRISE_HANDOVER_TOPIC": handover_topic,
            "REPRISE_METRICS_PORT": "0",
            "REPRISE_TEST_SINK_DIR": str(out_dir),
            "REPRISE_CHECK_INTERVAL": "0.5",
            "REPRISE_MODE": "Handover",
            "REPRISE_LIVE_GROUP": live_group,
            "REPRISE_BATCH_SIZE": "200",
            "REPRISE_MAX_RECORDS_PER_SECOND": "1500",
            "REPRISE_FILTER": json.dumps(
                {"valueFormat": value_format, "registry": registry_url, "json": [{"path": "region", "equals": "eu"}]}
            ),
        }
        if outage:
            # Cut before the replay starts, so that neither the worker nor the guard has a schema cached.
            link.up.clear()

        def complete() -> bool:
            reader = HandoverTopic(bootstrap, handover_topic, timeout=10)
            try:
                return reader.read_replay(replay_id).complete
            except Exception:
                return False
            finally:
                reader.close()

        workers = [procs.worker("w1", env)]
        if outage:
            # Both sides wait, say so, and decide nothing: no record reaches the replay's handler.
            wait_for(
                lambda: (
                    _log_says(procs.log_dir, "w1", "waiting for the schema registry")
                    and _log_says(procs.log_dir, "live1", "waiting for the schema registry")
                ),
                120,
                "the replay and the guard waiting for the registry",
                processes_to_watch=lives + workers,
            )
            assert read_log_lines(out_dir, "replay") == {}, "a record was judged without its schema"
            assert not complete()
            link.up.set()

        wait_for(complete, 300, "every partition handed over and acknowledged", 1.0, lives + workers)
        live.join(120)
        assert live.error is None and len(live.written) == LIVE_RECORDS
        starts, handovers, ends = settle(
            bootstrap, handover_topic, replay_id, topic_name, PARTITIONS, live_group, lives, workers
        )
    finally:
        procs.stop_all()
        link.close()
        schema_registry.request("DELETE", f"/subjects/{subject}")
    number_at = {**history.written, **live.written}
    replayed = read_log_lines(out_dir, "replay")
    # The replay's ledger: every record in [S, H) whose v2 value has region "eu", once; nothing else.
    expected = {
        (topic_name, p, o)
        for (p, o), n in number_at.items()
        if starts[p] is not None and handovers[p] is not None and starts[p] <= o < handovers[p] and _matches(n)
    }
    assert expected, "no record matched: nothing was tested"
    assert set(replayed) == expected, (
        f"missing {sorted(expected - set(replayed))[:5]}, extra {sorted(set(replayed) - expected)[:5]}"
    )
    assert all(count == 1 for count in replayed.values())
    assert not any(number_at[(p, o)] < HISTORY // 2 for (_, p, o) in replayed), "a v1 record was replayed"
    # The split with the live group: nothing lost; from the first record the guard skipped, exactly once.
    report = check_split(
        topic_name, PARTITIONS, starts, live_from, handovers, ends, read_log_lines(out_dir, "live"), replayed
    )
    print(report.summary())
    assert report.lost == [], report.summary()
    if outage:
        # The guard held the live records back while it waited, so the replay caught up with a live group that
        # had not moved on: H is where the live service stopped, and the guard may have had nothing to skip.
        assert link.refused > 0
    else:
        assert any(f is not None for f in report.first_skipped.values()), "the guard never skipped: nothing tested"
    assert report.duplicates == {} and report.both == [], report.summary()
