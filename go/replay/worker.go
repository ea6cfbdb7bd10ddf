package replay

// The replay loop (port of replay_worker/replay/consumer.py): read a batch, filter, hand it to the service's
// handler, and do what the book (protocol.ReplayBook: what to commit with which mark, when a partition
// finishes, which progress to publish, what a revoke drops) says. This file holds the I/O only.
//
//   - The start was committed as the replay group's offsets by the bootstrap, so an assignment never
//     seeks: every replica and every restart resumes from committed offsets, and a rebalance cannot
//     replay anything twice (seed 003's trap).
//   - Automatic commit and offset store are off: a batch's offsets are committed after the handler
//     returned. A batch's commit runs in the background while the next batch is read (one in flight at a
//     time), so the duplicate window after a crash is at most the batch in hand and the one before it.
//   - A revoke commits the revoked partitions' positions; a lost assignment commits nothing; either way the
//     records of those partitions read in the same poll are dropped.
//   - The asynchronous commit is a goroutine's synchronous one, so the client does not order it before a
//     later commit: a finish and a revoke wait for its answer before they commit (HANDOVER.md 5.4).
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

// record and endEvent are what the consumer returned, as the book reads them (protocol.ConsumedItem).
type record kafka.Message

func (r *record) Where() protocol.TopicPartition { return keyOf(r.TopicPartition) }
func (r *record) At() int64                      { return int64(r.TopicPartition.Offset) }
func (r *record) EndOfPartition() bool           { return false }
func (r *record) TimestampMs() (int64, bool) {
	return r.Timestamp.UnixMilli(), r.TimestampType != kafka.TimestampNotAvailable
}

type endEvent kafka.TopicPartition

func (e *endEvent) Where() protocol.TopicPartition { return keyOf(kafka.TopicPartition(*e)) }
func (e *endEvent) At() int64                      { return int64(e.Offset) }
func (e *endEvent) EndOfPartition() bool           { return true }
func (e *endEvent) TimestampMs() (int64, bool)     { return 0, false }

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
	book     *protocol.ReplayBook
	throttle *protocol.Throttle

	consumer *kafka.Consumer
	topic    *handovertopic.Topic
	follower *handovertopic.Follower[replayFacts]
	dlq      *kafka.Producer
	stopping bool

	live         atomic.Pointer[map[protocol.TopicPartition]int64]
	liveAsk      atomic.Pointer[[]protocol.TopicPartition]
	liveReader   *kafka.Consumer
	lastProgress time.Time
	progressOut  chan []protocol.Record

	// inFlight: the asynchronous commit on its way (nil: none); its answer comes on answer.
	inFlight *protocol.BookCommit
	answer   chan bool

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
	plan := map[protocol.TopicPartition]protocol.PlannedPartition{}
	for k, p := range state.Partitions {
		if p.Start != nil {
			plan[k] = protocol.PlannedPartition{Start: p.Start.Offset, EndOffset: p.Start.EndOffset,
				EndTimestampMs: p.Start.EndTimestampMs}
		}
	}
	w := &Worker{s: s, base: base, handler: handler, filter: filter, metrics: metrics, log: log,
		book:        protocol.NewReplayBook(s.ReplayID, s.Mode, plan, false, false),
		throttle:    protocol.NewThrottle(s.MaxRecordsPerSecond, s.MaxBytesPerSecond),
		progressOut: make(chan []protocol.Record, 4), answer: make(chan bool, 1)}
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
		"partitions_planned", len(w.book.Plan))
	for ctx.Err() == nil {
		if err := w.readBatch(); err != nil {
			return err
		}
		w.metrics.Beat()
		if err := w.process(ctx); err != nil {
			return err
		}
		w.decide()
		w.reportProgress()
		if s.ExitWhenDone && w.book.Done() {
			w.log.Info("every partition of the replay is finished; exiting")
			w.Done = true
			break
		}
	}
	w.stopping = true
	w.awaitCommit()
	if c := w.book.Resealing(); c != nil { // a mark the last asynchronous commit may have erased
		w.book.Committed(c, w.commit(c))
	}
	if c, _ := w.book.Checkpoint(nil, true); c != nil { // SIGTERM: the last batch is committed before leaving
		w.book.Committed(c, w.commit(c))
	}
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
	for _, p := range w.book.Parts() {
		if p.AtEnd || p.Finished != "" {
			continue
		}
		if drain || p.EndOffset != nil || p.EndTimestampMs != nil {
			return finishingWait
		}
	}
	return idleWait
}

// readBatch polls up to BatchSize records, or until the wait passes, into the book's batch in hand, end
// events included (a rebalance inside Poll drops what it revokes from there).
func (w *Worker) readBatch() error {
	deadline := time.Now().Add(w.consumeWait())
	for n := 0; n < w.s.BatchSize; {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		ms := int(left.Milliseconds())
		if n > 0 {
			ms = 0 // drain what is fetched, do not wait for more once something is in hand
		}
		ev := w.consumer.Poll(ms)
		if ev == nil {
			if n > 0 {
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
			w.book.ReadOne((*record)(e))
			n++
		case kafka.PartitionEOF:
			end := endEvent(e)
			w.book.ReadOne(&end)
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("consumer: %w", e)
			}
			w.metrics.Errors.Add(1)
			w.log.Warn("consumer error", "error", e)
		}
	}
	return nil
}

// process takes the batch in hand as the book says, hands it to the handler and checkpoints it.
func (w *Worker) process(ctx context.Context) error {
	taken, _ := w.book.Take()
	if !w.book.AnythingToDeliver(len(taken)) {
		return nil
	}
	batch := make([]*kafka.Message, len(taken))
	var size int64
	for i, item := range taken {
		m := (*kafka.Message)(item.(*record))
		batch[i] = m
		size += int64(len(m.Value) + len(m.Key))
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
	w.book.EndPositions()
	w.checkpoint()
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

// checkpoint makes the commit the book asks for after a delivery. An asynchronous one runs in the background
// while the next batch is read; at most one is in flight (the next checkpoint waits for its answer), so a
// slow commit never lets uncommitted batches pile up.
func (w *Worker) checkpoint() {
	w.awaitCommit()
	c, _ := w.book.Checkpoint(nil, false)
	if c == nil {
		return
	}
	if c.Sync {
		w.book.Committed(c, w.commit(c))
		return
	}
	w.book.Committed(c, true) // sent: counts as committed; a failure undoes it (awaitCommit)
	w.inFlight = c
	go func() { w.answer <- w.commit(c) }()
}

// awaitCommit waits for the answer to the asynchronous commit in flight, if any, and tells the book.
func (w *Worker) awaitCommit() {
	if w.inFlight != nil {
		w.answered(<-w.answer)
	}
}

// answeredYet tells the book the asynchronous commit's answer if it has come.
func (w *Worker) answeredYet() {
	if w.inFlight == nil {
		return
	}
	select {
	case ok := <-w.answer:
		w.answered(ok)
	default:
	}
}

func (w *Worker) answered(ok bool) {
	var failed []protocol.TopicPartition
	if !ok {
		for _, o := range w.inFlight.Offsets {
			failed = append(failed, protocol.TopicPartition{Topic: o.Topic, Partition: o.Partition})
		}
	}
	w.inFlight = nil
	w.book.Answered(failed)
}

var membershipErrors = map[kafka.ErrorCode]bool{kafka.ErrUnknownMemberID: true, kafka.ErrIllegalGeneration: true,
	kafka.ErrRebalanceInProgress: true, kafka.ErrFencedInstanceID: true, kafka.ErrAssignmentLost: true,
	kafka.ErrState: true}

// commit commits offsets, retrying while Kafka is briefly unavailable; false when this replica is no
// longer a member (the rebalance that follows takes the partitions away).
func (w *Worker) commit(c *protocol.BookCommit) bool {
	offsets := make([]kafka.TopicPartition, len(c.Offsets))
	for i, o := range c.Offsets {
		offsets[i] = tpOf(o.Topic, o.Partition, kafka.Offset(o.Offset))
		if o.Metadata != nil {
			stored := protocol.StoredMetadata(*o.Metadata)
			offsets[i].Metadata = &stored
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := w.consumer.CommitOffsets(offsets)
		if err == nil {
			w.metrics.Commits.Add(1)
			return true
		}
		var kerr kafka.Error
		if errors.As(err, &kerr) && (membershipErrors[kerr.Code()] || kerr.Code() == kafka.ErrDestroy) {
			w.log.Warn("commit refused: no longer a member; the partitions move to another replica", "error", err)
			w.metrics.Errors.Add(1)
			return false
		}
		if time.Now().After(deadline) || (errors.As(err, &kerr) && kerr.IsFatal()) {
			w.log.Error("commit failed; the positions are committed again with the next batch", "error", err)
			return false
		}
		w.metrics.Errors.Add(1)
		w.log.Warn("commit failed, retrying", "error", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------------------------- finishing

// decide finishes the partitions the book says are finished: their stop offsets committed with `finished`
// marks, then published as H, then no longer read; and re-seals marks an asynchronous commit may have erased.
func (w *Worker) decide() {
	facts := w.follower.Snapshot()
	w.book.Live, w.book.Guards, w.book.Published = *w.live.Load(), facts.guards, facts.handovers
	w.answeredYet()
	finishing, err := w.book.Decide()
	if err != nil {
		w.log.Error("deciding the finish", "error", err)
		return
	}
	if finishing != nil {
		// The commit in flight is a goroutine's, not ordered before this one by the client: it may land after
		// the marked commit and erase the mark (a revoke before the re-seal then loses it: the next owner reads
		// on past H). Its answer is awaited first, so the finishing commit is the partition's last.
		w.awaitCommit()
		ok := w.commit(finishing.Commit)
		w.book.Committed(finishing.Commit, ok)
		handovers := w.book.Finished(finishing, ok) // not ok: not a member any more; the next owner decides again
		records := make([]protocol.Record, 0, len(handovers))
		for _, h := range handovers {
			records = append(records, protocol.HandoverInfo{ReplayID: w.s.ReplayID, Topic: h.Topic,
				Partition: h.Partition, Offset: h.Offset, Reason: h.Reason, By: w.s.MemberName,
				AtMs: time.Now().UnixMilli()})
		}
		if len(records) > 0 {
			w.publishHandover(records...)
		}
		for _, h := range handovers {
			_ = w.consumer.Pause([]kafka.TopicPartition{tpOf(h.Topic, h.Partition, kafka.OffsetInvalid)})
			w.metrics.SetPartition(h.Topic, h.Partition, h.Offset, -1, stateFinished)
			w.metrics.Finished.Add(1)
			w.log.Info("partition finished", "topic", h.Topic, "partition", h.Partition,
				"handover_offset", h.Offset, "reason", h.Reason)
		}
	}
	if c := w.book.Resealing(); c != nil {
		w.book.Committed(c, w.commit(c))
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

// reportProgress hands the progress records the book gives to the background (every 2 s at most).
func (w *Worker) reportProgress() {
	var active []protocol.TopicPartition
	for _, p := range w.book.Parts() {
		if p.Finished == "" {
			active = append(active, p.TopicPartition)
		}
	}
	w.liveAsk.Store(&active)
	if time.Since(w.lastProgress) < progressInterval {
		return
	}
	w.lastProgress = time.Now()
	progress := w.book.Progress()
	if len(progress) == 0 {
		return
	}
	records := make([]protocol.Record, 0, len(progress))
	for _, p := range progress {
		records = append(records, protocol.ProgressInfo{ReplayID: w.s.ReplayID, Topic: p.Topic, Partition: p.Partition,
			Position: p.Committed, AtEnd: p.AtEnd, Member: w.s.MemberName, AtMs: time.Now().UnixMilli()})
		end := int64(-1)
		if _, high, err := w.consumer.GetWatermarkOffsets(p.Topic, p.Partition); err == nil && high >= 0 {
			end = high
			if part := w.book.Part(p.TopicPartition); part != nil && part.EndOffset != nil && *part.EndOffset < end {
				end = *part.EndOffset
			}
		}
		w.metrics.SetPartition(p.Topic, p.Partition, p.Committed, end, -1)
	}
	select {
	case w.progressOut <- records:
	default:
		w.book.ProgressFailed() // advisory: the next report says it again
	}
}

// ---------------------------------------------------------------------------------------------- rebalances

// onRebalance runs inside Poll. Eager (ReplayAssignment): every rebalance revokes the whole assignment and
// assigns a whole new one, which may give back partitions this replica held; cooperative (a hand-set
// strategy): only the partitions that move. Either way the book forgets a revoked partition (and drops what
// was read of it in this poll) and builds an assigned one again from its committed offset.
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
		w.awaitCommit()
		keys := make([]protocol.TopicPartition, len(e.Partitions))
		for i, t := range e.Partitions {
			keys[i] = keyOf(t)
			w.metrics.Forget(*t.Topic, t.Partition)
		}
		if !c.AssignmentLost() {
			if commit, _ := w.book.Revoke(keys); commit != nil {
				w.book.Committed(commit, w.commit(commit))
			}
		} else {
			w.log.Warn("partitions lost (not committed; the new owner resumes from the last commit)")
			w.book.Lost(keys)
		}
		w.metrics.Assigned.Store(int64(len(w.book.Parts())))
		if cooperative {
			return c.IncrementalUnassign(e.Partitions)
		}
		return c.Unassign()
	}
	return nil
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
		var at *int64
		var metadata string
		if found, has := committed[k]; has && found.Offset >= 0 {
			at = protocol.Int64(int64(found.Offset))
			if found.Metadata != nil {
				metadata = *found.Metadata
			}
		}
		a := w.book.Assign(k, at, metadata)
		if a.StartCommit != nil {
			// Planned, but the group's offset is gone (offsets of a long-empty group expire): resume at the
			// published start, which the bootstrap committed. Duplicates, never a loss.
			w.commit(a.StartCommit)
			w.log.Warn("planned partition had no committed offset; committed its published start", "topic", k.Topic,
				"partition", k.Partition, "start", a.StartCommit.Offsets[0].Offset)
		}
		if a.Pause {
			pause = append(pause, t)
		}
		part := w.book.Part(k)
		switch {
		case a.Handover != nil:
			finished = append(finished, k.String())
			// The previous owner may have died between its commit and its publish: publish again.
			w.publishHandover(protocol.HandoverInfo{ReplayID: w.s.ReplayID, Topic: k.Topic, Partition: k.Partition,
				Offset: a.Handover.Offset, Reason: a.Handover.Reason, By: w.s.MemberName, AtMs: time.Now().UnixMilli()})
			w.metrics.SetPartition(k.Topic, k.Partition, a.Handover.Offset, -1, stateFinished)
		case part.Position != nil:
			w.metrics.SetPartition(k.Topic, k.Partition, *part.Position, -1, stateReplaying)
		}
	}
	if len(pause) > 0 {
		_ = c.Pause(pause)
	}
	w.metrics.Assigned.Store(int64(len(w.book.Parts())))
	names := make([]string, 0, len(partitions))
	for _, t := range partitions {
		names = append(names, keyOf(t).String())
	}
	w.log.Info("partitions assigned", "partitions", names, "finished", finished)
}
