//go:build instructions

package guard

import (
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/protocol"
)

// Built only with the `instructions` tag, for cmd/reprise-instructions: the guard's Poll takes its events from
// Source instead of librdkafka, so callgrind can count the guard's own work per record on a fixed batch.

// Source gives the events the guard's Poll would get from the wrapped consumer.
var Source func(timeoutMs int) kafka.Event

func (c *Consumer) next(timeoutMs int) kafka.Event { return Source(timeoutMs) }

// AssignReleased puts the guard where a live service is with no replay active: the partitions assigned (nothing
// committed) and released (the handover view current and empty), as the rebalance callback and refresh leave them.
func (c *Consumer) AssignReleased(topic string, partitions int32) {
	for p := range partitions {
		k := protocol.TopicPartition{Topic: topic, Partition: p}
		c.book.Assign(k, nil, nil, 1)
		c.book.Release(k, nil)
	}
	c.guarded, c.holding = c.book.Guarded(), false
	c.seenVer = c.follower.Version()
}
