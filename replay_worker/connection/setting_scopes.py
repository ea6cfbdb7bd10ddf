"""Which client type each Kafka client setting of the user's Secret is handed to.

One Secret (`spec.kafka.configFrom`, mounted as one file per key) configures every client Reprise builds:
consumers, producers and admin clients, in the operator and in the worker. librdkafka warns from every client
that is handed a setting of another client type ("session.timeout.ms is a consumer property and will be
ignored by this producer instance"), so each client gets only what applies to it:

1. A key prefixed `consumer.`, `producer.` or `admin.` goes to that client type only, without the prefix
   (`consumer.session.timeout.ms`), and wins over the same key unprefixed. The prefixes are Kafka Connect's.
2. An unprefixed key goes to every client type it applies to: a consumer-only setting (librdkafka's `C`) to
   consumers, a producer-only one (`P`) to producers, every other one (`*`: connection, security) to all.
3. The program's own settings go on top of both (see `kafka_clients`): a Secret cannot switch them off.

This is the rule for every implementation that reads the Secret folder (docs/installing.md says it for
users and for ports to other languages). The two sets below are librdkafka's (2.16) `C` and `P` properties,
global and topic-level; a unit test checks them against the librdkafka that confluent-kafka bundles.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

ClientType = Literal["consumer", "producer", "admin"]

PREFIXES: dict[str, ClientType] = {"consumer.": "consumer", "producer.": "producer", "admin.": "admin"}

CONSUMER_ONLY = frozenset(
    {
        "auto.commit.enable",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "check.crcs",
        "consume.callback.max.messages",
        "coordinator.query.interval.ms",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "fetch.error.backoff.ms",
        "fetch.max.bytes",
        "fetch.message.max.bytes",
        "fetch.min.bytes",
        "fetch.queue.backoff.ms",
        "fetch.wait.max.ms",
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
        "heartbeat.interval.ms",
        "isolation.level",
        "max.partition.fetch.bytes",
        "max.poll.interval.ms",
        "max.poll.records",
        "offset.store.method",
        "offset.store.path",
        "offset.store.sync.interval.ms",
        "partition.assignment.strategy",
        "queued.max.messages.kbytes",
        "queued.min.messages",
        "session.timeout.ms",
        "share.acknowledgement.mode",
    }
)

PRODUCER_ONLY = frozenset(
    {
        "acks",
        "batch.num.messages",
        "batch.size",
        "compression.codec",
        "compression.level",
        "compression.type",
        "delivery.report.only.error",
        "delivery.timeout.ms",
        "enable.gapless.guarantee",
        "enable.idempotence",
        "linger.ms",
        "message.send.max.retries",
        "message.timeout.ms",
        "partitioner",
        "produce.offset.report",
        "queue.buffering.backpressure.threshold",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.messages",
        "queue.buffering.max.ms",
        "queuing.strategy",
        "request.required.acks",
        "request.timeout.ms",
        "retries",
        "sticky.partitioning.linger.ms",
        "transaction.timeout.ms",
        "transactional.id",
    }
)


def applies_to(key: str, client: ClientType) -> bool:
    """Whether an unprefixed setting is one `client` uses (rule 2)."""
    if key in CONSUMER_ONLY:
        return client == "consumer"
    if key in PRODUCER_ONLY:
        return client == "producer"
    return True


def settings_for(client: ClientType, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a client of type `client` is handed, by rules 1 and 2 (in the order given)."""
    found: dict[str, Any] = {}
    prefixed: dict[str, Any] = {}
    for key, value in settings.items():
        prefix = next((p for p in PREFIXES if key.startswith(p)), None)
        if prefix is None:
            if applies_to(key, client):
                found[key] = value
        elif PREFIXES[prefix] == client:
            prefixed[key[len(prefix) :]] = value
    found.update(prefixed)
    return found
