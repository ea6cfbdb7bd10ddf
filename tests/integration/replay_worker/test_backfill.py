"""Role `backfill` (Backfill's `topic` source) against the real broker: the latest value of each named key,
re-produced where Java's partitioner puts it, and the keys that were not found reported by name."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from replay_worker.topic.handover_topic import HandoverTopic

from .harness import end_offsets

pytestmark = pytest.mark.integration


def kafka_murmur2(key: bytes) -> int:
    """The Java client's murmur2 (signed 32-bit), as in org.apache.kafka.common.utils.Utils.murmur2."""
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ len(key)) & 0xFFFFFFFF
    whole = len(key) // 4
    for i in range(whole):
        k = int.from_bytes(key[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[4 * whole :]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_murmur2_partition(key: bytes, partitions: int) -> int:
    """The Java client's default partition for a key: toPositive(murmur2(key)) % partitions."""
    return (kafka_murmur2(key) & 0x7FFFFFFF) % partitions


@pytest.mark.parametrize(
    "key, expected",
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"abc", 479470107),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
    ],
)
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    # The values of Kafka's own UtilsTest.testMurmur2.
    assert kafka_murmur2(key) == expected


def test_backfill_re_emits_the_latest_value_of_each_key(
    kafka, topic_name, procs, worker_env, handover_topic, tmp_path
) -> None:
    source = kafka.create_topic(topic_name, 3, config={"cleanup.policy": "compact"})
    target = kafka.create_topic(f"{topic_name}-target", 5)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "partitioner": "murmur2_random"})
    latest: dict[str, bytes] = {}
    for version in range(3):
        for i in range(300):
            key = f"customer-{i}"
            value = json.dumps({"id": i, "version": version}).encode()
            producer.produce(source, key=key.encode(), value=value, headers=[("v", str(version).encode())])
            latest[key] = value
    producer.produce(source, key=b"customer-5", value=None)  # deleted since
    producer.flush(30)
    wanted = [f"customer-{i}" for i in range(0, 300, 3)] + ["customer-900", "customer-901"]
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("\n".join(wanted) + "\n")
    result_file = tmp_path / "result.json"
    worker = procs.worker(
        "backfill",
        worker_env(
            REPRISE_ROLE="backfill",
            REPRISE_REPLAY_GROUP="",
            REPRISE_HANDLER="",
            REPRISE_TOPICS=source,
            REPRISE_FORWARD_TOPIC=target,
            REPRISE_FILTER=json.dumps({"keysFile": str(keys_file)}),
            REPRISE_RESULT_FILE=str(result_file),
        ),
    )
    assert worker.popen.wait(120) == 0, worker.log_tail(30)
    result = json.loads(result_file.read_text())
    assert result["missing"] == ["customer-900", "customer-901"]
    assert result["deleted"] == ["customer-3"] or result["deleted"] == []  # customer-5 is not asked for
    assert result["produced"] == len(wanted) - 2
    # The target holds exactly the latest value of each key, where Java's partitioner puts the key.
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": f"{target}-check",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(target, p, -2) for p in range(5)])
    seen, eof = {}, set(p for p, end in end_offsets(kafka.bootstrap, target, 5).items() if end == 0)
    while len(eof) < 5:
        for message in consumer.consume(500, 1):
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(message.partition())
                continue
            key = message.key().decode()
            assert key not in seen, f"{key} produced twice"
            seen[key] = message.value()
            assert message.partition() == kafka_murmur2_partition(message.key(), 5)
            assert dict(message.headers())["v"] == b"2"
    consumer.close()
    assert seen == {k: latest[k] for k in wanted if k in latest}
    # The produced offsets per partition (what the completion barrier waits for) are in the result.
    ends = end_offsets(kafka.bootstrap, target, 5)
    assert {int(p): v["last"] + 1 for p, v in result["partitions"].items()} == {p: e for p, e in ends.items() if e}
    record = HandoverTopic(kafka.bootstrap, handover_topic).read_replay(worker_env()["REPRISE_REPLAY_ID"]).result
    assert record is not None and record.body["missing"] == result["missing"]
