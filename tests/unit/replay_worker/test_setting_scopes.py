"""Which client type each setting of the Kafka Secret goes to (issue 18, item 6), and that the consumer-only
and producer-only sets are librdkafka's own (read from the librdkafka that confluent-kafka bundles); and that
every property of that librdkafka is classified as allowed or refused in the operator's process (issue 26, C1),
so a librdkafka upgrade that brings a property nobody has judged fails here instead of shipping."""

from __future__ import annotations

import ctypes
import glob
import os
from pathlib import Path

import confluent_kafka

from replay_worker.connection.setting_allow_list import (
    ALLOWED,
    ENUM_VALUES,
    FAMILIES,
    LISTED_VALUES,
    REFUSED,
    TOKEN_ENDPOINT,
)
from replay_worker.connection.setting_scopes import CONSUMER_ONLY, PRODUCER_ONLY, settings_for

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


def librdkafka_table(tmp_path: Path) -> list[list[str]]:
    """The rows of the configuration table the bundled librdkafka prints: [property, scope, range, default,
    importance, description] each (global and topic-level; a property of both appears twice)."""
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
    rows = []
    for line in out.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and cells[1] in ("C", "P", "*"):
            rows.append(cells)
    return rows


def librdkafka_properties(tmp_path: Path) -> dict[str, str]:
    """{property: "C" | "P" | "*"} as the bundled librdkafka prints its configuration table."""
    return {cells[0]: cells[1] for cells in librdkafka_table(tmp_path)}


def test_the_scopes_are_librdkafkas(tmp_path):
    table = librdkafka_properties(tmp_path)
    assert len(table) > 150, os.fspath(tmp_path)
    callbacks = {k for k in table if k.endswith("_cb") or k == "msg_order_cmp"}  # set in code, never in a Secret
    assert CONSUMER_ONLY == {k for k, scope in table.items() if scope == "C"} - callbacks
    assert PRODUCER_ONLY == {k for k, scope in table.items() if scope == "P"} - callbacks


def test_every_librdkafka_property_is_allowed_or_refused_in_the_operator(tmp_path):
    known = set(librdkafka_properties(tmp_path))
    assert not ALLOWED & set(REFUSED), "a property is both allowed and refused"
    unclassified = known - ALLOWED - set(REFUSED)
    assert not unclassified, (
        f"librdkafka properties nobody has classified: {sorted(unclassified)}; add each to ALLOWED or REFUSED "
        "in replay_worker/connection/setting_allow_list.py (allowed only if it reads no file, calls no URL, loads no code, "
        "writes no log and changes nothing process-wide)"
    )
    gone = (ALLOWED | set(REFUSED)) - known
    assert not gone, f"classified properties librdkafka no longer has: {sorted(gone)}"


def test_no_allowed_property_is_of_a_refused_family(tmp_path):
    import fnmatch

    of_families = {p for p in ALLOWED for pattern in FAMILIES if fnmatch.fnmatchcase(p, pattern)}
    # The one allowed `*.url`: its value must be an endpoint the platform lists (checked per value).
    assert of_families == {TOKEN_ENDPOINT}
    for prop in librdkafka_properties(tmp_path):
        if any(fnmatch.fnmatchcase(prop, pattern) for pattern in FAMILIES) and prop != TOKEN_ENDPOINT:
            assert prop in REFUSED, prop


def test_the_enumerated_values_checked_before_librdkafka_are_its_own(tmp_path):
    """librdkafka echoes a wrong enum value in its refusal, so every allowed enum property's values are checked
    first: the lists must be librdkafka's (union of its global and topic-level ranges)."""
    ranges: dict[str, set[str]] = {}
    for prop, _scope, values, *_rest in librdkafka_table(tmp_path):
        if "Type: enum value" in _rest[-1]:
            ranges.setdefault(prop, set()).update(v.strip().lower() for v in values.split(","))
    # Every allowed enum property is checked: against librdkafka's whole range, or a narrower list of its own.
    assert {p for p in ranges if p in ALLOWED} == set(ENUM_VALUES) | (set(LISTED_VALUES) & set(ranges))
    for prop, values in ENUM_VALUES.items():
        assert values == ranges[prop], prop
    for prop, values in LISTED_VALUES.items():
        assert prop not in ranges or {v.lower() for v in values} <= ranges[prop], prop
