// Package kafkatest gives the integration tests a real broker: its address (REPRISE_TEST_BOOTSTRAP, which
// the pytest wrapper sets to the project's broker fixture), fresh topics, records, and the handover topic's
// records written the way a replay writes them.
//
// Without the variable no broker test runs, and none is skipped silently: a package's TestMain runs Main, which
// fails the package with one line saying how to run them, or, with `go test -short`, skips them by name.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/handovertopic"
	"reprise.io/kafka/protocol"
)

// HowToRun is the one line a run without a broker prints.
const HowToRun = "broker tests not run: REPRISE_TEST_BOOTSTRAP is not set. Run them with a broker: " +
	"`pytest tests/integration/go` (starts Kafka) or REPRISE_TEST_BOOTSTRAP=host:port go test ./...; " +
	"only the others: go test -short ./..."

var (
	mainRan bool
	notRun  atomic.Int64
)

// Main runs a package's tests; call it from TestMain. Broker tests that could not run (no broker) fail the
// package with HowToRun, unless -short asked to leave them out.
func Main(m *testing.M) {
	flag.Parse()
	mainRan = true
	code := m.Run()
	if n := notRun.Load(); n > 0 && !testing.Short() {
		fmt.Fprintf(os.Stderr, "FAIL: %d %s\n", n, HowToRun)
		code = 1
	}
	os.Exit(code)
}

// Bootstrap returns the broker's address. Without one the test stops: skipped by -short, else counted for
// Main's one line (a package without Main fails the test).
func Bootstrap(t testing.TB) string {
	t.Helper()
	b := os.Getenv("REPRISE_TEST_BOOTSTRAP")
	if b != "" {
		return b
	}
	if !mainRan {
		t.Fatal(HowToRun)
	}
	if testing.Short() {
		t.Skip("needs the broker; -short leaves it out")
	}
	notRun.Add(1)
	t.SkipNow()
	return ""
}

var unsafe = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// Name is a name no other test uses: the test's name plus a random tail.
func Name(t testing.TB, what string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	base := strings.Trim(unsafe.ReplaceAllString(t.Name(), "-"), "-")
	if len(base) > 60 {
		base = base[len(base)-60:]
	}
	return fmt.Sprintf("%s-%s-%s", what, base, hex.EncodeToString(b))
}

// Base is the connection config of the test broker.
func Base(t testing.TB) kafka.ConfigMap {
	return kafka.ConfigMap{"bootstrap.servers": Bootstrap(t)}
}

// CreateTopic creates a topic with n partitions and waits until it is usable.
func CreateTopic(t testing.TB, name string, partitions int) {
	t.Helper()
	CreateTopicWithConfig(t, name, partitions, nil)
}

// CreateTopicWithConfig creates a topic with n partitions and topic settings, and waits until it is usable.
func CreateTopicWithConfig(t testing.TB, name string, partitions int, config map[string]string) {
	t.Helper()
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": Bootstrap(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1,
		Config: config}})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("create topic %s: %v", name, r.Error)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		md, err := admin.GetMetadata(&name, false, 5000)
		if err == nil {
			if tm, ok := md.Topics[name]; ok && tm.Error.Code() == kafka.ErrNoError && len(tm.Partitions) == partitions {
				ready := true
				for _, p := range tm.Partitions {
					ready = ready && p.Leader >= 0
				}
				if ready {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("topic %s not ready", name)
}

// Record is one record to produce.
type Record struct {
	Partition int32
	Key       string
	Value     string
}

// Produce writes records and waits until Kafka has them all.
func Produce(t testing.TB, topic string, records []Record) {
	t.Helper()
	// Room for the 10 MB poison records of the limit tests (their topics allow them).
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": Bootstrap(t), "enable.idempotence": true,
		"acks": "all", "linger.ms": 5, "message.max.bytes": 12000000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reports := make(chan kafka.Event, len(records))
	for _, r := range records {
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: r.Partition},
			Key: []byte(r.Key), Value: []byte(r.Value)}
		for {
			err := p.Produce(msg, reports)
			if err == nil {
				break
			}
			if kerr, ok := err.(kafka.Error); ok && kerr.Code() == kafka.ErrQueueFull {
				p.Flush(100)
				continue
			}
			t.Fatalf("produce: %v", err)
		}
	}
	for range records {
		select {
		case ev := <-reports:
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				t.Fatalf("produce: %v", m.TopicPartition.Error)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("records not acknowledged within 60s")
		}
	}
}

// Handover returns a client of a handover topic on the test broker, created if missing.
func Handover(t testing.TB, name string) *handovertopic.Topic {
	t.Helper()
	topic := handovertopic.New(Base(t), name)
	if err := topic.Ensure(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(topic.Close)
	return topic
}

// Publish writes handover records (as a replay or the operator would).
func Publish(t testing.TB, topic *handovertopic.Topic, records ...protocol.Record) {
	t.Helper()
	if err := topic.Publish(context.Background(), records...); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// Committed reads a group's committed offset and metadata of one partition.
func Committed(t testing.TB, group, topic string, partition int32) (int64, string) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": Bootstrap(t), "group.id": group,
		"enable.auto.commit": false})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	found, err := c.Committed([]kafka.TopicPartition{{Topic: &topic, Partition: partition}}, 15000)
	if err != nil || len(found) != 1 {
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	md := ""
	if found[0].Metadata != nil {
		md = *found[0].Metadata
	}
	return int64(found[0].Offset), md
}

// Eventually polls cond until it holds or the time is up (a bound, not a timing assertion).
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
