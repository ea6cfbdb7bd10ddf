// Package guard is the handover guard for Go services: a *kafka.Consumer that applies every rule of
// HANDOVER.md section 6, so that during a Handover replay each record from the first skipped offset on is
// processed by exactly one group. A service changes how it builds its consumer and nothing else:
//
//	consumer, err := guard.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": ..., "group.id": "accounts"})
//	err = consumer.SubscribeTopics([]string{"transactions"}, rebalanceCb) // the service's own callback
//	for running {
//	    msg, err := consumer.ReadMessage(time.Second) // or consumer.Poll(ms)
//	    ...
//	    consumer.StoreMessage(msg) // if enable.auto.offset.store=false; or consumer.CommitMessage(msg)
//	}
//	consumer.Close()
//
// *Consumer embeds *kafka.Consumer, so every method the guard has no reason to change passes through. What
// it changes: while a Handover replay covers one of its partitions, records the replay processes are not
// returned, and every store and commit carries the guard's state in its metadata (the commit mark). With
// no replay active nothing is done per record but remembering its offset.
//
// Requirements, as for the Python guard: store and commit through this object (not the *kafka.Consumer
// your rebalance callback receives), and do not call Assign/Unassign in the callback: the guard assigns,
// so it can hold new partitions until it knows the current handover state. The deprecated channel-based
// consumer (go.events.channel.enable) is not supported.
package guard

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/handovertopic"
	"reprise.io/kafka/protocol"
)

// Options tune the guard; the zero value is the default.
type Options struct {
	// HandoverTopic is the handover topic (default: $REPRISE_HANDOVER_TOPIC, which the live Deployment sets to
	// its namespace's topic, else reprise.handover).
	HandoverTopic string
	// Member names this replica in guard and ack records (default $HOSTNAME).
	Member string
	// ProgressInterval is the pace of guard records, floor commits and acknowledgements (default 1 s).
	ProgressInterval time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// maxWaiting: records of held partitions kept in memory (all partitions together) before a partition that
// gets one more is paused (so at most maxWaiting plus one per partition are kept).
const maxWaiting = 20000

// progressEvery: with no replay active, Poll calls progress once per this many records handed in a row.
const progressEvery = 64

// Stats are counts for the service's own metrics.
type Stats struct {
	Skipped          int64
	Handed           int64
	Seeks            int64
	Acks             int64
	ActivePartitions int
	// HandoverRecordsFailed counts handover-topic records the guard's follower could not apply (malformed,
	// or an error applying them); the records after them were applied.
	HandoverRecordsFailed int64
}

// Consumer is a guarded confluent-kafka-go consumer (see the package doc).
type Consumer struct {
	*kafka.Consumer

	group       string
	member      string
	topic       string
	autoStore   bool
	cooperative bool
	interval    time.Duration
	log         *slog.Logger

	book    *protocol.GuardBook
	guarded bool
	holding bool // some partition waits for the handover view
	// waiting: records of held partitions, kept (see maxWaiting) until the partition is released;
	// ready: records of released partitions, handed out before new ones.
	waiting      map[protocol.TopicPartition][]*kafka.Message
	ready        []*kafka.Message
	waitingCount int
	follower     *handovertopic.Follower[map[protocol.TopicPartition]protocol.ActiveHandover]
	// producer is made at the first guard record or acknowledgement (publisher): a service with no replay
	// active never needs one, and an idle librdkafka client still runs its threads and timers.
	producerMu sync.Mutex
	producer   *kafka.Producer
	base       kafka.ConfigMap
	seenVer    int64
	userCb     kafka.RebalanceCb
	closing    bool
	lastReport time.Time
	// pending: offsets handed while no replay is active, stored at the next call (auto store).
	pending map[protocol.TopicPartition]*int64
	// lastTopic/lastPartition/lastSlot: the pending slot of the partition of the last record (records come
	// in runs per partition, so most records skip the map).
	lastTopic     string
	lastPartition int32
	lastSlot      *int64
	// servicePaused: partitions the service paused itself (the guard must not resume them).
	servicePaused map[protocol.TopicPartition]bool

	mu            sync.Mutex
	pendingAcks   map[protocol.TopicPartition]protocol.PendingAck
	offsetsReader *kafka.Consumer
	lastAckCheck  time.Time
	stats         Stats
	handed        atomic.Int64
	skipped       atomic.Int64
	lastFlush     time.Time
	sinceProgress int
}

// NewConsumer builds the guarded consumer from the service's own configuration (group.id required).
func NewConsumer(conf *kafka.ConfigMap, opts ...Options) (*Consumer, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	group, _ := conf.Get("group.id", "")
	if fmt.Sprint(group) == "" {
		return nil, errors.New("guard.NewConsumer needs group.id: the guard acts for one live group")
	}
	if enabled, _ := conf.Get("go.events.channel.enable", false); enabled == true {
		return nil, errors.New("guard.NewConsumer: the channel-based consumer (go.events.channel.enable) is not " +
			"supported; use Poll or ReadMessage")
	}
	if o.HandoverTopic == "" {
		// The live Deployment names its namespace's topic (the operator gives its replay pods the same one);
		// the one-per-cluster default is for clusters that keep one topic.
		o.HandoverTopic = os.Getenv("REPRISE_HANDOVER_TOPIC")
	}
	if o.HandoverTopic == "" {
		o.HandoverTopic = handovertopic.DefaultTopic
	}
	if o.Member == "" {
		o.Member, _ = os.Hostname()
		if h := os.Getenv("HOSTNAME"); h != "" {
			o.Member = h
		}
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	autoStore := true
	if v, _ := conf.Get("enable.auto.offset.store", true); !truthy(v) {
		autoStore = false
	}
	strategy, _ := conf.Get("partition.assignment.strategy", "")
	inner := kafka.ConfigMap{}
	for k, v := range *conf {
		inner[k] = v
	}
	// The guard stores offsets itself, so a skipped record is never stored by librdkafka on its own.
	inner["enable.auto.offset.store"] = false
	consumer, err := kafka.NewConsumer(&inner)
	if err != nil {
		return nil, err
	}
	base := handovertopic.Connection(*conf, "reprise-guard-"+o.Member)
	c := &Consumer{
		Consumer: consumer, group: fmt.Sprint(group), member: o.Member, topic: o.HandoverTopic,
		autoStore: autoStore, cooperative: strings.Contains(fmt.Sprint(strategy), "cooperative"),
		interval: o.ProgressInterval, log: o.Logger.With("component", "reprise-guard", "group", fmt.Sprint(group)),
		book: protocol.NewGuardBook(autoStore), base: base, seenVer: -1,
		pending: map[protocol.TopicPartition]*int64{}, waiting: map[protocol.TopicPartition][]*kafka.Message{}, servicePaused: map[protocol.TopicPartition]bool{},
	}
	liveGroup := c.group
	c.follower = handovertopic.NewFollower(handovertopic.Connection(*conf, "reprise-guard-"+o.Member+"-follower"),
		o.HandoverTopic, func(v *protocol.HandoverView) map[protocol.TopicPartition]protocol.ActiveHandover {
			return v.ActiveFor(liveGroup)
		})
	c.follower.Log = c.log
	c.follower.OnTick = c.tick
	c.follower.Start()
	return c, nil
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		s := strings.ToLower(strings.TrimSpace(x))
		return s != "false" && s != "0"
	}
	return true
}

// Stats returns the guard's counts.
func (c *Consumer) Stats() Stats {
	failures := c.follower.Failures() // before c.mu: the follower's tick takes its own lock, then c.mu
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Handed, s.Skipped = c.handed.Load(), c.skipped.Load()
	for _, n := range failures {
		s.HandoverRecordsFailed += n
	}
	return s
}

// ---------------------------------------------------------------------------------------------- rebalances

// Subscribe subscribes to one topic (see SubscribeTopics).
func (c *Consumer) Subscribe(topic string, rebalanceCb kafka.RebalanceCb) error {
	return c.SubscribeTopics([]string{topic}, rebalanceCb)
}

// SubscribeTopics subscribes; the service's rebalance callback (may be nil) is still called, after the
// guard took an assignment and before it drops revoked partitions.
func (c *Consumer) SubscribeTopics(topics []string, rebalanceCb kafka.RebalanceCb) error {
	c.userCb = rebalanceCb
	return c.Consumer.SubscribeTopics(topics, c.onRebalance)
}

// dropKept forgets records kept for a partition that is assigned anew or revoked.
func (c *Consumer) dropKept(k protocol.TopicPartition) {
	c.waitingCount -= len(c.waiting[k])
	delete(c.waiting, k)
	kept := c.ready[:0]
	for _, m := range c.ready {
		if key(m.TopicPartition) != k {
			kept = append(kept, m)
		}
	}
	clear(c.ready[len(kept):]) // no stale references to dropped records past the kept ones
	c.ready = kept
}

func key(tp kafka.TopicPartition) protocol.TopicPartition {
	return protocol.TopicPartition{Topic: *tp.Topic, Partition: tp.Partition}
}

func (c *Consumer) onRebalance(inner *kafka.Consumer, ev kafka.Event) error {
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		var err error
		if c.cooperative || inner.GetRebalanceProtocol() == "COOPERATIVE" {
			err = inner.IncrementalAssign(e.Partitions)
		} else {
			err = inner.Assign(e.Partitions)
		}
		if err != nil {
			return err
		}
		if len(e.Partitions) > 0 && !c.closing {
			// Hold the new partitions until the handover view is at least as new as this moment: the
			// previous owner may have acted on state this replica has not read yet. Held in the book, not
			// paused here: a record that arrives before the view is current is put back and the partition
			// paused then (Poll). Usually the view is current before the first fetch returns, and a pause
			// and resume would cost the first fetch most of a second.
			committed, err := c.committed(inner, e.Partitions)
			if err != nil {
				return err
			}
			ticket := c.follower.RequestSync()
			for _, tp := range e.Partitions {
				k := key(tp)
				found := committed[k]
				c.book.Assign(k, found.offset, found.mark, ticket)
				c.dropKept(k)
				delete(c.pending, k)
				c.lastSlot = nil
			}
			c.guarded, c.holding = true, true
		}
		if c.userCb != nil {
			return c.userCb(inner, ev)
		}
	case kafka.RevokedPartitions:
		var err error
		if c.userCb != nil {
			err = c.userCb(inner, ev) // the service commits here, through the guard, while the state exists
		}
		c.flushPending()
		if !inner.AssignmentLost() {
			c.commitGuardStores(e.Partitions)
		}
		for _, tp := range e.Partitions {
			c.book.Drop(key(tp))
			c.dropKept(key(tp))
			delete(c.servicePaused, key(tp))
		}
		c.guarded = c.book.Guarded()
		if c.cooperative || inner.GetRebalanceProtocol() == "COOPERATIVE" {
			_ = inner.IncrementalUnassign(e.Partitions)
		} else {
			_ = inner.Unassign()
		}
		return err
	}
	return nil
}

type committedOffset struct {
	offset *int64
	mark   *protocol.CommitMark
}

// committed reads the group's committed offsets, retried for a minute: an unreadable offset must never
// be taken for "none" (a coordinator that moves refuses for a while).
func (c *Consumer) committed(inner *kafka.Consumer, partitions []kafka.TopicPartition) (map[protocol.TopicPartition]committedOffset, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		found, err := inner.Committed(partitions, 15000)
		if err == nil {
			for _, tp := range found {
				if tp.Error != nil {
					err = tp.Error
					break
				}
			}
		}
		if err == nil {
			out := map[protocol.TopicPartition]committedOffset{}
			for _, tp := range found {
				var co committedOffset
				if tp.Offset >= 0 {
					o := int64(tp.Offset)
					co.offset = &o
				}
				if tp.Metadata != nil {
					co.mark = protocol.DecodeMark(*tp.Metadata)
				}
				out[key(tp)] = co
			}
			return out, nil
		}
		var kerr kafka.Error
		if time.Now().After(deadline) || (errors.As(err, &kerr) && kerr.Code() == kafka.ErrDestroy) {
			return nil, fmt.Errorf("reading the live group's committed offsets: %w", err)
		}
		c.log.Warn("reading the live group's committed offsets failed, retrying", "error", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------------------------- the view

// refresh releases partitions whose sync is done and applies state changes; seeks back where the rules say.
func (c *Consumer) refresh() {
	version := c.follower.Version()
	seeks := map[protocol.TopicPartition]int64{}
	var snapshot map[protocol.TopicPartition]protocol.ActiveHandover
	if version != c.seenVer {
		c.seenVer = version
		snapshot = c.follower.Snapshot()
		for k, target := range c.book.Apply(snapshot) {
			seeks[k] = target
		}
	}
	var released []kafka.TopicPartition
	for k, part := range c.book.Parts {
		if part.Held() && c.follower.Synced(part.Ticket) {
			if snapshot == nil {
				snapshot = c.follower.Snapshot()
			}
			var active *protocol.ActiveHandover
			if a, ok := snapshot[k]; ok {
				active = &a
			}
			if target := c.book.Release(k, active); target != nil {
				seeks[k] = *target
			} else {
				c.ready = append(c.ready, c.waiting[k]...)
			}
			// (After a seek the kept records are read again from the seek target.)
			c.waitingCount -= len(c.waiting[k])
			delete(c.waiting, k)
			if !c.servicePaused[k] {
				released = append(released, tp(k, kafka.OffsetInvalid))
			}
		}
	}
	for k, target := range seeks {
		c.seek(k, target)
	}
	if len(released) > 0 {
		if err := c.Consumer.Resume(released); err != nil {
			c.log.Warn("resuming released partitions failed", "error", err)
		}
	}
	if snapshot != nil || len(released) > 0 {
		c.guarded = c.book.Guarded()
	}
	if c.holding {
		c.holding = false
		for _, part := range c.book.Parts {
			c.holding = c.holding || part.Held()
		}
	}
}

func tp(k protocol.TopicPartition, offset kafka.Offset) kafka.TopicPartition {
	topic := k.Topic
	return kafka.TopicPartition{Topic: &topic, Partition: k.Partition, Offset: offset}
}

func (c *Consumer) seek(k protocol.TopicPartition, target int64) {
	rules := c.book.Parts[k].Rules
	c.mu.Lock()
	c.stats.Seeks++
	c.mu.Unlock()
	replay := ""
	if rules.ReplayID != nil {
		replay = *rules.ReplayID
	} else if rules.RereadReplay != nil {
		replay = *rules.RereadReplay
	}
	c.log.Info("guard seeks back to the handover offset", "topic", k.Topic, "partition", k.Partition,
		"offset", target, "replay_id", replay)
	if _, err := c.Consumer.SeekPartitions([]kafka.TopicPartition{tp(k, kafka.Offset(target))}); err != nil {
		c.log.Warn("seek back failed", "topic", k.Topic, "partition", k.Partition, "error", err)
	}
}

// ---------------------------------------------------------------------------------------------- consuming

// Poll returns the next message or event the service is to see, blocking at most timeoutMs (-1: no limit).
// Records a Handover replay covers are not returned. Rebalance callbacks run inside, as with kafka.Consumer.
func (c *Consumer) Poll(timeoutMs int) kafka.Event {
	if !c.guarded && len(c.ready) == 0 && c.follower.Version() == c.seenVer {
		// No replay active and nothing kept: a record costs the offset's slot, no more. progress (a clock
		// read) runs every progressEvery records, and after any call that found none: its duties are paced in
		// milliseconds and seconds. The loop below takes over for anything else (and for the rest of the timeout).
		if c.sinceProgress++; c.sinceProgress >= progressEvery {
			c.sinceProgress = 0
			c.progress()
		}
		slice := 100
		if timeoutMs >= 0 && timeoutMs < slice {
			slice = timeoutMs
		}
		ev := c.next(slice)
		msg, ok := ev.(*kafka.Message)
		switch {
		case ev == nil:
			c.sinceProgress = progressEvery
			if timeoutMs >= 0 && timeoutMs <= slice {
				return nil
			}
			if timeoutMs > 0 {
				timeoutMs -= slice
			}
		case !ok || msg.TopicPartition.Error != nil || msg.TopicPartition.Topic == nil:
			c.sinceProgress = progressEvery
			return ev
		case !c.guarded:
			c.handUnguarded(msg)
			return msg
		default:
			// A rebalance inside that poll guarded new partitions: the loop judges the record.
			c.ready = append(c.ready, msg)
		}
	}
	var deadline time.Time
	if timeoutMs >= 0 {
		deadline = time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	}
	// Commits the guard makes are for records handed out by earlier calls: by calling again, the service is
	// done with those (the assumption librdkafka's automatic offset store makes).
	c.progress()
	touched := map[protocol.TopicPartition]bool{}
	defer func() { // records judged in this call: their stores and marks
		if len(touched) > 0 {
			c.afterBatch(touched)
		}
	}()
	for {
		if c.guarded || c.follower.Version() != c.seenVer {
			// Stores of the unguarded stretch go first: a store after the guard's own would move it back.
			c.flushPending()
			c.refresh()
		}
		slice := 100
		if c.holding {
			slice = 5 // partitions wait for the handover view: look again soon
		}
		if timeoutMs >= 0 {
			left := int(time.Until(deadline).Milliseconds())
			if left < slice {
				slice = max(0, left)
			}
		}
		var ev kafka.Event
		if len(c.ready) > 0 {
			ev = c.ready[0]
			// Dropped as handed: the kept records (up to maxWaiting of them, with their values) must not stay
			// reachable through the slice's array, where every garbage collection would mark them again.
			c.ready[0] = nil
			if c.ready = c.ready[1:]; len(c.ready) == 0 {
				c.ready = nil
			}
		} else {
			ev = c.next(slice)
		}
		if ev == nil {
			if len(touched) > 0 {
				c.afterBatch(touched)
				touched = map[protocol.TopicPartition]bool{}
			}
			c.progress()
			if timeoutMs >= 0 && !time.Now().Before(deadline) {
				return nil
			}
			continue
		}
		msg, ok := ev.(*kafka.Message)
		if !ok || msg.TopicPartition.Error != nil || msg.TopicPartition.Topic == nil {
			return ev
		}
		offset := int64(msg.TopicPartition.Offset)
		if !c.guarded {
			c.handUnguarded(msg)
			return msg
		}
		k := key(msg.TopicPartition)
		part := c.book.Parts[k]
		if part == nil {
			continue // revoked meanwhile
		}
		if part.Held() {
			// The view is not current yet: keep the record for the release. Past maxWaiting records in all,
			// pause the partition until then, keeping what it holds: librdkafka resumes a paused partition
			// after the last record Poll returned, and returns none of it from the moment Pause returns, so
			// nothing is read twice (putting the kept records back with a seek fetched them again, with
			// the partition's whole prefetched queue: most of a start's data when the view was slow).
			c.waiting[k] = append(c.waiting[k], msg)
			c.waitingCount++
			if c.waitingCount > maxWaiting {
				_ = c.Consumer.Pause([]kafka.TopicPartition{tp(k, kafka.OffsetInvalid)})
			}
			continue
		}
		touched[k] = true
		if c.book.Judge(k, offset, msg.Key, headers(msg), msg.Value) {
			c.handed.Add(1)
			return msg
		}
		c.skipped.Add(1)
	}
}

// handUnguarded: with no replay active the record goes to the service; its offset is stored a little later.
func (c *Consumer) handUnguarded(msg *kafka.Message) {
	offset := int64(msg.TopicPartition.Offset)
	if c.lastSlot != nil && msg.TopicPartition.Partition == c.lastPartition && *msg.TopicPartition.Topic == c.lastTopic {
		*c.lastSlot = offset + 1
	} else if k := key(msg.TopicPartition); c.book.Parts[k] != nil {
		slot := c.pending[k]
		if slot == nil {
			slot = new(int64)
			c.pending[k] = slot
		}
		*slot = offset + 1
		c.lastTopic, c.lastPartition, c.lastSlot = k.Topic, k.Partition, slot
	}
	c.handed.Add(1)
}

func headers(msg *kafka.Message) []protocol.Header {
	if len(msg.Headers) == 0 {
		return nil
	}
	out := make([]protocol.Header, len(msg.Headers))
	for i, h := range msg.Headers {
		out[i] = protocol.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func (c *Consumer) afterBatch(touched map[protocol.TopicPartition]bool) {
	var stores []protocol.Store
	for k := range touched {
		if _, ok := c.book.Parts[k]; !ok {
			continue
		}
		if s := c.book.AfterBatch(k); s != nil {
			stores = append(stores, *s)
		}
	}
	c.store(stores)
}

// ReadMessage polls for a message, as kafka.Consumer.ReadMessage does: other events are discarded, a
// timeout is (nil, kafka.Error with code ErrTimedOut).
func (c *Consumer) ReadMessage(timeout time.Duration) (*kafka.Message, error) {
	var deadline time.Time
	ms := int(timeout.Milliseconds())
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	} else if timeout < 0 {
		ms = -1
	}
	for {
		switch e := c.Poll(ms).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				return e, e.TopicPartition.Error
			}
			return e, nil
		case kafka.Error:
			return nil, e
		case nil:
			if ms >= 0 && (timeout == 0 || !time.Now().Before(deadline)) {
				return nil, kafka.NewError(kafka.ErrTimedOut, "timed out", false)
			}
		}
		if timeout > 0 {
			ms = max(0, int(time.Until(deadline).Milliseconds()))
		}
	}
}

// ---------------------------------------------------------------------------------------------- storing, committing

func (c *Consumer) flushPending() {
	if len(c.pending) == 0 {
		return
	}
	positions := make(map[protocol.TopicPartition]int64, len(c.pending))
	for k, slot := range c.pending {
		positions[k] = *slot
	}
	c.pending = map[protocol.TopicPartition]*int64{}
	c.lastSlot = nil
	c.store(c.book.HandedUnguarded(positions))
}

func offsetsOf(stores []protocol.Store) []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, 0, len(stores))
	for _, s := range stores {
		t := tp(protocol.TopicPartition{Topic: s.Topic, Partition: s.Partition}, kafka.Offset(s.Offset))
		if s.Metadata != nil {
			stored := protocol.StoredMetadata(*s.Metadata)
			t.Metadata = &stored
		}
		out = append(out, t)
	}
	return out
}

func (c *Consumer) store(stores []protocol.Store) {
	if len(stores) == 0 {
		return
	}
	if _, err := c.Consumer.StoreOffsets(offsetsOf(stores)); err != nil {
		c.log.Debug("storing offsets failed (partition no longer assigned)", "error", err)
	}
}

func (c *Consumer) marked(offsets []kafka.TopicPartition) []kafka.TopicPartition {
	stores := make([]protocol.Store, 0, len(offsets))
	for _, o := range offsets {
		stores = append(stores, c.book.ServiceStore(*o.Topic, o.Partition, int64(o.Offset), o.Metadata))
	}
	return offsetsOf(stores)
}

// StoreOffsets stores what the service processed, with the guard's mark attached.
func (c *Consumer) StoreOffsets(offsets []kafka.TopicPartition) ([]kafka.TopicPartition, error) {
	c.flushPending()
	return c.Consumer.StoreOffsets(c.marked(offsets))
}

// StoreMessage stores the offset after msg.
func (c *Consumer) StoreMessage(msg *kafka.Message) ([]kafka.TopicPartition, error) {
	if msg.TopicPartition.Error != nil || msg.TopicPartition.Offset < 0 {
		return c.Consumer.StoreMessage(msg)
	}
	t := msg.TopicPartition
	t.Offset++
	return c.StoreOffsets([]kafka.TopicPartition{t})
}

// Commit commits what is stored, explicitly with each partition's mark: while the guard re-reads after a
// handover the stored offsets are below the committed ones, and librdkafka would send nothing.
func (c *Consumer) Commit() ([]kafka.TopicPartition, error) {
	c.flushPending()
	stores := c.book.StoredOffsets()
	if len(stores) == 0 {
		return c.Consumer.Commit()
	}
	return c.Consumer.CommitOffsets(offsetsOf(stores))
}

// CommitMessage commits the offset after msg, with the guard's mark.
func (c *Consumer) CommitMessage(msg *kafka.Message) ([]kafka.TopicPartition, error) {
	if msg.TopicPartition.Error != nil || msg.TopicPartition.Offset < 0 {
		return c.Consumer.CommitMessage(msg)
	}
	t := msg.TopicPartition
	t.Offset++
	return c.CommitOffsets([]kafka.TopicPartition{t})
}

// CommitOffsets commits explicit offsets, with the guard's mark.
func (c *Consumer) CommitOffsets(offsets []kafka.TopicPartition) ([]kafka.TopicPartition, error) {
	c.flushPending()
	return c.Consumer.CommitOffsets(c.marked(offsets))
}

// commitGuardStores commits the guard's own stores of revoked partitions before they go.
func (c *Consumer) commitGuardStores(partitions []kafka.TopicPartition) {
	revoked := map[protocol.TopicPartition]bool{}
	for _, t := range partitions {
		revoked[key(t)] = true
	}
	var mine []protocol.Store
	for _, s := range c.book.TakeGuardCommits() {
		if revoked[protocol.TopicPartition{Topic: s.Topic, Partition: s.Partition}] {
			mine = append(mine, s)
		} else if part := c.book.Parts[protocol.TopicPartition{Topic: s.Topic, Partition: s.Partition}]; part != nil {
			store := s
			part.GuardCommit = &store // not revoked: committed with the next call as usual
		}
	}
	if len(mine) > 0 {
		if _, err := c.Consumer.CommitOffsets(offsetsOf(mine)); err != nil {
			c.log.Warn("committing the guard's stores on revoke failed", "error", err)
		}
	}
}

// ---------------------------------------------------------------------------------------------- pause, resume, seek

// Pause pauses partitions for the service; the guard will not resume them when it releases them.
func (c *Consumer) Pause(partitions []kafka.TopicPartition) error {
	for _, t := range partitions {
		c.servicePaused[key(t)] = true
	}
	return c.Consumer.Pause(partitions)
}

// Resume resumes partitions the service paused, except those the guard still holds for the handover view.
func (c *Consumer) Resume(partitions []kafka.TopicPartition) error {
	var now []kafka.TopicPartition
	for _, t := range partitions {
		k := key(t)
		delete(c.servicePaused, k)
		if part := c.book.Parts[k]; part == nil || !part.Held() {
			now = append(now, t)
		}
	}
	if len(now) == 0 {
		return nil
	}
	return c.Consumer.Resume(now)
}

// SeekPartitions moves the service's read position; the guard's seen-until follows, so its own stores
// never run ahead of what the service will read again.
func (c *Consumer) SeekPartitions(partitions []kafka.TopicPartition) ([]kafka.TopicPartition, error) {
	c.flushPending()
	for _, t := range partitions {
		if part := c.book.Parts[key(t)]; part != nil && t.Offset >= 0 {
			o := int64(t.Offset)
			part.Rules.SeenUntil = &o
			part.HandedUntil = nil
			part.GuardCommit = nil
		}
	}
	return c.Consumer.SeekPartitions(partitions)
}

// Seek moves one partition's read position (see SeekPartitions).
func (c *Consumer) Seek(partition kafka.TopicPartition, ignoredTimeoutMs int) error {
	_, err := c.SeekPartitions([]kafka.TopicPartition{partition})
	return err
}

// ---------------------------------------------------------------------------------------------- progress

// progress: pending stores, the guard's own commits every call; guard records, floor commits and the list
// of partitions to acknowledge about once a ProgressInterval.
func (c *Consumer) progress() {
	// With no replay active, the stores of handed records are batched: one call every few milliseconds
	// instead of one per record (librdkafka's automatic commit reads them every auto.commit.interval.ms).
	now := time.Now()
	if c.guarded || now.Sub(c.lastFlush) >= 20*time.Millisecond {
		c.flushPending()
		c.lastFlush = now
	}
	if !c.guarded && len(c.book.Parts) > 0 && now.Sub(c.lastReport) < c.interval {
		return
	}
	if commits := c.book.TakeGuardCommits(); len(commits) > 0 {
		// librdkafka would not send these (see protocol.GuardBook); the service believes they are committed
		// once it commits.
		if _, err := c.Consumer.CommitOffsets(offsetsOf(commits)); err != nil {
			c.log.Debug("the guard's own commit failed", "error", err)
		}
	}
	if time.Since(c.lastReport) < c.interval {
		return
	}
	c.lastReport = time.Now()
	for _, r := range c.book.SkipReports() {
		c.publish(protocol.GuardInfo{ReplayID: r.ReplayID, Topic: r.Topic, Partition: r.Partition,
			FirstSkipped: protocol.Int64(r.FirstSkipped), SeenUntil: protocol.Int64(r.SeenUntil), Member: c.member,
			AtMs: time.Now().UnixMilli()})
	}
	for _, p := range c.book.ProblemReports() {
		// Once per partition and problem: the guard skips nothing here for this replay (at-least-once).
		c.log.Warn("guard cannot follow the replay on this partition and skips nothing for it", "topic", p.Topic,
			"partition", p.Partition, "replay_id", p.ReplayID, "problem", p.Problem)
		if p.ReplayID != "" {
			c.publish(protocol.GuardInfo{ReplayID: p.ReplayID, Topic: p.Topic, Partition: p.Partition,
				FirstSkipped: p.FirstSkipped, SeenUntil: p.SeenUntil, Member: c.member, AtMs: time.Now().UnixMilli(),
				Problem: protocol.String(p.Problem)})
		}
	}
	for _, s := range c.book.FloorCommits(c.position) {
		offsets := offsetsOf([]protocol.Store{s})
		// Stored too, so a later automatic commit of the stored offset cannot move the group below H.
		if _, err := c.Consumer.StoreOffsets(offsets); err != nil {
			c.log.Warn("storing the handover offset of a quiet partition failed", "error", err)
			continue
		}
		if _, err := c.Consumer.CommitOffsets(offsets); err != nil {
			c.log.Warn("committing the handover offset of a quiet partition failed", "error", err)
			continue
		}
		c.book.FloorDone(s)
	}
	active := 0
	for _, p := range c.book.Parts {
		if p.Rules.Start != nil {
			active++
		}
	}
	acks := c.book.PendingAcks()
	c.mu.Lock()
	c.pendingAcks = acks
	c.stats.ActivePartitions = active
	c.mu.Unlock()
}

func (c *Consumer) position(k protocol.TopicPartition) *int64 {
	found, err := c.Consumer.Position([]kafka.TopicPartition{tp(k, kafka.OffsetInvalid)})
	if err != nil || len(found) == 0 || found[0].Offset < 0 {
		return nil
	}
	o := int64(found[0].Offset)
	return &o
}

func (c *Consumer) publisher() (*kafka.Producer, error) {
	c.producerMu.Lock()
	defer c.producerMu.Unlock()
	if c.producer == nil {
		p, err := kafka.NewProducer(handovertopic.ProducerConfig(c.base, kafka.ConfigMap{"linger.ms": 5}))
		if err != nil {
			return nil, fmt.Errorf("the guard's producer: %w", err)
		}
		go func() {
			for range p.Events() {
			}
		}()
		c.producer = p
	}
	return c.producer, nil
}

// flushProducer waits for what was published (nothing to do when nothing ever was).
func (c *Consumer) flushProducer() {
	c.producerMu.Lock()
	p := c.producer
	c.producerMu.Unlock()
	if p != nil {
		p.Flush(10000)
	}
}

func (c *Consumer) publish(r protocol.Record) {
	k, v := protocol.Encode(r)
	topic := c.topic
	producer, err := c.publisher()
	if err != nil {
		c.log.Warn("publishing a handover record failed", "kind", r.Kind(), "error", err)
		return
	}
	err = producer.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Key: k, Value: v}, nil)
	if err != nil {
		c.log.Warn("publishing a handover record failed", "kind", r.Kind(), "error", err)
	}
}

// tick runs in the follower's goroutine: acknowledge partitions whose H the live group has committed past.
func (c *Consumer) tick() {
	if time.Since(c.lastAckCheck) < c.interval {
		return
	}
	c.lastAckCheck = time.Now()
	c.mu.Lock()
	pending := c.pendingAcks
	c.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	todo := map[protocol.TopicPartition]protocol.PendingAck{}
	c.follower.WithView(func(view *protocol.HandoverView) {
		for k, p := range pending {
			// Only while the replay still says this H: after a cleanup an ack would bring a key back.
			part := view.Replay(p.ReplayID).Partitions[k]
			if part == nil || part.Handover == nil || part.Handover.Offset != p.Handover {
				continue
			}
			if part.Ack != nil && part.Ack.Offset == p.Handover {
				continue
			}
			todo[k] = p
		}
	})
	if len(todo) == 0 {
		return
	}
	if c.offsetsReader == nil {
		// A consumer with the live group's id that never subscribes: reads the group's offsets with their
		// metadata without joining it.
		reader, err := kafka.NewConsumer(handovertopic.With(c.base, kafka.ConfigMap{"group.id": c.group,
			"enable.auto.commit": false}))
		if err != nil {
			c.log.Warn("the guard's offset reader", "error", err)
			return
		}
		c.offsetsReader = reader
	}
	var parts []kafka.TopicPartition
	for k := range todo {
		parts = append(parts, tp(k, kafka.OffsetInvalid))
	}
	found, err := c.offsetsReader.Committed(parts, 15000)
	if err != nil {
		c.log.Warn("reading the live group's offsets for acknowledgements failed", "error", err)
		return
	}
	for _, t := range found {
		if t.Error != nil {
			continue
		}
		k := key(t)
		p := todo[k]
		var committed *int64
		if t.Offset >= 0 {
			o := int64(t.Offset)
			committed = &o
		}
		var mark *protocol.CommitMark
		if t.Metadata != nil {
			mark = protocol.DecodeMark(*t.Metadata)
		}
		if protocol.AckDue(p.Handover, committed, mark) {
			c.publish(protocol.AckInfo{ReplayID: p.ReplayID, Topic: k.Topic, Partition: k.Partition, Offset: p.Handover,
				Committed: *committed, Member: c.member, AtMs: time.Now().UnixMilli()})
			c.mu.Lock()
			c.stats.Acks++
			c.mu.Unlock()
			c.log.Info("handover acknowledged", "replay_id", p.ReplayID, "topic", k.Topic, "partition", k.Partition,
				"handover_offset", p.Handover, "committed", *committed)
		}
	}
	c.flushProducer()
}

// ---------------------------------------------------------------------------------------------- close

// Close stores what was handed, leaves the group (librdkafka commits stored offsets when auto commit is on)
// and stops the guard's own clients.
func (c *Consumer) Close() error {
	if c.closing {
		return nil // closed already: librdkafka handles must not be closed twice
	}
	c.flushPending()
	c.closing = true
	err := c.Consumer.Close()
	c.follower.Stop()
	c.flushProducer()
	c.producerMu.Lock()
	if c.producer != nil {
		c.producer.Close()
	}
	c.producerMu.Unlock()
	if c.offsetsReader != nil {
		c.offsetsReader.Close()
	}
	return err
}
