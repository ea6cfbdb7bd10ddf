"""Kafka client settings for Spark's Kafka sink and source: read from the mounted Secret, never logged.

The LakeReplay's Secret holds librdkafka properties (what the replay worker uses), one per file, as
Kubernetes mounts it; a single `.properties` or `.json` file is read as well. Spark's Kafka connector runs the
Java client, whose names differ, so `java_client_settings()` translates: `sasl.username`/`sasl.password`
become a `sasl.jaas.config` for the SASL mechanism, `ssl.ca.location`/`ssl.ca.pem` a PEM trust store, a PEM
client key and certificate a PEM key store. Java names (`sasl.jaas.config`, `ssl.truststore.*`, ...) pass
as they are.

The settings the order of records depends on are the job's, not the Secret's: an idempotent producer with
`acks=all` and at most 5 requests in flight keeps each partition's log in send order through retries.
Only key names ever reach a log line or an error message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

# Set by the job; a Secret may not change them (per-key order and no duplicates from retries depend on them).
ENFORCED = {
    "acks": "all",
    "enable.idempotence": "true",
    "max.in.flight.requests.per.connection": "5",
}
# Throughput defaults a Secret may override (`compression.type`, `linger.ms`, `batch.size`): fuller batches,
# cheap compression. Measured with benchmarks/spark.py (2M records, the CPU of Spark's JVM and of the broker per
# pass): no compression costs more than lz4 (the producer's network thread and the broker move four times the
# bytes), snappy and zstd no less, and batches of 64 KiB or 1 MB no less than 256 KiB; most of the Kafka sink's
# cost is per record, in Spark's row-to-ProducerRecord conversion and the client's append (~0.9 of its ~2.3 CPU-s
# per million records, JVM and broker, for the three replay headers), which no producer setting changes.
PRODUCER_DEFAULTS = {
    "linger.ms": "20",
    "batch.size": "262144",
    "compression.type": "lz4",
}
# Spark sets these itself and refuses them as options.
_SPARK_OWNED = {
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "auto.offset.reset",
    "enable.auto.commit",
    "interceptor.classes",
}
_LIBRDKAFKA_ONLY = {
    "sasl.username",
    "sasl.password",
    "sasl.mechanisms",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
}
_SCRAM = {"SCRAM-SHA-256", "SCRAM-SHA-512"}


class KafkaSettingsError(ValueError):
    """The client settings cannot be read or translated; the message names files and keys, never values."""


def load_client_settings(location: str | None) -> dict[str, str]:
    """The settings at `location`: a folder with one file per key (a mounted Secret), or one file."""
    if not location:
        return {}
    place = Path(location)
    if place.is_dir():
        values: dict[str, str] = {}
        for entry in sorted(place.iterdir()):
            # A mounted Secret also holds `..data` links and a `..<timestamp>` folder.
            if entry.name.startswith(".") or not entry.is_file():
                continue
            values[entry.name] = _read(entry).removesuffix("\n")
        return values
    if not place.is_file():
        raise KafkaSettingsError(f"Kafka client settings {place}: no such file or folder")
    text = _read(place)
    if place.suffix == ".json":
        try:
            document = json.loads(text)
        except ValueError:
            raise KafkaSettingsError(f"Kafka client settings {place} is not valid JSON") from None
        if not isinstance(document, dict):
            raise KafkaSettingsError(f"Kafka client settings {place} must be a JSON object of key: value")
        return {str(k): str(v) for k, v in document.items()}
    return _properties(text, place)


def java_client_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """librdkafka-style settings as Java client settings (Java names are kept as they are)."""
    given = {k.strip(): v for k, v in settings.items()}
    refused = sorted(k for k in given if k in _SPARK_OWNED)
    if refused:
        raise KafkaSettingsError(
            f"Kafka client settings may not set {', '.join(refused)}: Spark's Kafka connector sets them"
        )
    if "bootstrap.servers" in given:
        raise KafkaSettingsError("Kafka client settings may not set bootstrap.servers: it is --bootstrap-servers")
    conflicting = sorted(k for k, v in given.items() if k in ENFORCED and v.strip().lower() not in _same(k))
    if conflicting:
        raise KafkaSettingsError(
            f"Kafka client settings may not change {', '.join(conflicting)}: per-key order "
            f"and duplicate-free retries depend on {', '.join(f'{k}={ENFORCED[k]}' for k in conflicting)}"
        )
    java = {k: v for k, v in given.items() if k not in _LIBRDKAFKA_ONLY}
    if "security.protocol" in java:
        java["security.protocol"] = java["security.protocol"].strip().upper()
    mechanism = (given.get("sasl.mechanism") or given.get("sasl.mechanisms") or "").strip().upper()
    if mechanism:
        java["sasl.mechanism"] = mechanism
    if "sasl.username" in given or "sasl.password" in given:
        if "sasl.jaas.config" in given:
            raise KafkaSettingsError("Kafka client settings set both sasl.username/sasl.password and sasl.jaas.config")
        if "sasl.username" not in given or "sasl.password" not in given:
            raise KafkaSettingsError("Kafka client settings need both sasl.username and sasl.password")
        java["sasl.jaas.config"] = jaas_config(mechanism or "PLAIN", given["sasl.username"], given["sasl.password"])
    if "ssl.ca.location" in given or "ssl.ca.pem" in given:
        java["ssl.truststore.type"] = "PEM"
        if "ssl.ca.pem" in given:
            java["ssl.truststore.certificates"] = given["ssl.ca.pem"]
        else:
            java["ssl.truststore.location"] = given["ssl.ca.location"]
    if any(k in given for k in ("ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem")):
        certificate = given.get("ssl.certificate.pem") or _file_value(given, "ssl.certificate.location")
        key = given.get("ssl.key.pem") or _file_value(given, "ssl.key.location")
        if not certificate or not key:
            raise KafkaSettingsError(
                "Kafka client settings need both a client certificate and its key (ssl.certificate.* and ssl.key.*)"
            )
        java["ssl.keystore.type"] = "PEM"
        java["ssl.keystore.certificate.chain"] = certificate
        java["ssl.keystore.key"] = key
    if java.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    return java


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """The Java client's JAAS line for SASL PLAIN or SCRAM with a user name and password."""
    if mechanism in _SCRAM:
        module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    elif mechanism == "PLAIN":
        module = "org.apache.kafka.common.security.plain.PlainLoginModule"
    else:
        raise KafkaSettingsError(
            f"sasl.username/sasl.password work with PLAIN or SCRAM, not {mechanism}: give sasl.jaas.config instead"
        )
    return f'{module} required username="{_quoted(username)}" password="{_quoted(password)}";'


def spark_options(bootstrap_servers: str, settings: Mapping[str, str], *, producer: bool) -> dict[str, str]:
    """Options for Spark's Kafka sink (`producer=True`) or source: every client setting prefixed `kafka.`."""
    options = {"kafka.bootstrap.servers": bootstrap_servers}
    if producer:
        options.update({f"kafka.{k}": v for k, v in PRODUCER_DEFAULTS.items()})
    options.update({f"kafka.{k}": v for k, v in settings.items()})
    if producer:
        # Values a Secret set are compatible with these (java_client_settings refuses the others).
        for key, value in ENFORCED.items():
            options.setdefault(f"kafka.{key}", value)
    return options


def describe(settings: Mapping[str, str]) -> str:
    """The key names only, for a log line."""
    return ", ".join(sorted(settings)) or "none"


def _same(key: str) -> set[str]:
    return {
        "acks": {"all", "-1"},
        "enable.idempotence": {"true"},
        "max.in.flight.requests.per.connection": {"1", "2", "3", "4", "5"},
    }[key]


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _file_value(given: Mapping[str, str], key: str) -> str | None:
    if key not in given:
        return None
    return _read(Path(given[key]))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaSettingsError(f"cannot read Kafka client settings file {path}: {type(exc).__name__}") from None


def _properties(text: str, place: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        separator = min((i for i in (stripped.find("="), stripped.find(":")) if i > 0), default=-1)
        if separator < 0:
            raise KafkaSettingsError(f"{place} line {number} is not key=value")
        values[stripped[:separator].strip()] = stripped[separator + 1 :].strip()
    return values
