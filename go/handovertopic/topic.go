// Package handovertopic is the handover topic in Kafka (HANDOVER.md section 2): create it, read it to its
// readable end, publish records durably, and tail it in a goroutine (Follower). The records themselves
// are the protocol package's.
//
// The topic has one partition and is read with isolation.level=read_committed: the bootstrap writes the
// `replay` and `start` records in one transaction with the replay group's start offsets, and a reader sees
// both or neither.
package handovertopic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/protocol"
)

// DefaultTopic is the handover topic's name unless configured.
const DefaultTopic = "reprise.handover"

// connectionPrefixes are the settings of a service's client config that say where Kafka is and how to
// authenticate; the guard's and the replay role's own clients reuse them.
var connectionPrefixes = []string{"bootstrap.servers", "security.protocol", "sasl.", "ssl.", "oauthbearer",
	"client.dns.lookup", "broker.address.family", "socket.", "reconnect.", "api.version",
	"broker.version.fallback", "client.rack", "metadata.broker.list"}

// Connection returns the connection settings of a client config, with client.id set.
func Connection(config kafka.ConfigMap, clientID string) kafka.ConfigMap {
	out := kafka.ConfigMap{}
	for k, v := range config {
		for _, prefix := range connectionPrefixes {
			if strings.HasPrefix(k, prefix) {
				out[k] = v
				break
			}
		}
	}
	out["client.id"] = clientID
	return out
}

// With returns a copy of base with overrides on top.
func With(base kafka.ConfigMap, overrides kafka.ConfigMap) *kafka.ConfigMap {
	out := kafka.ConfigMap{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range overrides {
		out[k] = v
	}
	return &out
}

// ProducerConfig is an idempotent producer: retries never duplicate or reorder records. Its Go channels are
// small: confluent-kafka-go sizes the events and produce channels for a million entries by default, 23 MB of
// pointers that every garbage collection of the service marks again (16% of a guarded loop's CPU), for a
// producer that writes a few records a second.
// Of base, only what applies to a producer (setting_scopes.go).
func ProducerConfig(base kafka.ConfigMap, overrides kafka.ConfigMap) *kafka.ConfigMap {
	c := With(Scoped(Producer, base), kafka.ConfigMap{"enable.idempotence": true, "acks": "all", "go.logs.channel.enable": false,
		"go.events.channel.size": 1000, "go.produce.channel.size": 1000})
	for k, v := range overrides {
		(*c)[k] = v
	}
	return c
}

// ConsumerConfig is a consumer: of base, only what applies to a consumer (setting_scopes.go), overrides on top.
func ConsumerConfig(base kafka.ConfigMap, overrides kafka.ConfigMap) *kafka.ConfigMap {
	return With(Scoped(Consumer, base), overrides)
}

// AdminConfig is an admin client: of base, only what applies to one (setting_scopes.go), overrides on top.
func AdminConfig(base kafka.ConfigMap, overrides kafka.ConfigMap) *kafka.ConfigMap {
	return With(Scoped(Admin, base), overrides)
}

// RequiredSettings are what a handover topic is created with (HANDOVER.md section 2): compacted, never deleted by
// age, capped in size (retention.bytes), each record at most the protocol's 1 MiB plus its batch header.
var RequiredSettings = map[string]string{
	"cleanup.policy":        "compact,delete",
	"min.compaction.lag.ms": "60000",
	"max.message.bytes":     "1048588",
	"retention.ms":          "-1",
	"retention.bytes":       "1073741824",
}

// ReaderConfig is a consumer used with Assign only (no group): the tail of the handover topic.
func ReaderConfig(base kafka.ConfigMap) *kafka.ConfigMap {
	return ConsumerConfig(base, kafka.ConfigMap{
		"group.id":                 "reprise-reader-unused", // required by librdkafka, never joined
		"enable.auto.commit":       false,
		"enable.auto.offset.store": false,
		"enable.partition.eof":     true,
		"isolation.level":          "read_committed",
		"auto.offset.reset":        "earliest",
		// The end of the topic is often a transaction marker, reached only by an empty fetch: the broker
		// would hold that fetch fetch.wait.max.ms (500 ms by default), and a guard holds new partitions
		// until it has read to the end.
		"fetch.wait.max.ms": 100,
	})
}

// Topic gives blocking reads and durable writes of the handover topic.
type Topic struct {
	Name     string
	base     kafka.ConfigMap
	admin    *kafka.AdminClient
	producer *kafka.Producer
	Timeout  time.Duration
}

// New returns a client of the handover topic; base holds the connection settings.
func New(base kafka.ConfigMap, name string) *Topic {
	if name == "" {
		name = DefaultTopic
	}
	return &Topic{Name: name, base: base, Timeout: 30 * time.Second}
}

func (t *Topic) adminClient() (*kafka.AdminClient, error) {
	if t.admin == nil {
		// Metadata requests of an admin client would create a missing topic with the broker's defaults
		// (not compacted, any partition count): the handover topic is created only by Ensure.
		admin, err := kafka.NewAdminClient(AdminConfig(t.base, kafka.ConfigMap{"allow.auto.create.topics": false}))
		if err != nil {
			return nil, fmt.Errorf("handover topic admin client: %w", err)
		}
		t.admin = admin
	}
	return t.admin, nil
}

// Producer returns the topic's idempotent producer, made on first use.
func (t *Topic) Producer() (*kafka.Producer, error) {
	if t.producer == nil {
		p, err := kafka.NewProducer(ProducerConfig(t.base, kafka.ConfigMap{"linger.ms": 0}))
		if err != nil {
			return nil, fmt.Errorf("handover topic producer: %w", err)
		}
		t.producer = p
		go drainEvents(p)
	}
	return t.producer, nil
}

// drainEvents empties a producer's event channel of the reports nobody waits for (per-message delivery
// channels carry the ones that matter).
func drainEvents(p *kafka.Producer) {
	for range p.Events() {
	}
}

// Close flushes and closes the topic's clients.
func (t *Topic) Close() {
	if t.producer != nil {
		t.producer.Flush(int(t.Timeout / time.Millisecond))
		t.producer.Close()
		t.producer = nil
	}
	if t.admin != nil {
		t.admin.Close()
		t.admin = nil
	}
}

// ErrMissing: the handover topic does not exist (and was not to be created).
var ErrMissing = errors.New("handover topic does not exist")

// Ensure checks the topic exists with one partition; creates it (compacted) when missing and allowed.
func (t *Topic) Ensure(ctx context.Context, create bool) error {
	admin, err := t.adminClient()
	if err != nil {
		return err
	}
	partitions, exists, err := t.partitions(admin)
	if err != nil {
		return err
	}
	if exists {
		if partitions != 1 {
			return fmt.Errorf("handover topic %s has %d partitions; the protocol needs exactly 1 (one total order "+
				"of every replay's records): recreate it with 1 partition", t.Name, partitions)
		}
		return nil
	}
	if !create {
		return fmt.Errorf("%w: create %s (1 partition, cleanup.policy=compact) or let the operator create it", ErrMissing, t.Name)
	}
	results, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{
		Topic: t.Name, NumPartitions: 1, ReplicationFactor: -1,
		Config: RequiredSettings,
	}})
	if err != nil {
		return fmt.Errorf("creating handover topic %s: %w", t.Name, err)
	}
	for _, r := range results {
		if r.Error.Code() != kafka.ErrNoError && r.Error.Code() != kafka.ErrTopicAlreadyExists {
			return fmt.Errorf("creating handover topic %s: %w", t.Name, r.Error)
		}
	}
	deadline := time.Now().Add(t.Timeout)
	for time.Now().Before(deadline) {
		if n, ok, err := t.partitions(admin); err == nil && ok && n == 1 {
			if _, err := t.ReadableEnd(ctx); err == nil {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("handover topic %s has no leader after %s", t.Name, t.Timeout)
}

func (t *Topic) partitions(admin *kafka.AdminClient) (int, bool, error) {
	md, err := admin.GetMetadata(nil, true, int(t.Timeout/time.Millisecond))
	if err != nil {
		return 0, false, fmt.Errorf("reading metadata of handover topic %s: %w", t.Name, err)
	}
	found, ok := md.Topics[t.Name]
	if !ok || found.Error.Code() == kafka.ErrUnknownTopicOrPart || found.Error.Code() == kafka.ErrUnknownTopic {
		return 0, false, nil
	}
	if found.Error.Code() != kafka.ErrNoError {
		return 0, false, fmt.Errorf("handover topic %s: %w", t.Name, found.Error)
	}
	return len(found.Partitions), true, nil
}

// ReadableEnd is the offset a read_committed reader reaches at the end now (the last stable offset);
// ErrMissing when the topic does not exist (then no replay exists either).
func (t *Topic) ReadableEnd(ctx context.Context) (int64, error) {
	admin, err := t.adminClient()
	if err != nil {
		return 0, err
	}
	if _, exists, err := t.partitions(admin); err != nil {
		return 0, err
	} else if !exists {
		return 0, ErrMissing
	}
	return readableEnd(ctx, admin, t.Name, t.Timeout)
}

func readableEnd(ctx context.Context, admin *kafka.AdminClient, topic string, timeout time.Duration) (int64, error) {
	tp := kafka.TopicPartition{Topic: &topic, Partition: 0}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	result, err := admin.ListOffsets(ctx, map[kafka.TopicPartition]kafka.OffsetSpec{tp: kafka.LatestOffsetSpec},
		kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadCommitted))
	if err != nil {
		return 0, fmt.Errorf("reading the end of handover topic %s: %w", topic, err)
	}
	for _, info := range result.ResultInfos {
		if info.Error.Code() != kafka.ErrNoError {
			return 0, fmt.Errorf("reading the end of handover topic %s: %w", topic, info.Error)
		}
		return int64(info.Offset), nil
	}
	return 0, fmt.Errorf("reading the end of handover topic %s: no answer", topic)
}

// Read returns every replay's state, read from the beginning to the readable end.
func (t *Topic) Read(ctx context.Context) (*protocol.HandoverView, error) {
	view := protocol.NewHandoverView()
	end, err := t.ReadableEnd(ctx)
	if errors.Is(err, ErrMissing) || (err == nil && end == 0) {
		return view, nil
	}
	if err != nil {
		return nil, err
	}
	consumer, err := kafka.NewConsumer(ReaderConfig(t.base))
	if err != nil {
		return nil, fmt.Errorf("handover topic reader: %w", err)
	}
	defer consumer.Close()
	name := t.Name
	if err := AssignFromStart(consumer, name, t.Timeout); err != nil {
		return nil, fmt.Errorf("reading handover topic %s: %w", t.Name, err)
	}
	deadline := time.Now().Add(t.Timeout)
	position := int64(0)
	for position < end {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("reading handover topic %s to offset %d took over %s (reached %d)", t.Name, end, t.Timeout, position)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch e := consumer.Poll(50).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				continue
			}
			// Not past the end: it is a transaction boundary, and a record after it may be the first of a
			// transaction whose other records this read does not see.
			if int64(e.TopicPartition.Offset) < end {
				_ = view.Apply(e.Key, e.Value)
			}
			position = max(position, int64(e.TopicPartition.Offset)+1)
		case kafka.PartitionEOF:
			position = max(position, int64(e.Offset))
		case kafka.Error:
			if e.IsFatal() {
				return nil, fmt.Errorf("reading handover topic %s: %w", t.Name, e)
			}
		}
	}
	return view, nil
}

// ReadReplay returns one replay's state.
func (t *Topic) ReadReplay(ctx context.Context, id string) (*protocol.ReplayHandover, error) {
	view, err := t.Read(ctx)
	if err != nil {
		return nil, err
	}
	return view.Replay(id), nil
}

// Publish writes records and returns once Kafka has them durably (acks=all).
func (t *Topic) Publish(ctx context.Context, records ...protocol.Record) error {
	messages := make([][2][]byte, 0, len(records))
	for _, r := range records {
		k, v := protocol.Encode(r)
		messages = append(messages, [2][]byte{k, v})
	}
	return t.publishRaw(ctx, messages)
}

// Tombstone deletes every record of a replay id (the `replay` record first); returns how many keys.
func (t *Topic) Tombstone(ctx context.Context, id string) (int, error) {
	state, err := t.ReadReplay(ctx, id)
	if err != nil {
		return 0, err
	}
	var first, rest [][2][]byte
	for key := range state.LiveKeys {
		k, _ := protocol.DecodeKey([]byte(key))
		if k.Kind == protocol.KindReplay {
			first = append(first, [2][]byte{[]byte(key), nil})
		} else {
			rest = append(rest, [2][]byte{[]byte(key), nil})
		}
	}
	all := append(first, rest...)
	return len(all), t.publishRaw(ctx, all)
}

func (t *Topic) publishRaw(ctx context.Context, messages [][2][]byte) error {
	producer, err := t.Producer()
	if err != nil {
		return err
	}
	reports := make(chan kafka.Event, len(messages))
	name := t.Name
	for _, m := range messages {
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &name, Partition: 0}, Key: m[0], Value: m[1]}
		for {
			err := producer.Produce(msg, reports)
			if err == nil {
				break
			}
			var kerr kafka.Error
			if errors.As(err, &kerr) && kerr.Code() == kafka.ErrQueueFull {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("writing to handover topic %s: %w", t.Name, err)
		}
	}
	timer := time.NewTimer(t.Timeout)
	defer timer.Stop()
	for range messages {
		select {
		case ev := <-reports:
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				return fmt.Errorf("writing to handover topic %s: %w", t.Name, m.TopicPartition.Error)
			}
		case <-timer.C:
			return fmt.Errorf("handover record(s) not acknowledged by Kafka within %s", t.Timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// AssignFromStart assigns a reader the handover topic's partition from its first record. The topic's metadata
// is asked for first: a partition assigned before its leader is known has its start offset looked up on
// librdkafka's retry timer, half a second later (a guard holds new partitions until its reader is current).
func AssignFromStart(consumer *kafka.Consumer, name string, timeout time.Duration) error {
	if _, err := consumer.GetMetadata(&name, false, int(timeout.Milliseconds())); err != nil {
		return fmt.Errorf("metadata of handover topic %s: %w", name, err)
	}
	return consumer.Assign([]kafka.TopicPartition{{Topic: &name, Partition: 0, Offset: kafka.OffsetBeginning}})
}
