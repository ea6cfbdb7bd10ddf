package handovertopic

import (
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// A Secret as a user writes it (the same as tests/integration/replay_worker/test_kafka_settings_scope.py's):
// connection settings, settings of one client type, and prefixed ones.
func secret() kafka.ConfigMap {
	return kafka.ConfigMap{
		"bootstrap.servers":             "127.0.0.1:9",
		"security.protocol":             "plaintext",
		"session.timeout.ms":            "30000",
		"linger.ms":                     "20",
		"consumer.max.poll.interval.ms": "600000",
		"producer.compression.type":     "lz4",
		"admin.socket.timeout.ms":       "45000",
	}
}

// The builders of every client the Go replay role makes hand each client only the settings of its type (issue
// 32 item 7: each Go replay pod logged librdkafka's CONFWARN for every consumer setting of the Secret).
func TestEachClientGetsOnlyItsSettings(t *testing.T) {
	producer := *ProducerConfig(secret(), kafka.ConfigMap{"linger.ms": 5})
	for _, key := range []string{"session.timeout.ms", "max.poll.interval.ms", "consumer.max.poll.interval.ms",
		"producer.compression.type", "admin.socket.timeout.ms", "socket.timeout.ms"} {
		if _, ok := producer[key]; ok {
			t.Errorf("the producer is handed %s", key)
		}
	}
	if producer["compression.type"] != "lz4" || producer["linger.ms"] != 5 || producer["security.protocol"] != "plaintext" {
		t.Errorf("the producer lacks its own settings (the program's linger.ms on top): %v", producer)
	}
	reader := *ReaderConfig(secret())
	for _, key := range []string{"linger.ms", "compression.type", "producer.compression.type", "socket.timeout.ms"} {
		if _, ok := reader[key]; ok {
			t.Errorf("the handover topic's reader is handed %s", key)
		}
	}
	if reader["session.timeout.ms"] != "30000" || reader["max.poll.interval.ms"] != "600000" {
		t.Errorf("the reader lacks the consumer settings: %v", reader)
	}
}

func TestAdminAndConsumerBuildersAndTheRule(t *testing.T) {
	admin := *AdminConfig(secret(), kafka.ConfigMap{"allow.auto.create.topics": false})
	if admin["socket.timeout.ms"] != "45000" || admin["security.protocol"] != "plaintext" {
		t.Errorf("the admin client lacks its settings: %v", admin)
	}
	for _, key := range []string{"session.timeout.ms", "linger.ms", "max.poll.interval.ms", "compression.type"} {
		if _, ok := admin[key]; ok {
			t.Errorf("the admin client is handed %s", key)
		}
	}
	consumer := *ConsumerConfig(secret(), kafka.ConfigMap{"session.timeout.ms": 10000})
	if consumer["session.timeout.ms"] != 10000 {
		t.Errorf("the program's own setting does not go on top: %v", consumer["session.timeout.ms"])
	}
	for _, tc := range []struct {
		settings kafka.ConfigMap
		client   ClientType
		want     kafka.ConfigMap
	}{
		// A prefixed key wins over the same key unprefixed, for its client type only.
		{kafka.ConfigMap{"session.timeout.ms": "1", "consumer.session.timeout.ms": "2"}, Consumer,
			kafka.ConfigMap{"session.timeout.ms": "2"}},
		{kafka.ConfigMap{"session.timeout.ms": "1", "consumer.session.timeout.ms": "2"}, Producer, kafka.ConfigMap{}},
		{kafka.ConfigMap{"sasl.mechanism": "PLAIN", "acks": "1"}, Admin, kafka.ConfigMap{"sasl.mechanism": "PLAIN"}},
		{kafka.ConfigMap{"sasl.mechanism": "PLAIN", "acks": "1"}, Producer,
			kafka.ConfigMap{"sasl.mechanism": "PLAIN", "acks": "1"}},
	} {
		got := Scoped(tc.client, tc.settings)
		if len(got) != len(tc.want) {
			t.Errorf("Scoped(%s, %v) = %v, want %v", tc.client, tc.settings, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("Scoped(%s, %v) = %v, want %v", tc.client, tc.settings, got, tc.want)
			}
		}
	}
}
