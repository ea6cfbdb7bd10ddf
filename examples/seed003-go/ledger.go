package main

// The service's "database": a ledger of the records it processed, one line per record
// (`<group> <topic> <partition> <offset>`), appended as each record is applied. The seed-bug test and the
// ledger checks read it back to count records processed twice or not at all.

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

type ledger struct {
	mu    sync.Mutex
	file  *os.File
	group string
	delay time.Duration
}

func openLedger(path, group string, delay time.Duration) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("LEDGER_FILE %s: %w", path, err)
	}
	return &ledger{file: f, group: group, delay: delay}, nil
}

// apply is the service's record handler: the same function serves the live loop and the replay role.
func (l *ledger) apply(msg *kafka.Message) error {
	if l.delay > 0 {
		time.Sleep(l.delay) // the work a real service does per record
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := fmt.Fprintf(l.file, "%s %s %d %d\n", l.group, *msg.TopicPartition.Topic, msg.TopicPartition.Partition,
		msg.TopicPartition.Offset)
	return err
}

func (l *ledger) close() error { return l.file.Close() }
