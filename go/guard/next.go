//go:build !instructions

package guard

import "github.com/confluentinc/confluent-kafka-go/v2/kafka"

// next is the wrapped consumer's Poll. A build with the `instructions` tag takes the events from memory instead
// (counted.go), so the guard's own per-record work can be counted apart from librdkafka's.
func (c *Consumer) next(timeoutMs int) kafka.Event { return c.Consumer.Poll(timeoutMs) }
