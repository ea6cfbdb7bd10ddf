package replay

// The replay loop (port of replay_worker/replay/consumer.py): read a batch, filter, hand it to the service's
// handler, commit, decide which partitions are finished.
//
//   - The start was committed as the replay group's offsets by the bootstrap, so an assignment never
//     seeks: every replica and every restart resumes from committed offsets, and a rebalance cannot
//     replay anything twice (seed 003's trap).
//   - Automatic commit and offset store are off: a batch's offsets are committed after the handler
//     returned. A batch's commit runs in the background while the next batch is read (one in flight at a
//     time), so the duplicate window after a crash is at most the batch in hand and the one before it.
//   - A revoke commits the revoked partitions' positions; a lost assignment commits nothing.
//   - A partition is finished when protocol.ReplayFinish says so: its final offset is committed with a
//     `finished` mark before H is published, so a replica that gets the partition later knows from the
//     offset alone, and publishes H again (idempotent).
//   - SIGTERM (context cancelled): the batch in hand is finished and committed, then the consumer leaves.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/handovertopic"
	"reprise.io/kafka/protocol"
)

// Handler processes one batch of matching records. An error makes the replay retry the batch record by
// record (REPRISE_HANDLER_RETRIES times each); a record that keeps failing is poison: dead-lettered or
// counted and skipped, never a crash loop.
type Handler interface {
	HandleRecords(ctx context.Context, records []*kafka.Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, records []*kafka.Message) error

// HandleRecords calls f.
func (f HandlerFunc) HandleRecords(ctx context.Context, records []*kafka.Message) error {
	return f(ctx, records)
}

const (
	progressInterval = 2 * time.Second
	idleWait         = 200 * time.Millisecond
	finishingWait    = 50 * time.Millisecond
	closeWait        = 15 * time.Second
)

// ConsumerSettings are the replay consumer's settings besides the connection and group.id: offsets only
// committed by the loop, eager round-robin rebalances (ReplayAssignment), end-of-partition events, committed
// records only, and a short fetch wait (a Drain partition's end is often reached by an empty fetch). Exported
// so a benchmark's hand-written loop can read with exactly these.
var ConsumerSettings = kafka.ConfigMap{
	"enable.auto.commit": false, "enable.auto.offset.store": false,
	"partition.assignment.strategy": ReplayAssignment, "enable.partition.eof": true,
	"isolation.level": "read_committed", "auto.offset.reset": "latest",
	"fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 10, "queued.max.messages.kbytes": 32768,
}

// GroupTuning is the replay group's session and heartbeat, as the Python worker's; settings of the same name in
// the Kafka config folder win. A member hears of a rebalance (a replica joining or leaving) only at its next
// heartbeat: at librdkafka's default of 3 s, three replicas starting together settled about 3 s after the first
// read, at 100 ms in about half a second. The 10 s session bounds how long a member whose LeaveGroup was lost
// (replicas stopping together) holds the group, and so the operator's teardown.
var GroupTuning = kafka.ConfigMap{"session.timeout.ms": 10000, "heartbeat.interval.ms": 100}

// ReplayAssignment is the replay group's assignment strategy: eager round robin, as the Python worker's, not
// cooperative-sticky. A replay's replicas start together; with cooperative rebalancing every later join costs
// the group two rounds (revoke, then assign), and librdkafka lets a cooperative member that hears of a round
// from a heartbeat join again only a second after its previous join, so a few replicas settled a second per
// round. An eager member revokes everything and joins again at once. The pause of every replica at each join
// or leave is affordable for a replay (its replicas come and go together), and nothing is lost or repeated:
// commit on revoke, and the next owner (this replica too) resumes from the committed offset. Round robin, not
// range: range balances each topic on its own. The guard keeps the user's own strategy: it serves the live group.
const ReplayAssignment = "roundrobin"

type partitionProgress struct {
	topic          string
	partition      int32
	position       *int64
	committed      *int64
	endOffset      *int64
	endTimestampMs *int64
	finished       string
	atEnd          bool
	endEventOffset *int64
	endMet         *int64
}

func (p *partitionProgress) key() protocol.TopicPartition {
	return protocol.TopicPartition{Topic: p.topic, Partition: p.partition}
}

type replayFacts struct {
	handovers map[protocol.TopicPartition]int64
	guards    map[protocol.TopicPartition]int64
}

// Worker is one replica of the replay group.
type Worker struct {
	s        Settings
	base     kafka.ConfigMap
	handler  Handler
	filter   *protocol.RecordFilter
	metrics  *Metrics
	log      *slog.Logger
	plan     map[protocol.TopicPartition]protocol.StartInfo
	throttle *protocol.Throttle

	consumer *kafka.Consumer
	topic    *handovertopic.Topic
	follower *handovertopic.Follower[replayFacts]
	dlq      *kafka.Producer
	parts    map[protocol.TopicPartition]*partitionProgress
	stopping bool
	// revoked: partitions revoked during the current readBatch (see dropRevoked).
	revoked map[protocol.TopicPartition]bool

	live         atomic.Pointer[map[protocol.TopicPartition]int64]
	liveAsk      atomic.Pointer[[]protocol.TopicPartition]
	liveReader   *kafka.Consumer
	lastProgress time.Time
	reported     map[protocol.TopicPartition][2]int64
	progressOut  chan []protocol.Record

	commitWG     sync.WaitGroup
	commitFailed atomic.Bool

	// Done is true once every planned partition finished (with ExitWhenDone the worker returns then).
	Done bool
}

// NewWorker prepares a replica; state is the bootstrapped replay.
func NewWorker(s Settings, base kafka.ConfigMap, handler Handler, metrics *Metrics, state *protocol.ReplayHandover,
	log *slog.Logger) (*Worker, error) {
	filter, err := protocol.CompileFilter(s.Filter)
	if err != nil {
		return nil, err
	}
	plan := map[protocol.TopicPartition]protocol.StartInfo{}
	for k, p := range state.Partitions {
		if p.Start != nil {
			plan[k] = *p.Start
		}
	}
	w := &Worker{s: s, base: base, handler: handler, filter: filter, metrics: metrics, log: log, plan: plan,
		throttle: protocol.NewThrottle(s.MaxRecordsPerSecond, s.MaxBytesPerSecond),
		parts:    map[protocol.TopicPartition]*partitionProgress{}, revoked: map[protocol.TopicPartition]bool{},
		reported:    map[protocol.TopicPartition][2]int64{},
		progressOut: make(chan []protocol.Record, 4)}
	empty := map[protocol.TopicPartition]int64{}
	w.live.Store(&empty)
	return w, nil
}

// Run consumes until ctx ends (SIGTERM) or, with ExitWhenDone, every partition is finished.
func (w *Worker) Run(ctx context.Context) (err error) {
	s := w.s
	w.topic = handovertopic.New(w.base, s.HandoverTopic)
	if _, err := w.topic.Producer(); err != nil {
		return err
	}
	defer w.topic.Close()
	if s.DLQTopic != "" && s.PoisonPolicy == "dead-letter" {
		if w.dlq, err = kafka.NewProducer(handovertopic.ProducerConfig(w.base, kafka.ConfigMap{"linger.ms": 5})); err != nil {
			return err
		}
		go func() {
			for range w.dlq.Events() {
			}
		}()
		defer w.dlq.Close()
	}
	consumer, err := kafka.NewConsumer(handovertopic.With(*handovertopic.With(*handovertopic.With(GroupTuning,
		handovertopic.Scoped(handovertopic.Consumer, w.base)), ConsumerSettings), kafka.ConfigMap{"group.id": s.ReplayGroup}))
	if err != nil {
		return err
	}
	w.consumer = consumer
	replayID := s.ReplayID
	w.follower = handovertopic.NewFollower(w.base, s.HandoverTopic, func(v *protocol.HandoverView) replayFacts {
		r := v.Replay(replayID)
		f := replayFacts{handovers: r.HandoverOffsets(), guards: map[protocol.TopicPartition]int64{}}
		for k, p := range r.Partitions {
			if p.Guard != nil && p.Guard.SeenUntil != nil {
				f.guards[k] = *p.Guard.SeenUntil
			}
		}
		return f
	})
	w.follower.Log = w.log
	w.follower.Interval = 200 * time.Millisecond
	w.follower.Start()
	background, stopBackground := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); w.backgroundChecks(background) }()
	defer func() {
		stopBackground()
		bg.Wait()
		w.follower.Stop()
		w.metrics.ready.Store(false)
		w.closeConsumer()
		if w.liveReader != nil {
			w.liveReader.Close()
		}
		w.log.Info("replay consumer stopped")
	}()
	if err := consumer.SubscribeTopics(s.Topics, w.onRebalance); err != nil {
		return err
	}
	w.metrics.ready.Store(true)
	w.log.Info("replay consumer started", "mode", s.Mode, "topics", s.Topics, "replay_group", s.ReplayGroup,
		"partitions_planned", len(w.plan))
	for ctx.Err() == nil {
		batch, ends, err := w.readBatch()
		if err != nil {
			return err
		}
		w.metrics.Beat()
		if err := w.process(ctx, batch, ends); err != nil {
			return err
		}
		w.decide()
		w.reportProgress()
		if s.ExitWhenDone && w.allDone() {
			w.log.Info("every partition of the replay is finished; exiting")
			w.Done = true
			break
		}
	}
	w.stopping = true
	w.checkpoint(true) // SIGTERM: the last batch is committed before leaving
	return nil
}

func (w *Worker) closeConsumer() {
	done := make(chan struct{})
	go func() {
		_ = w.consumer.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
		// The positions are committed; the group drops the member after its session timeout.
		w.log.Warn("closing the consumer did not return in time; exiting without it", "seconds", closeWait.Seconds())
	}
}

func (w *Worker) consumeWait() time.Duration {
	drain := w.s.Mode == protocol.ModeDrain
	for _, p := range w.parts {
		if p.atEnd || p.finished != "" {
			continue
		}
		if drain || p.endOffset != nil || p.endTimestampMs != nil {
			return finishingWait
		}
	}
	return idleWait
}

// readBatch polls up to BatchSize records, or until the wait passes. ends: the end-of-partition events
// seen meanwhile (the offset after the last readable record), applied after the batch's records.
func (w *Worker) readBatch() ([]*kafka.Message, map[protocol.TopicPartition]int64, error) {
	ends := map[protocol.TopicPartition]int64{}
	deadline := time.Now().Add(w.consumeWait())
	batch := make([]*kafka.Message, 0, min(w.s.BatchSize, 4096))
	for len(batch) < w.s.BatchSize {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		ms := int(left.Milliseconds())
		if len(batch) > 0 {
			ms = 0 // drain what is fetched, do not wait for more once something is in hand
		}
		ev := w.consumer.Poll(ms)
		if len(w.revoked) > 0 {
			batch = w.dropRevoked(batch, ends)
		}
		if ev == nil {
			if len(batch) > 0 {
				break
			}
			continue
		}
		switch e := ev.(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				w.metrics.Errors.Add(1)
				continue
			}
			batch = append(batch, e)
		case kafka.PartitionEOF:
			ends[keyOf(kafka.TopicPartition(e))] = int64(e.Offset)
		case kafka.Error:
			if e.IsFatal() {
				return nil, nil, fmt.Errorf("consumer: %w", e)
			}
			w.metrics.Errors.Add(1)
			w.log.Warn("consumer error", "error", e)
		}
	}
	return batch, ends, nil
}

func (w *Worker) process(ctx context.Context, messages []*kafka.Message, ends map[protocol.TopicPartition]int64) error {
	batch := messages[:0] // filtered in place: the records kept are a prefix of those read
	var size int64
	// Records come in runs per partition: the partition of the last record is looked up once per run.
	var part *partitionProgress
	var lastTopic *string
	lastPartition := int32(-1)
	for _, m := range messages {
		if m.TopicPartition.Partition != lastPartition || m.TopicPartition.Topic != lastTopic {
			part = w.parts[keyOf(m.TopicPartition)]
			lastTopic, lastPartition = m.TopicPartition.Topic, m.TopicPartition.Partition
		}
		// Not ours (any more), or finished: never processed past the stop offset.
		if part == nil || part.finished != "" || part.endMet != nil {
			continue
		}
		offset := int64(m.TopicPartition.Offset)
		if part.position != nil && offset < *part.position {
			// Read before a rebalance gave the partition back to this replica (the fetch then starts again
			// at the committed offset): processed already, or to be read again in order.
			continue
		}
		part.atEnd = false
		if part.endOffset != nil || part.endTimestampMs != nil {
			var ts *int64
			if m.TimestampType != kafka.TimestampNotAvailable {
				ts = protocol.Int64(m.Timestamp.UnixMilli())
			}
			if protocol.RecordEndsPartition(part.endOffset, part.endTimestampMs, offset, ts) {
				part.endMet = protocol.Int64(offset)
				continue
			}
		}
		if part.position != nil {
			*part.position = offset + 1 // the position is this partition's own (never shared): no allocation
		} else {
			part.position = protocol.Int64(offset + 1)
		}
		batch = append(batch, m)
		size += int64(len(m.Value) + len(m.Key))
	}
	for k, end := range ends {
		// The end event comes after the partition's last record: every record of the batch is below it.
		if p := w.parts[k]; p != nil && p.finished == "" && (p.position == nil || *p.position <= end) {
			p.atEnd = true
			p.endEventOffset = protocol.Int64(end)
		}
	}
	hasEnds := false
	for _, p := range w.parts {
		if p.atEnd || p.endMet != nil {
			hasEnds = true
		}
	}
	if len(batch) == 0 && !hasEnds {
		return nil
	}
	w.metrics.Consumed.Add(int64(len(batch)))
	w.metrics.Bytes.Add(size)
	if !w.throttle.Unlimited() && len(batch) > 0 {
		now := float64(time.Now().UnixNano()) / 1e9
		w.wait(ctx, time.Duration(w.throttle.Delay(len(batch), size, now)*float64(time.Second)))
	}
	if err := w.deliver(ctx, batch); err != nil {
		return err
	}
	for _, p := range w.parts {
		if p.endMet != nil && p.finished == "" {
			if p.position == nil || *p.position < *p.endMet {
				p.position = protocol.Int64(*p.endMet)
			}
		} else if p.atEnd && p.endEventOffset != nil && p.position != nil && *p.endEventOffset > *p.position {
			// Past trailing transaction markers: the group's lag is really zero.
			p.position = protocol.Int64(*p.endEventOffset)
		}
	}
	w.checkpoint(false)
	return nil
}

func (w *Worker) wait(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(min(200*time.Millisecond, time.Until(deadline)))
		w.metrics.Beat()
	}
}

type poison struct {
	message *kafka.Message
	reason  string
}

func (w *Worker) deliver(ctx context.Context, batch []*kafka.Message) error {
	var matching []*kafka.Message
	var poisoned []poison
	if w.filter.MatchesEverything() {
		matching = batch
	} else {
		needHeaders := w.filter.NeedsHeaders()
		for _, m := range batch {
			var hs []protocol.Header
			if needHeaders && len(m.Headers) > 0 {
				hs = make([]protocol.Header, len(m.Headers))
				for i, h := range m.Headers {
					hs[i] = protocol.Header{Key: h.Key, Value: h.Value}
				}
			}
			ok, err := w.filter.Match(m.Key, hs, m.Value)
			switch {
			case err != nil:
				poisoned = append(poisoned, poison{m, "undecodable: " + err.Error()})
			case ok:
				matching = append(matching, m)
			}
		}
	}
	w.metrics.Matched.Add(int64(len(matching)))
	w.metrics.Skipped.Add(int64(len(batch) - len(matching) - len(poisoned)))
	if len(matching) > 0 {
		if err := w.handler.HandleRecords(ctx, matching); err != nil {
			w.log.Info("handler failed on a batch, retrying record by record", "records", len(matching), "error", err)
			for _, m := range matching {
				var last error
				for attempt := 0; attempt <= w.s.HandlerRetries; attempt++ {
					if last = w.handler.HandleRecords(ctx, []*kafka.Message{m}); last == nil {
						break
					}
					if attempt < w.s.HandlerRetries {
						time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
					}
				}
				if last == nil {
					w.metrics.Delivered.Add(1)
				} else {
					poisoned = append(poisoned, poison{m, "handler failed: " + last.Error()})
				}
			}
		} else {
			w.metrics.Delivered.Add(int64(len(matching)))
		}
	}
	for _, p := range poisoned {
		if err := w.poison(p); err != nil {
			return err
		}
	}
	if w.dlq != nil && len(poisoned) > 0 {
		// Dead letters are durable before the batch's offsets are committed.
		if left := w.dlq.Flush(60000); left > 0 {
			return fmt.Errorf("%d dead-letter record(s) not acknowledged within 60s", left)
		}
	}
	return nil
}

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

// checkpoint commits the positions of unfinished partitions. The commit runs in the background while the
// next batch is read; at most one is in flight (the next waits), so a slow commit never lets uncommitted
// batches pile up. force (a stop, a revoke): synchronously, every position.
func (w *Worker) checkpoint(force bool) {
	var offsets []kafka.TopicPartition
	for _, p := range w.parts {
		if p.finished != "" || p.position == nil {
			continue
		}
		if force || p.committed == nil || *p.committed != *p.position || w.commitFailed.Load() {
			offsets = append(offsets, tpOf(p.topic, p.partition, kafka.Offset(*p.position)))
		}
	}
	w.commitWG.Wait()
	if len(offsets) == 0 {
		return
	}
	for _, t := range offsets {
		if p := w.parts[keyOf(t)]; p != nil {
			p.committed = protocol.Int64(int64(t.Offset))
		}
	}
	if force {
		w.commit(offsets)
		return
	}
	w.commitWG.Add(1)
	go func() {
		defer w.commitWG.Done()
		w.commit(offsets)
	}()
}

var membershipErrors = map[kafka.ErrorCode]bool{kafka.ErrUnknownMemberID: true, kafka.ErrIllegalGeneration: true,
	kafka.ErrRebalanceInProgress: true, kafka.ErrFencedInstanceID: true, kafka.ErrAssignmentLost: true,
	kafka.ErrState: true}

// commit commits offsets, retrying while Kafka is briefly unavailable; false when this replica is no
// longer a member (the rebalance that follows takes the partitions away).
func (w *Worker) commit(offsets []kafka.TopicPartition) bool {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := w.consumer.CommitOffsets(offsets)
		if err == nil {
			w.commitFailed.Store(false)
			w.metrics.Commits.Add(1)
			return true
		}
		var kerr kafka.Error
		if errors.As(err, &kerr) && (membershipErrors[kerr.Code()] || kerr.Code() == kafka.ErrDestroy) {
			w.log.Warn("commit refused: no longer a member; the partitions move to another replica", "error", err)
			w.metrics.Errors.Add(1)
			w.commitFailed.Store(true)
			return false
		}
		if time.Now().After(deadline) || (errors.As(err, &kerr) && kerr.IsFatal()) {
			w.log.Error("commit failed; the positions are committed again with the next batch", "error", err)
			w.commitFailed.Store(true)
			return false
		}
		w.metrics.Errors.Add(1)
		w.log.Warn("commit failed, retrying", "error", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------------------------- finishing

func (w *Worker) decide() {
	facts := w.follower.Snapshot()
	live := *w.live.Load()
	type finishing struct {
		part   *partitionProgress
		reason string
	}
	var done []finishing
	for _, p := range w.parts {
		if p.finished != "" || p.position == nil {
			continue
		}
		if p.endMet != nil {
			done = append(done, finishing{p, protocol.ReasonEndBound})
			continue
		}
		var liveAt *int64
		if o, ok := live[p.key()]; ok {
			liveAt = protocol.Int64(o)
		}
		if g, ok := facts.guards[p.key()]; ok {
			if liveAt == nil || g > *liveAt {
				liveAt = protocol.Int64(g)
			}
		}
		reason, err := protocol.ReplayFinish(w.s.Mode, protocol.FinishInput{Position: *p.position, EndOffset: p.endOffset,
			EndTimestampMs: p.endTimestampMs, AtEnd: p.atEnd, LiveCommitted: liveAt})
		if err == nil && reason != "" {
			done = append(done, finishing{p, reason})
		}
	}
	if len(done) == 0 {
		return
	}
	// Commit the stop offsets with `finished` marks, then publish them as H, then stop reading. The
	// background commit of the same positions (without the mark) is waited for first, so it cannot land
	// after the marked one and erase the mark.
	w.commitWG.Wait()
	offsets := make([]kafka.TopicPartition, 0, len(done))
	for _, f := range done {
		t := tpOf(f.part.topic, f.part.partition, kafka.Offset(*f.part.position))
		mark := protocol.CommitMark{ReplayID: w.s.ReplayID, Finished: protocol.String(f.reason)}.Committed()
		t.Metadata = &mark
		offsets = append(offsets, t)
	}
	if !w.commit(offsets) {
		return // not a member any more: whoever gets the partitions decides again
	}
	records := make([]protocol.Record, 0, len(done))
	for _, f := range done {
		f.part.finished = f.reason
		f.part.committed = protocol.Int64(*f.part.position)
		records = append(records, protocol.HandoverInfo{ReplayID: w.s.ReplayID, Topic: f.part.topic,
			Partition: f.part.partition, Offset: *f.part.position, Reason: f.reason, By: w.s.MemberName,
			AtMs: time.Now().UnixMilli()})
	}
	w.publishHandover(records...)
	for _, f := range done {
		_ = w.consumer.Pause([]kafka.TopicPartition{tpOf(f.part.topic, f.part.partition, kafka.OffsetInvalid)})
		w.metrics.SetPartition(f.part.topic, f.part.partition, *f.part.position, -1, stateFinished)
		w.metrics.Finished.Add(1)
		w.log.Info("partition finished", "topic", f.part.topic, "partition", f.part.partition,
			"handover_offset", *f.part.position, "reason", f.reason)
	}
}

// publishHandover publishes H, retried: H must be durable before anyone acts on it. A restart would
// publish it again from the commit mark.
func (w *Worker) publishHandover(records ...protocol.Record) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := w.topic.Publish(context.Background(), records...)
		if err == nil {
			return
		}
		w.metrics.Errors.Add(1)
		if time.Now().After(deadline) {
			w.log.Error("publishing the handover offset failed; a restart publishes it again from the commit mark", "error", err)
			return
		}
		w.log.Warn("publishing the handover offset failed, retrying", "error", err)
		time.Sleep(time.Second)
	}
}

func (w *Worker) allDone() bool {
	if len(w.plan) == 0 {
		return false
	}
	published := w.follower.Snapshot().handovers
	for k := range w.plan {
		if _, ok := published[k]; ok {
			continue
		}
		if p := w.parts[k]; p != nil && p.finished != "" {
			continue
		}
		return false
	}
	return true
}

// ---------------------------------------------------------------------------------------------- slow checks

// backgroundChecks reads the live group's committed offsets (Parallel, Handover) every check interval and
// publishes progress records, off the consume loop.
func (w *Worker) backgroundChecks(ctx context.Context) {
	ticker := time.NewTicker(w.s.CheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case records := <-w.progressOut:
			if err := w.topic.Publish(ctx, records...); err != nil {
				w.log.Warn("publishing progress failed", "error", err)
			}
		case <-ticker.C:
			ask := w.liveAsk.Load()
			if w.s.LiveGroup == "" || w.s.Mode == protocol.ModeDrain || ask == nil || len(*ask) == 0 {
				continue
			}
			if w.liveReader == nil {
				reader, err := kafka.NewConsumer(handovertopic.ConsumerConfig(w.base, kafka.ConfigMap{"group.id": w.s.LiveGroup,
					"enable.auto.commit": false}))
				if err != nil {
					w.log.Warn("the live group's offset reader", "error", err)
					continue
				}
				w.liveReader = reader
			}
			parts := make([]kafka.TopicPartition, 0, len(*ask))
			for _, k := range *ask {
				parts = append(parts, tpOf(k.Topic, k.Partition, kafka.OffsetInvalid))
			}
			found, err := w.liveReader.Committed(parts, 15000)
			if err != nil {
				w.metrics.Errors.Add(1)
				w.log.Warn("reading the live group's offsets failed", "error", err)
				continue
			}
			live := map[protocol.TopicPartition]int64{}
			for _, t := range found {
				if t.Error == nil && t.Offset >= 0 {
					live[keyOf(t)] = int64(t.Offset)
				}
			}
			w.live.Store(&live)
		}
	}
}

// reportProgress hands progress records of partitions that moved to the background (every 2 s at most).
func (w *Worker) reportProgress() {
	var active []protocol.TopicPartition
	for k, p := range w.parts {
		if p.finished == "" {
			active = append(active, k)
		}
	}
	w.liveAsk.Store(&active)
	if time.Since(w.lastProgress) < progressInterval {
		return
	}
	w.lastProgress = time.Now()
	var records []protocol.Record
	for k, p := range w.parts {
		if p.committed == nil {
			continue
		}
		atEnd := int64(0)
		if p.atEnd {
			atEnd = 1
		}
		now := [2]int64{*p.committed, atEnd}
		if w.reported[k] == now {
			continue
		}
		w.reported[k] = now
		records = append(records, protocol.ProgressInfo{ReplayID: w.s.ReplayID, Topic: p.topic, Partition: p.partition,
			Position: *p.committed, AtEnd: p.atEnd, Member: w.s.MemberName, AtMs: time.Now().UnixMilli()})
		end := int64(-1)
		if _, high, err := w.consumer.GetWatermarkOffsets(p.topic, p.partition); err == nil && high >= 0 {
			end = high
			if p.endOffset != nil && *p.endOffset < end {
				end = *p.endOffset
			}
		}
		w.metrics.SetPartition(p.topic, p.partition, *p.committed, end, -1)
	}
	if len(records) == 0 {
		return
	}
	select {
	case w.progressOut <- records:
	default:
		w.reported = map[protocol.TopicPartition][2]int64{} // advisory: the next report says it again
	}
}

// ---------------------------------------------------------------------------------------------- rebalances

// onRebalance runs inside Poll. Eager (ReplayAssignment): every rebalance revokes the whole assignment and
// assigns a whole new one, which may give back partitions this replica held; cooperative (a hand-set
// strategy): only the partitions that move. Either way a revoked partition's state is dropped and an assigned
// one's is built again from its committed offset.
func (w *Worker) onRebalance(c *kafka.Consumer, ev kafka.Event) error {
	cooperative := c.GetRebalanceProtocol() == "COOPERATIVE"
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		w.metrics.Rebalances.Add(1)
		var err error
		if cooperative {
			err = c.IncrementalAssign(e.Partitions)
		} else {
			err = c.Assign(e.Partitions)
		}
		if err != nil {
			return err
		}
		if w.stopping || len(e.Partitions) == 0 {
			return nil
		}
		w.assigned(c, e.Partitions)
	case kafka.RevokedPartitions:
		w.metrics.Rebalances.Add(1)
		w.commitWG.Wait()
		if !c.AssignmentLost() {
			var pending []kafka.TopicPartition
			for _, t := range e.Partitions {
				if p := w.parts[keyOf(t)]; p != nil && p.finished == "" && p.position != nil {
					pending = append(pending, tpOf(p.topic, p.partition, kafka.Offset(*p.position)))
				}
			}
			if len(pending) > 0 {
				w.commit(pending)
			}
		} else {
			w.log.Warn("partitions lost (not committed; the new owner resumes from the last commit)")
		}
		for _, t := range e.Partitions {
			k := keyOf(t)
			delete(w.parts, k)
			delete(w.reported, k)
			w.revoked[k] = true
			w.metrics.Forget(*t.Topic, t.Partition)
		}
		w.metrics.Assigned.Store(int64(len(w.parts)))
		if cooperative {
			return c.IncrementalUnassign(e.Partitions)
		}
		return c.Unassign()
	}
	return nil
}

// dropRevoked removes from the batch in hand the records and end events of partitions revoked while it was
// read: their positions were committed without them, and whoever owns them next (this replica too, as an
// eager rebalance often gives a partition back) reads them again from the committed offset.
func (w *Worker) dropRevoked(batch []*kafka.Message, ends map[protocol.TopicPartition]int64) []*kafka.Message {
	kept := batch[:0]
	for _, m := range batch {
		if !w.revoked[keyOf(m.TopicPartition)] {
			kept = append(kept, m)
		}
	}
	for k := range w.revoked {
		delete(ends, k)
	}
	clear(w.revoked)
	return kept
}

func (w *Worker) assigned(c *kafka.Consumer, partitions []kafka.TopicPartition) {
	committed := map[protocol.TopicPartition]kafka.TopicPartition{}
	deadline := time.Now().Add(time.Minute)
	for {
		found, err := c.Committed(partitions, 15000)
		if err == nil {
			for _, t := range found {
				if t.Error != nil {
					err = t.Error
				}
			}
		}
		if err == nil {
			for _, t := range found {
				committed[keyOf(t)] = t
			}
			break
		}
		var kerr kafka.Error
		if time.Now().After(deadline) || (errors.As(err, &kerr) && kerr.Code() == kafka.ErrDestroy) {
			// An unreadable offset must never be taken for "none": leave the partitions unread (paused); the
			// next rebalance or a restart tries again.
			w.log.Error("reading committed offsets failed; partitions left paused", "error", err)
			_ = c.Pause(partitions)
			return
		}
		w.log.Warn("reading committed offsets failed, retrying", "error", err)
		time.Sleep(500 * time.Millisecond)
	}
	var pause []kafka.TopicPartition
	var finished []string
	for _, t := range partitions {
		k := keyOf(t)
		part := &partitionProgress{topic: k.Topic, partition: k.Partition}
		start, planned := w.plan[k]
		if !planned {
			// Not in the replay's plan (added after the start was resolved): the live group owns it.
			part.finished = protocol.ReasonNotInPlan
			pause = append(pause, t)
			w.parts[k] = part
			continue
		}
		found := committed[k]
		offset := int64(found.Offset)
		if found.Offset < 0 {
			// Planned, but the group's offset is gone (offsets of a long-empty group expire): resume at the
			// published start, which the bootstrap committed. Duplicates, never a loss.
			offset = start.Offset
			w.commit([]kafka.TopicPartition{tpOf(k.Topic, k.Partition, kafka.Offset(offset))})
			w.log.Warn("planned partition had no committed offset; committed its published start", "topic", k.Topic,
				"partition", k.Partition, "start", offset)
		}
		part.position, part.committed = protocol.Int64(offset), protocol.Int64(offset)
		part.endOffset, part.endTimestampMs = start.EndOffset, start.EndTimestampMs
		var mark *protocol.CommitMark
		if found.Metadata != nil {
			mark = protocol.DecodeMark(*found.Metadata)
		}
		if mark != nil && mark.Usable() && mark.Finished != nil && mark.ReplayID == w.s.ReplayID {
			part.finished = *mark.Finished
			pause = append(pause, t)
			finished = append(finished, k.String())
			// The previous owner may have died between its commit and its publish: publish again.
			w.publishHandover(protocol.HandoverInfo{ReplayID: w.s.ReplayID, Topic: k.Topic, Partition: k.Partition,
				Offset: offset, Reason: *mark.Finished, By: w.s.MemberName, AtMs: time.Now().UnixMilli()})
			w.metrics.SetPartition(k.Topic, k.Partition, offset, -1, stateFinished)
		} else {
			w.metrics.SetPartition(k.Topic, k.Partition, offset, -1, stateReplaying)
		}
		w.parts[k] = part
	}
	if len(pause) > 0 {
		_ = c.Pause(pause)
	}
	w.metrics.Assigned.Store(int64(len(w.parts)))
	names := make([]string, 0, len(partitions))
	for _, t := range partitions {
		names = append(names, keyOf(t).String())
	}
	w.log.Info("partitions assigned", "partitions", names, "finished", finished)
}
