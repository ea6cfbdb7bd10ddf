"""The bad records of an Avro topic on the real broker and registry: a record that is not framed, one whose
schema id the registry does not know, and one whose payload does not read under its schema. Each is
undecodable (HANDOVER.md section 4, "Schemas"): the replay dead-letters it, saying why, and goes on; the good
records are filtered on their decoded field as usual."""

from __future__ import annotations

import json

import pytest

from local_platform.schema_registry import SchemaRegistry
from replay_worker.protocol.record_values import encode_avro
from tests.integration.replay_worker.harness import produce, read_log_lines
from tests.integration.replay_worker.test_replay import _exit_code, _read_all

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "Payment",
    "namespace": "poison",
    "fields": [{"name": "n", "type": "long"}, {"name": "status", "type": "string"}],
}
UNFRAMED_AT, UNKNOWN_ID_AT, TRUNCATED_AT = 10, 20, 30
UNKNOWN_ID = 2_000_000


def test_unframed_unknown_id_and_truncated_records_are_dead_lettered_and_the_replay_goes_on(
    kafka, schema_registry: SchemaRegistry, topic_name, procs, worker_env, out_dir
) -> None:
    subject = f"{topic_name}-value"
    schema_id = schema_registry.register(subject, json.dumps(SCHEMA))

    def value_of(n: int) -> bytes:
        good = encode_avro(schema_id, SCHEMA, {"n": n, "status": "paid" if n % 2 == 0 else "open"})
        if n == UNFRAMED_AT:
            return json.dumps({"n": n, "status": "paid"}).encode()  # JSON where Avro is expected
        if n == UNKNOWN_ID_AT:
            return encode_avro(UNKNOWN_ID, SCHEMA, {"n": n, "status": "paid"})
        if n == TRUNCATED_AT:
            return good[:-2]
        return good

    kafka.create_topic(topic_name, 1)
    dlq = kafka.create_topic(f"{topic_name}-dlq", 1)
    produce(kafka.bootstrap, topic_name, 1, 60, value_of=value_of)
    try:
        worker = procs.worker(
            "w",
            worker_env(
                REPRISE_FILTER=json.dumps(
                    {
                        "valueFormat": "avro",
                        "registry": schema_registry.url,
                        "json": [{"path": "status", "equals": "paid"}],
                    }
                ),
                REPRISE_DLQ_TOPIC=dlq,
                REPRISE_EXIT_WHEN_DONE="true",
            ),
        )
        assert _exit_code(worker) == 0, worker.log_tail(30)
    finally:
        schema_registry.request("DELETE", f"/subjects/{subject}")
    poison = (UNFRAMED_AT, UNKNOWN_ID_AT, TRUNCATED_AT)
    replayed = sorted(o for (_, _, o) in read_log_lines(out_dir, "replay"))
    assert replayed == [o for o in range(60) if o % 2 == 0 and o not in poison]
    dead = _read_all(kafka.bootstrap, dlq, 1)
    reasons = {int(dict(r[4])["reprise.source.offset"]): dict(r[4])["reprise.error"] for r in dead}
    assert sorted(reasons) == list(poison), reasons
    assert b"not in the Confluent wire format" in reasons[UNFRAMED_AT]
    assert f"schema id {UNKNOWN_ID} is unknown".encode() in reasons[UNKNOWN_ID_AT]
    assert b"does not read under Avro schema" in reasons[TRUNCATED_AT]
