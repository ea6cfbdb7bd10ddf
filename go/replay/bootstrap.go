package replay

// The bootstrap (HANDOVER.md section 5.1): resolve the start once and record it, in one Kafka transaction,
// as the `replay` and `start` records and the replay group's committed offsets.
//
// Seeking to the start in the assignment callback (seed 003) re-seeks on every rebalance. Instead the start
// becomes the replay group's committed offsets before any replica reads, and every replica and restart
// resumes from committed offsets. Replicas start at once: each calls InitTransactions with the same
// transactional.id (reprise-bootstrap-<replay id>), which fences every earlier bootstrapper, then reads the
// handover topic; if the replay is bootstrapped it is done, otherwise it commits the records and the start
// offsets in one transaction. So exactly one resolution wins, and the published S(p) always equals the
// replay group's starting offset.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/handovertopic"
	"reprise.io/kafka/protocol"
)

// BootstrapTransactionalID is the transactional.id every bootstrapper of a replay shares.
func BootstrapTransactionalID(replayID string) string { return "reprise-bootstrap-" + replayID }

// ErrBootstrap: the start could not be resolved or recorded (Kafka kept failing).
var ErrBootstrap = errors.New("bootstrap failed")

// Bootstrap makes sure the replay is bootstrapped and returns its state. Safe from every replica at once
// and after any crash. A start that cannot be honoured (protocol.ErrSpec, *protocol.StartOlderThanRetention)
// is returned at once; Kafka failures are retried with jitter.
func Bootstrap(ctx context.Context, s Settings, base kafka.ConfigMap) (*protocol.ReplayHandover, error) {
	topic := handovertopic.New(base, s.HandoverTopic)
	defer topic.Close()
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		state, err := func() (*protocol.ReplayHandover, error) {
			// Look before taking the transactional id: a replica that finds the work done fences nobody.
			if err := topic.Ensure(ctx, true); err != nil {
				return nil, err
			}
			state, err := topic.ReadReplay(ctx, s.ReplayID)
			if err != nil {
				return nil, err
			}
			if state.Bootstrapped() {
				return state, nil
			}
			return bootstrapOnce(ctx, s, base, topic)
		}()
		if err == nil {
			return state, nil
		}
		var retention *protocol.StartOlderThanRetention
		if errors.Is(err, protocol.ErrSpec) || errors.As(err, &retention) || ctx.Err() != nil {
			return nil, err
		}
		last = err
		pause := min(5.0, 0.2*float64(int(1)<<attempt)) * (0.5 + rand.Float64())
		logger(ctx).Warn("bootstrap attempt failed, retrying", "attempt", attempt+1, "error", err, "retry_in_s", pause)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(pause * float64(time.Second))):
		}
	}
	return nil, fmt.Errorf("%w: could not bootstrap replay %s after 20 attempts: %v", ErrBootstrap, s.ReplayID, last)
}

func bootstrapOnce(ctx context.Context, s Settings, base kafka.ConfigMap, topic *handovertopic.Topic) (*protocol.ReplayHandover, error) {
	producer, err := kafka.NewProducer(handovertopic.ProducerConfig(base, kafka.ConfigMap{
		"transactional.id": BootstrapTransactionalID(s.ReplayID),
		// A bootstrapper that dies mid-transaction holds back read_committed readers of the handover topic
		// until the transaction times out (or the next bootstrapper fences it): keep that short.
		"transaction.timeout.ms": 15000,
		"linger.ms":              0,
	}))
	if err != nil {
		return nil, err
	}
	go func() {
		for range producer.Events() {
		}
	}()
	defer producer.Close()
	consumer, err := kafka.NewConsumer(handovertopic.ConsumerConfig(base, kafka.ConfigMap{"group.id": s.ReplayGroup,
		"enable.auto.commit": false, "isolation.level": "read_committed"}))
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := producer.InitTransactions(tctx); err != nil {
		return nil, fmt.Errorf("init_transactions: %w", err)
	}
	// Every earlier bootstrapper of this replay is fenced: what the topic says now is final.
	state, err := topic.ReadReplay(ctx, s.ReplayID)
	if err != nil {
		return nil, err
	}
	if state.Bootstrapped() {
		return state, nil
	}
	now := time.Now().UnixMilli()
	facts, err := partitionFacts(consumer, s, now)
	if err != nil {
		return nil, err
	}
	parts := make([]kafka.TopicPartition, 0, len(facts))
	for _, f := range facts {
		parts = append(parts, tpOf(f.Topic, f.Partition, kafka.OffsetInvalid))
	}
	found, err := consumer.Committed(parts, 30000)
	if err != nil {
		return nil, fmt.Errorf("reading committed offsets of %s: %w", s.ReplayGroup, err)
	}
	committed := map[protocol.TopicPartition]int64{}
	for _, t := range found {
		if t.Error != nil {
			return nil, fmt.Errorf("reading committed offsets of %s: %w", s.ReplayGroup, t.Error)
		}
		if t.Offset >= 0 {
			committed[keyOf(t)] = int64(t.Offset)
		}
	}
	replay, starts, err := decidePlan(s, facts, committed, now)
	if err != nil {
		return nil, err
	}
	if err := producer.BeginTransaction(); err != nil {
		return nil, err
	}
	abort := func(cause error) error {
		var kerr kafka.Error
		if errors.As(cause, &kerr) && kerr.TxnRequiresAbort() {
			actx, acancel := context.WithTimeout(ctx, 30*time.Second)
			defer acancel()
			_ = producer.AbortTransaction(actx)
		}
		return cause
	}
	records := append([]protocol.Record{replay}, starts...)
	delivery := make(chan kafka.Event, len(records))
	name := s.HandoverTopic
	for _, r := range records {
		k, v := protocol.Encode(r)
		if err := producer.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &name, Partition: 0},
			Key: k, Value: v}, delivery); err != nil {
			return nil, abort(err)
		}
	}
	var offsets []kafka.TopicPartition
	for _, r := range starts {
		st := r.(protocol.StartInfo)
		if _, ok := committed[protocol.TopicPartition{Topic: st.Topic, Partition: st.Partition}]; !ok {
			offsets = append(offsets, tpOf(st.Topic, st.Partition, kafka.Offset(st.Offset)))
		}
	}
	if len(offsets) > 0 {
		md, err := consumer.GetConsumerGroupMetadata()
		if err != nil {
			return nil, abort(err)
		}
		if err := producer.SendOffsetsToTransaction(tctx, offsets, md); err != nil {
			return nil, abort(err)
		}
	}
	if err := producer.CommitTransaction(tctx); err != nil {
		return nil, abort(err)
	}
	logger(ctx).Info("replay bootstrapped", "replay_id", s.ReplayID, "partitions", len(starts))
	out := protocol.NewHandoverView()
	for _, r := range records {
		k, v := protocol.Encode(r)
		_ = out.Apply(k, v)
	}
	return out.Replay(s.ReplayID), nil
}

// decidePlan is the pure part: the replay record and S(p) (+ end) of every partition.
func decidePlan(s Settings, facts []protocol.PartitionFacts, committed map[protocol.TopicPartition]int64,
	now int64) (protocol.ReplayInfo, []protocol.Record, error) {
	filter, err := s.Filter.ToObject(true)
	if err != nil {
		return protocol.ReplayInfo{}, nil, err
	}
	var live *string
	if s.LiveGroup != "" {
		live = protocol.String(s.LiveGroup)
	}
	replay := protocol.ReplayInfo{ReplayID: s.ReplayID, Mode: s.Mode, ReplayGroup: s.ReplayGroup, LiveGroup: live,
		Topics: s.Topics, Filter: filter, AtMs: now}
	var starts []protocol.Record
	for _, f := range facts {
		var c *int64
		if o, ok := committed[protocol.TopicPartition{Topic: f.Topic, Partition: f.Partition}]; ok {
			c = protocol.Int64(o)
		}
		d, err := protocol.DecidePartition(s.Start, s.End, f, s.AllowClamp, now, c)
		if err != nil {
			return replay, nil, err
		}
		starts = append(starts, protocol.StartInfo{ReplayID: s.ReplayID, Topic: d.Topic, Partition: d.Partition,
			Offset: d.Offset, EndOffset: d.EndOffset, EndTimestampMs: d.EndTimestampMs, Clamped: d.Clamped, AtMs: now})
	}
	return replay, starts, nil
}

func partitionFacts(consumer *kafka.Consumer, s Settings, now int64) ([]protocol.PartitionFacts, error) {
	md, err := consumer.GetMetadata(nil, true, 30000)
	if err != nil {
		return nil, fmt.Errorf("reading metadata: %w", err)
	}
	var parts []kafka.TopicPartition
	for _, t := range s.Topics {
		found, ok := md.Topics[t]
		if !ok || found.Error.Code() != kafka.ErrNoError || len(found.Partitions) == 0 {
			reason := "it does not exist"
			if ok && found.Error.Code() != kafka.ErrNoError {
				reason = found.Error.String()
			}
			return nil, fmt.Errorf("source topic %s: %s", t, reason)
		}
		ids := make([]int32, 0, len(found.Partitions))
		for _, p := range found.Partitions {
			ids = append(ids, p.ID)
		}
		sortInt32(ids)
		for _, id := range ids {
			parts = append(parts, tpOf(t, id, kafka.OffsetInvalid))
		}
	}
	startTs, hasStart := s.Start.LookupTimestamp(now)
	var endTs int64
	hasEnd := s.End != nil && s.End.Kind == "timestamp"
	if hasEnd {
		endTs = s.End.TimestampMs
	}
	lookup := func(ts int64) (map[protocol.TopicPartition]int64, error) {
		query := make([]kafka.TopicPartition, len(parts))
		for i, p := range parts {
			query[i] = p
			query[i].Offset = kafka.Offset(ts)
		}
		found, err := consumer.OffsetsForTimes(query, 30000)
		if err != nil {
			return nil, fmt.Errorf("offsets_for_times: %w", err)
		}
		out := map[protocol.TopicPartition]int64{}
		for _, t := range found {
			if t.Error != nil {
				return nil, fmt.Errorf("offsets_for_times on %s[%d]: %w", *t.Topic, t.Partition, t.Error)
			}
			out[keyOf(t)] = int64(t.Offset)
		}
		return out, nil
	}
	var starts, ends map[protocol.TopicPartition]int64
	if hasStart {
		if starts, err = lookup(startTs); err != nil {
			return nil, err
		}
	}
	if hasEnd {
		if ends, err = lookup(endTs); err != nil {
			return nil, err
		}
	}
	var facts []protocol.PartitionFacts
	for _, p := range parts {
		low, high, err := consumer.QueryWatermarkOffsets(*p.Topic, p.Partition, 30000)
		if err != nil {
			return nil, fmt.Errorf("watermarks of %s[%d]: %w", *p.Topic, p.Partition, err)
		}
		f := protocol.PartitionFacts{Topic: *p.Topic, Partition: p.Partition, LogStart: low, End: high}
		if v, ok := starts[keyOf(p)]; ok {
			f.TimeLookup = protocol.Int64(v)
		}
		if v, ok := ends[keyOf(p)]; ok {
			f.EndTimeLookup = protocol.Int64(v)
		}
		facts = append(facts, f)
	}
	return facts, nil
}

func sortInt32(a []int32) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func tpOf(topic string, partition int32, offset kafka.Offset) kafka.TopicPartition {
	return kafka.TopicPartition{Topic: &topic, Partition: partition, Offset: offset}
}

func keyOf(t kafka.TopicPartition) protocol.TopicPartition {
	return protocol.TopicPartition{Topic: *t.Topic, Partition: t.Partition}
}
