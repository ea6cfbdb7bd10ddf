package replay

import (
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The service's security settings reach the role; its group, offsets and assignment do not (issue 32, item 8).
func TestWithServiceConfigKeepsWhatReachesKafkaAndLeavesOutTheServicesMembership(t *testing.T) {
	service := &kafka.ConfigMap{
		"bootstrap.servers":               "broker:9093",
		"security.protocol":               "SASL_SSL",
		"sasl.mechanisms":                 "SCRAM-SHA-512",
		"session.timeout.ms":              12000,
		"group.id":                        "orders",
		"group.instance.id":               "orders-0",
		"client.id":                       "orders",
		"enable.auto.commit":              false,
		"enable.auto.offset.store":        false,
		"auto.offset.reset":               "earliest",
		"partition.assignment.strategy":   "roundrobin",
		"go.application.rebalance.enable": true,
	}
	var o options
	WithServiceConfig(service)(&o)
	want := kafka.ConfigMap{
		"bootstrap.servers":  "broker:9093",
		"security.protocol":  "SASL_SSL",
		"sasl.mechanisms":    "SCRAM-SHA-512",
		"session.timeout.ms": 12000,
	}
	if len(o.service) != len(want) {
		t.Fatalf("kept %v, want %v", o.service, want)
	}
	for k, v := range want {
		if o.service[k] != v {
			t.Fatalf("%s: kept %v, want %v", k, o.service[k], v)
		}
	}
	if (*service)["group.id"] != "orders" || len(*service) != 12 {
		t.Fatalf("the service's map was changed: %v", *service)
	}
	var none options
	WithServiceConfig(nil)(&none)
	if none.service != nil {
		t.Fatalf("nil config gave %v", none.service)
	}
}

func TestKafkaSettingsLayerTheServiceThenTheSecretThenTheBootstrap(t *testing.T) {
	service := kafka.ConfigMap{"security.protocol": "SSL", "socket.timeout.ms": 9000, "group.id": "orders",
		"bootstrap.servers": "service:9092"}
	files := map[string]string{"security.protocol": "SASL_SSL", "sasl.username": "replay"}
	got := KafkaSettings(service, files, "reprise:9092")
	want := kafka.ConfigMap{"security.protocol": "SASL_SSL", "socket.timeout.ms": 9000, "sasl.username": "replay",
		"bootstrap.servers": "reprise:9092"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: got %v, want %v", k, got[k], v)
		}
	}
}
