"""One Kafka Secret, every client type (issue 18, item 6): each client Reprise builds gets only the settings
that apply to it, so a Secret holding consumer and producer settings makes no client warn, and per-client
prefixed settings reach exactly their client type. The real broker, real librdkafka clients, the operator's
and the worker's."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from replay_worker.connection import kafka_clients
from replay_worker.topic.handover_topic import HandoverTopic
from reprise_operator.doors.kafka_admin import KafkaCluster

pytestmark = pytest.mark.integration

#: A Secret as a user writes it: connection settings, settings of one client type, and prefixed ones.
SECRET = {
    "security.protocol": "plaintext",  # every client
    "session.timeout.ms": "30000",  # consumers only (librdkafka says C)
    "linger.ms": "20",  # producers only (P)
    "consumer.max.poll.interval.ms": "600000",  # prefixed: consumers only
    "producer.compression.type": "lz4",  # prefixed: producers only
    "admin.socket.timeout.ms": "45000",  # prefixed: admin clients only
}
#: What librdkafka says when a client is handed a setting of another client type (or an unknown one).
WRONG_CLIENT = (
    "is a consumer property and will be ignored",
    "is a producer property and will be ignored",
    "No such configuration property",
)


def secret_folder(tmp_path):
    folder = tmp_path / "kafka"
    folder.mkdir()
    for key, value in SECRET.items():
        (folder / key).write_text(value + "\n")
    return folder


def test_the_workers_clients_get_only_their_settings_and_none_warns(kafka, topic_name, tmp_path, caplog):
    kafka.create_topic(topic_name, 1)
    base = kafka_clients.connection(kafka.bootstrap, kafka_clients.load_config_dir(secret_folder(tmp_path)))
    consumer = kafka_clients.consumer_config(base, "scope-group")
    reader = kafka_clients.reader_config(base)
    producer = kafka_clients.producer_config(base)
    admin = kafka_clients.admin_config(base)
    assert consumer["session.timeout.ms"] == reader["session.timeout.ms"] == "30000"
    assert (
        consumer["max.poll.interval.ms"] == "600000"
        and "linger.ms" not in consumer
        and "compression.type" not in consumer
    )
    assert producer["linger.ms"] == "20" and producer["compression.type"] == "lz4"
    assert "session.timeout.ms" not in producer and "max.poll.interval.ms" not in producer
    assert admin["socket.timeout.ms"] == "45000" and not {"linger.ms", "session.timeout.ms"} & set(admin)
    assert all(c["security.protocol"] == "plaintext" for c in (consumer, reader, producer, admin))
    assert not [
        k
        for c in (consumer, reader, producer, admin)
        for k in c
        if k.split(".")[0] in ("consumer", "producer", "admin")
    ]

    caplog.set_level(logging.INFO, logger="replay_worker.librdkafka")
    clients = [Consumer(consumer), Consumer(reader), Producer(producer), AdminClient(admin)]
    offsets = kafka_clients.GroupOffsetReader(base, "scope-group")
    try:
        clients[0].subscribe([topic_name])
        clients[0].poll(1.0)
        clients[1].poll(0.5)
        clients[2].produce(topic_name, b"v")
        assert clients[2].flush(30) == 0
        clients[3].list_topics(timeout=10)
        clients[3].poll(0.5)
        offsets.committed([], timeout=5)
    finally:
        offsets.close()
        clients[0].close()
        clients[1].close()
    warnings = [r.getMessage() for r in caplog.records if any(w in r.getMessage() for w in WRONG_CLIENT)]
    assert warnings == []


def test_the_operators_clients_get_only_their_settings_and_none_warns(kafka, topic_name, tmp_path, capfd, caplog):
    # The admin client and offset readers log the librdkafka way (stderr); the handover topic's clients log
    # through Python's logging.
    caplog.set_level(logging.INFO, logger="replay_worker.librdkafka")
    kafka.create_topic(topic_name, 1)
    config = kafka_clients.load_config_dir(secret_folder(tmp_path))  # the Secret's data, as the operator reads it
    cluster = KafkaCluster(kafka.bootstrap, config)
    assert cluster.partitions([topic_name]) == {topic_name: [0]}
    assert cluster.committed_offsets("scope-operator", [(topic_name, 0)]) == {}
    handovers = HandoverTopic(kafka.bootstrap, f"{topic_name}-handover", config, timeout=30)
    try:
        handovers.ensure()
        handovers.tombstone("scope/test/00000000")
        handovers.read()
    finally:
        handovers.close()
    logged = capfd.readouterr()
    lines = (logged.err + logged.out).splitlines() + [r.getMessage() for r in caplog.records]
    warnings = [line for line in lines if any(w in line for w in WRONG_CLIENT)]
    assert warnings == []
