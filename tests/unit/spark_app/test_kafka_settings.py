"""Kafka client settings: read from a mounted Secret or a file, translated for Spark's Java client, never leaked."""

import json

import pytest

from spark_app.kafka_settings import (
    KafkaSettingsError,
    describe,
    java_client_settings,
    load_client_settings,
    spark_options,
)


def test_a_mounted_secret_folder_is_read_skipping_kubernetes_links(tmp_path):
    (tmp_path / "security.protocol").write_text("sasl_ssl\n")
    (tmp_path / "sasl.password").write_text("s3cret")
    (tmp_path / "..data").mkdir()
    (tmp_path / "..2024_01_01").mkdir()
    assert load_client_settings(str(tmp_path)) == {"security.protocol": "sasl_ssl", "sasl.password": "s3cret"}


def test_properties_and_json_files(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# comment\nsecurity.protocol = SSL\nssl.truststore.location: /etc/ts.jks\n")
    assert load_client_settings(str(props)) == {"security.protocol": "SSL", "ssl.truststore.location": "/etc/ts.jks"}
    doc = tmp_path / "client.json"
    doc.write_text(json.dumps({"client.id": "replay", "request.timeout.ms": 30000}))
    assert load_client_settings(str(doc)) == {"client.id": "replay", "request.timeout.ms": "30000"}


def test_sasl_user_and_password_become_a_jaas_line_for_the_mechanism():
    java = java_client_settings(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "replayer",
            "sasl.password": 'p"w\\d',
        }
    )
    assert java["security.protocol"] == "SASL_SSL"
    assert java["sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="replayer" password="p\\"w\\\\d";'
    )
    assert "sasl.username" not in java and "sasl.password" not in java and "sasl.mechanisms" not in java


def test_plain_is_the_default_mechanism_and_oauth_needs_a_jaas_line():
    assert "PlainLoginModule" in java_client_settings({"sasl.username": "u", "sasl.password": "p"})["sasl.jaas.config"]
    with pytest.raises(KafkaSettingsError, match="give sasl.jaas.config"):
        java_client_settings({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u", "sasl.password": "p"})


def test_pem_trust_and_key_material(tmp_path):
    (tmp_path / "cert.pem").write_text("CERT")
    (tmp_path / "key.pem").write_text("KEY")
    java = java_client_settings(
        {
            "ssl.ca.pem": "CA",
            "ssl.certificate.location": str(tmp_path / "cert.pem"),
            "ssl.key.location": str(tmp_path / "key.pem"),
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert java == {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": "CA",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "CERT",
        "ssl.keystore.key": "KEY",
        "ssl.endpoint.identification.algorithm": "",
    }


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"acks": "1"}, "may not change acks"),
        ({"enable.idempotence": "false"}, "may not change enable.idempotence"),
        ({"max.in.flight.requests.per.connection": "10"}, "may not change max.in.flight"),
        ({"value.serializer": "x"}, "Spark's Kafka connector sets them"),
        ({"bootstrap.servers": "other:9092"}, "--bootstrap-servers"),
        ({"sasl.username": "u"}, "both sasl.username and sasl.password"),
        ({"ssl.certificate.pem": "C"}, "both a client certificate and its key"),
    ],
)
def test_settings_that_would_break_the_job_are_refused(settings, message):
    with pytest.raises(KafkaSettingsError, match=message):
        java_client_settings(settings)


def test_errors_and_descriptions_never_show_values():
    secret = "hunter2-value"
    with pytest.raises(KafkaSettingsError) as error:
        java_client_settings({"sasl.username": secret})
    assert secret not in str(error.value)
    assert secret not in describe(java_client_settings({"sasl.username": "u", "sasl.password": secret}))


def test_spark_options_prefix_everything_and_keep_the_ordering_settings():
    producer = spark_options("k:9092", {"linger.ms": "5", "acks": "-1", "security.protocol": "SSL"}, producer=True)
    assert producer["kafka.bootstrap.servers"] == "k:9092"
    assert producer["kafka.linger.ms"] == "5"  # a Secret may tune throughput
    assert producer["kafka.acks"] == "-1"  # ... and say "all" its own way
    assert producer["kafka.enable.idempotence"] == "true"
    assert producer["kafka.max.in.flight.requests.per.connection"] == "5"
    assert producer["kafka.compression.type"] == "lz4"
    consumer = spark_options("k:9092", {"security.protocol": "SSL"}, producer=False)
    assert consumer == {"kafka.bootstrap.servers": "k:9092", "kafka.security.protocol": "SSL"}
