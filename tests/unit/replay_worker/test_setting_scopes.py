"""Which client type each setting of the Kafka Secret goes to (issue 18, item 6), and that the consumer-only
and producer-only sets are librdkafka's own (read from the librdkafka that confluent-kafka bundles)."""

from __future__ import annotations

import ctypes
import glob
import os
from pathlib import Path

import confluent_kafka

from replay_worker.setting_scopes import CONSUMER_ONLY, PRODUCER_ONLY, settings_for

SECRET = {
    "security.protocol": "SASL_SSL",
    "sasl.username": "u",
    "session.timeout.ms": "30000",
    "linger.ms": "20",
    "consumer.session.timeout.ms": "45000",
    "producer.compression.type": "lz4",
    "admin.socket.timeout.ms": "9",
}


def test_each_client_type_gets_shared_settings_its_own_and_its_prefixed_ones():
    assert settings_for("consumer", SECRET) == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "u",
        "session.timeout.ms": "45000",
    }  # the prefixed value wins
    assert settings_for("producer", SECRET) == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "u",
        "linger.ms": "20",
        "compression.type": "lz4",
    }
    assert settings_for("admin", SECRET) == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "u",
        "socket.timeout.ms": "9",
    }


def librdkafka_properties(tmp_path: Path) -> dict[str, str]:
    """{property: "C" | "P" | "*"} as the bundled librdkafka prints its configuration table."""
    here = Path(confluent_kafka.__file__).parent
    found = glob.glob(str(here.parent / "confluent_kafka.libs" / "librdkafka*.so*")) or glob.glob(str(here / "*.so*"))
    library = ctypes.CDLL(found[0]) if found else ctypes.CDLL("librdkafka.so.1")
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    out = tmp_path / "properties.md"
    handle = libc.fopen(str(out).encode(), b"w")
    try:
        library.rd_kafka_conf_properties_show(ctypes.c_void_p(handle))
    finally:
        libc.fclose(ctypes.c_void_p(handle))
    table = {}
    for line in out.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and cells[1] in ("C", "P", "*"):
            table[cells[0]] = cells[1]
    return table


def test_the_scopes_are_librdkafkas(tmp_path):
    table = librdkafka_properties(tmp_path)
    assert len(table) > 150, os.fspath(tmp_path)
    callbacks = {k for k in table if k.endswith("_cb") or k == "msg_order_cmp"}  # set in code, never in a Secret
    assert CONSUMER_ONLY == {k for k, scope in table.items() if scope == "C"} - callbacks
    assert PRODUCER_ONLY == {k for k, scope in table.items() if scope == "P"} - callbacks
