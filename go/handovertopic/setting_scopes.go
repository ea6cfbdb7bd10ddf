package handovertopic

import (
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Which client type each Kafka setting of the user's Secret is handed to: the rule of
// replay_worker/connection/setting_scopes.py
// (the reference; docs/installing.md states it for every port), so one Secret means the same to the Python worker,
// the operator, the Java role and this one. librdkafka warns from every client handed a setting of another type
// ("CONFWARN ... session.timeout.ms is a consumer property and will be ignored by this producer instance"):
//
//  1. A key prefixed "consumer.", "producer." or "admin." goes to that client type only, without the prefix, and
//     wins over the same key unprefixed (Kafka Connect's prefixes).
//  2. An unprefixed key goes to every client type it applies to: a consumer-only setting (librdkafka's C) to
//     consumers, a producer-only one (P) to producers, every other one (connection, security) to all.
//  3. The program's own settings go on top of both (ProducerConfig, ConsumerConfig, ReaderConfig, AdminConfig).

// ClientType is the kind of librdkafka client a setting is scoped to.
type ClientType string

const (
	Consumer ClientType = "consumer"
	Producer ClientType = "producer"
	Admin    ClientType = "admin"
)

var scopePrefixes = map[string]ClientType{"consumer.": Consumer, "producer.": Producer, "admin.": Admin}

// ConsumerOnly are librdkafka's (2.16) consumer-only properties, global and topic-level (its C); the same set as
// CONSUMER_ONLY of replay_worker/connection/setting_scopes.py, which a unit test there checks against librdkafka.
var ConsumerOnly = map[string]bool{
	"auto.commit.enable": true, "auto.commit.interval.ms": true, "auto.offset.reset": true, "check.crcs": true,
	"consume.callback.max.messages": true, "coordinator.query.interval.ms": true, "enable.auto.commit": true,
	"enable.auto.offset.store": true, "enable.partition.eof": true, "fetch.error.backoff.ms": true,
	"fetch.max.bytes": true, "fetch.message.max.bytes": true, "fetch.min.bytes": true,
	"fetch.queue.backoff.ms": true, "fetch.wait.max.ms": true, "group.id": true, "group.instance.id": true,
	"group.protocol": true, "group.protocol.type": true, "group.remote.assignor": true,
	"heartbeat.interval.ms": true, "isolation.level": true, "max.partition.fetch.bytes": true,
	"max.poll.interval.ms": true, "max.poll.records": true, "offset.store.method": true,
	"offset.store.path": true, "offset.store.sync.interval.ms": true, "partition.assignment.strategy": true,
	"queued.max.messages.kbytes": true, "queued.min.messages": true, "session.timeout.ms": true,
	"share.acknowledgement.mode": true,
}

// ProducerOnly are librdkafka's (2.16) producer-only properties (its P); PRODUCER_ONLY of setting_scopes.py.
var ProducerOnly = map[string]bool{
	"acks": true, "batch.num.messages": true, "batch.size": true, "compression.codec": true,
	"compression.level": true, "compression.type": true, "delivery.report.only.error": true,
	"delivery.timeout.ms": true, "enable.gapless.guarantee": true, "enable.idempotence": true, "linger.ms": true,
	"message.send.max.retries": true, "message.timeout.ms": true, "partitioner": true,
	"produce.offset.report": true, "queue.buffering.backpressure.threshold": true,
	"queue.buffering.max.kbytes": true, "queue.buffering.max.messages": true, "queue.buffering.max.ms": true,
	"queuing.strategy": true, "request.required.acks": true, "request.timeout.ms": true, "retries": true,
	"sticky.partitioning.linger.ms": true, "transaction.timeout.ms": true, "transactional.id": true,
}

// AppliesTo says whether an unprefixed setting is one a client of type client uses (rule 2).
func AppliesTo(key string, client ClientType) bool {
	if ConsumerOnly[key] {
		return client == Consumer
	}
	if ProducerOnly[key] {
		return client == Producer
	}
	return true
}

// Scoped returns the settings a client of type client is handed, by rules 1 and 2.
func Scoped(client ClientType, settings kafka.ConfigMap) kafka.ConfigMap {
	found := kafka.ConfigMap{}
	prefixed := kafka.ConfigMap{}
	for key, value := range settings {
		scope, bare := "", key
		for prefix := range scopePrefixes {
			if strings.HasPrefix(key, prefix) {
				scope, bare = prefix, strings.TrimPrefix(key, prefix)
				break
			}
		}
		switch {
		case scope == "":
			if AppliesTo(key, client) {
				found[key] = value
			}
		case scopePrefixes[scope] == client:
			prefixed[bare] = value
		}
	}
	for key, value := range prefixed {
		found[key] = value
	}
	return found
}
