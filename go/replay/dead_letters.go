package replay

// Poison records: a record the filter cannot decode or the handler keeps failing on is
// written to the dead-letter topic with why and where it came from, or counted and skipped without one. Never a
// crash loop.

import (
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// dlqHeaders are the headers a dead letter carries besides the record's own.
var dlqHeaders = map[string]bool{"reprise.error": true, "reprise.replay": true, "reprise.source.topic": true,
	"reprise.source.partition": true, "reprise.source.offset": true}

func (w *Worker) poison(p poison) error {
	m := p.message
	where := fmt.Sprintf("%s[%d]@%d", *m.TopicPartition.Topic, m.TopicPartition.Partition, m.TopicPartition.Offset)
	reason := p.reason
	if len(reason) > 1000 {
		reason = reason[:1000]
	}
	if w.dlq == nil {
		w.metrics.PoisonSkipped.Add(1)
		w.log.Warn("poison record skipped", "record", where, "reason", reason)
		return nil
	}
	var headers []kafka.Header
	for _, h := range m.Headers {
		if !dlqHeaders[h.Key] {
			headers = append(headers, h)
		}
	}
	headers = append(headers,
		kafka.Header{Key: "reprise.error", Value: []byte(reason)},
		kafka.Header{Key: "reprise.replay", Value: []byte(w.s.ReplayID)},
		kafka.Header{Key: "reprise.source.topic", Value: []byte(*m.TopicPartition.Topic)},
		kafka.Header{Key: "reprise.source.partition", Value: []byte(fmt.Sprint(m.TopicPartition.Partition))},
		kafka.Header{Key: "reprise.source.offset", Value: []byte(fmt.Sprint(int64(m.TopicPartition.Offset)))})
	topic := w.s.DLQTopic
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key: m.Key, Value: m.Value, Headers: headers}
	if m.TimestampType != kafka.TimestampNotAvailable {
		msg.Timestamp = m.Timestamp
	}
	for {
		err := w.dlq.Produce(msg, nil)
		if err == nil {
			break
		}
		var kerr kafka.Error
		if errors.As(err, &kerr) && kerr.Code() == kafka.ErrQueueFull {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return fmt.Errorf("dead-lettering %s: %w", where, err)
	}
	w.metrics.DeadLettered.Add(1)
	w.log.Warn("poison record dead-lettered", "record", where, "reason", reason, "dlq_topic", topic)
	return nil
}
