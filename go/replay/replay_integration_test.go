package replay_test

// The replay role on the real broker: the bootstrap resolves S once however many replicas race for it;
// replicas that join and leave (rebalances) and a restart neither replay twice nor lose a record; Drain
// finishes; and a Handover with a guarded live group processes every record from the live group's start
// on exactly once across the two groups.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/guard"
	"reprise.io/kafka/internal/kafkatest"
	"reprise.io/kafka/protocol"
	"reprise.io/kafka/replay"
)

// ledger counts how often each (partition, offset) was processed.
type ledger struct {
	mu     sync.Mutex
	counts map[[2]int64]int
	by     map[string]int
}

func newLedger() *ledger { return &ledger{counts: map[[2]int64]int{}, by: map[string]int{}} }

// handlerOf tags what one replica processed.
func (l *ledger) handlerOf(member string) replay.Handler {
	return replay.HandlerFunc(func(_ context.Context, records []*kafka.Message) error {
		for _, m := range records {
			l.add(m)
		}
		l.mu.Lock()
		l.by[member] += len(records)
		l.mu.Unlock()
		return nil
	})
}

func (l *ledger) processedBy(member string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[member]
}

func (l *ledger) add(m *kafka.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[[2]int64{int64(m.TopicPartition.Partition), int64(m.TopicPartition.Offset)}]++
}

func (l *ledger) handler() replay.Handler {
	return replay.HandlerFunc(func(_ context.Context, records []*kafka.Message) error {
		for _, m := range records {
			l.add(m)
		}
		return nil
	})
}

func (l *ledger) snapshot() map[[2]int64]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[[2]int64]int, len(l.counts))
	for k, v := range l.counts {
		out[k] = v
	}
	return out
}

func (l *ledger) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.counts)
}

func settings(t *testing.T, topic, handover, mode, liveGroup string) replay.Settings {
	return replay.Settings{BootstrapServers: kafkatest.Bootstrap(t), ReplayID: "test/" + topic, Topics: []string{topic},
		Role: "replay", Mode: mode, ReplayGroup: "replay-" + topic, LiveGroup: liveGroup,
		Start: protocol.StartSpec{Kind: "earliest"}, HandoverTopic: handover, PoisonPolicy: "skip", HandlerRetries: 0,
		BatchSize: 50, CheckInterval: 200 * time.Millisecond, MemberName: "replica", LogLevel: "INFO"}
}

func records(n, partitions int, value func(i int) string) []kafkatest.Record {
	out := make([]kafkatest.Record, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, kafkatest.Record{Partition: int32(i % partitions), Key: fmt.Sprint(i), Value: value(i)})
	}
	return out
}

func plain(i int) string { return fmt.Sprintf(`{"n":%d}`, i) }

// replica runs one replica of the replay role until stopped.
type replica struct {
	cancel context.CancelFunc
	done   chan error
}

func start(s replay.Settings, h replay.Handler, member string) *replica {
	ctx, cancel := context.WithCancel(context.Background())
	s.MemberName = member
	r := &replica{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- replay.Run(ctx, s, h) }()
	return r
}

func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("replica stopped with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("replica did not stop within 60s")
	}
}

// describeGroup describes a consumer group (false while the broker cannot say).
func describeGroup(t *testing.T, group string) (kafka.ConsumerGroupDescription, bool) {
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": kafkatest.Bootstrap(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	found, err := admin.DescribeConsumerGroups(ctx, []string{group})
	if err != nil || len(found.ConsumerGroupDescriptions) != 1 || found.ConsumerGroupDescriptions[0].Error.Code() != kafka.ErrNoError {
		return kafka.ConsumerGroupDescription{}, false
	}
	return found.ConsumerGroupDescriptions[0], true
}

// holds is how many partitions the replica named member holds in a stable group (its client.id is
// "reprise-" + member).
func holds(t *testing.T, group, member string) int {
	d, ok := describeGroup(t, group)
	if !ok || d.State != kafka.ConsumerGroupStateStable {
		return 0
	}
	for _, m := range d.Members {
		if m.ClientID == "reprise-"+member {
			return len(m.Assignment.TopicPartitions)
		}
	}
	return 0
}

func TestBootstrapResolvesStartOnce(t *testing.T) {
	topic := kafkatest.Name(t, "events")
	handoverName := kafkatest.Name(t, "handover")
	kafkatest.CreateTopic(t, topic, 3)
	kafkatest.Produce(t, topic, records(30, 3, plain))
	s := settings(t, topic, handoverName, protocol.ModeDrain, "")
	s.Start = protocol.StartSpec{Kind: "duration", DurationS: 3600}
	base := kafka.ConfigMap{"bootstrap.servers": kafkatest.Bootstrap(t)}
	// Several replicas race for the bootstrap.
	var wg sync.WaitGroup
	results := make([]map[protocol.TopicPartition]int64, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			state, err := replay.Bootstrap(context.Background(), s, base)
			errs[i] = err
			if err == nil {
				results[i] = state.StartOffsets()
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("bootstrapper %d: %v", i, err)
		}
	}
	for i := range results {
		if fmt.Sprint(results[i]) != fmt.Sprint(results[0]) || len(results[i]) != 3 {
			t.Fatalf("bootstrappers disagree: %v vs %v", results[i], results[0])
		}
	}
	// More records, and a bootstrapper that would now resolve differently: the start stays what it was.
	kafkatest.Produce(t, topic, records(30, 3, plain))
	s.Start = protocol.StartSpec{Kind: "offsets", Offsets: protocol.PartitionOffsets{topic: {0: 20, 1: 20, 2: 20}}}
	again, err := replay.Bootstrap(context.Background(), s, base)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(again.StartOffsets()) != fmt.Sprint(results[0]) {
		t.Fatalf("the start moved: %v, first %v", again.StartOffsets(), results[0])
	}
	// The handover topic holds one replay record and one start record per partition (one transaction won),
	// and the replay group's committed offsets equal the published starts.
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": kafkatest.Bootstrap(t), "group.id": "reader",
		"isolation.level": "read_committed", "enable.partition.eof": true, "auto.offset.reset": "earliest"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &handoverName, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for done := false; !done; {
		switch e := c.Poll(5000).(type) {
		case *kafka.Message:
			if k, err := protocol.DecodeKey(e.Key); err == nil && k.ReplayID == s.ReplayID && e.Value != nil {
				kinds[k.Kind]++
			}
		case kafka.PartitionEOF, nil:
			done = true
		}
	}
	if kinds[protocol.KindReplay] != 1 || kinds[protocol.KindStart] != 3 {
		t.Fatalf("records in the handover topic: %v, want 1 replay and 3 start records", kinds)
	}
	for tp, start := range results[0] {
		offset, _ := kafkatest.Committed(t, s.ReplayGroup, tp.Topic, tp.Partition)
		if offset != start {
			t.Fatalf("%v: replay group committed %d, published start %d", tp, offset, start)
		}
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestDrainWithReplicasJoiningAndLeaving(t *testing.T) {
	topic := kafkatest.Name(t, "events")
	handoverName := kafkatest.Name(t, "handover")
	kafkatest.CreateTopic(t, topic, 4)
	const n = 4000
	kafkatest.Produce(t, topic, records(n, 4, plain))
	s := settings(t, topic, handoverName, protocol.ModeDrain, "")
	s.MaxRecordsPerSecond = 300 // slow enough that replicas join and leave while it runs (per replica)
	port := freePort(t)
	first := s
	first.MetricsPort = port
	l := newLedger()
	// Replicas start one after another, as a Deployment scales up, and one leaves (SIGTERM) midway.
	r1 := start(first, l.handlerOf("replica-1"), "replica-1")
	kafkatest.Eventually(t, 60*time.Second, "the first replica is reading", func() bool { return l.size() > 200 })
	r2 := start(s, l.handlerOf("replica-2"), "replica-2")
	kafkatest.Eventually(t, 60*time.Second, "the second replica took partitions (a rebalance)", func() bool {
		return l.processedBy("replica-2") > 200
	})
	// /metrics and /healthz of the first replica.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "reprise_worker_records_delivered_total") {
		t.Fatalf("/metrics: %s", body)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	r1.stop(t)
	r3 := start(s, l.handlerOf("replica-3"), "replica-3")
	topicClient := kafkatest.Handover(t, handoverName)
	// Eager round robin may give the third replica only partitions already finished: it is enough that it
	// took partitions (a rebalance) while the replay ran.
	kafkatest.Eventually(t, 120*time.Second, "the third replica took partitions", func() bool {
		return holds(t, s.ReplayGroup, "replica-3") > 0
	})
	kafkatest.Eventually(t, 120*time.Second, "every partition drained and handed over", func() bool {
		state, err := topicClient.ReadReplay(context.Background(), s.ReplayID)
		return err == nil && state.AllHandedOver()
	})
	r2.stop(t)
	r3.stop(t)
	requireEachOnce(t, l, n, "graceful joins and leaves must not replay")
	counts := l.snapshot()
	state, _ := topicClient.ReadReplay(context.Background(), s.ReplayID)
	for tp, h := range state.HandoverOffsets() {
		if h != n/4 {
			t.Fatalf("%v: H = %d, want %d (the end of the partition)", tp, h, n/4)
		}
		offset, metadata := kafkatest.Committed(t, s.ReplayGroup, tp.Topic, tp.Partition)
		mark := protocol.DecodeMark(metadata)
		if offset != h || mark == nil || mark.Finished == nil || *mark.Finished != protocol.ReasonEndOfPartition {
			t.Fatalf("%v: committed %d %q, want %d with the finished mark", tp, offset, metadata, h)
		}
	}
	// A restart resumes from the committed offsets: nothing is replayed again.
	r4 := start(s, l.handler(), "replica-4")
	time.Sleep(3 * time.Second) // give it the chance to do wrong
	r4.stop(t)
	if after := l.snapshot(); fmt.Sprint(after) != fmt.Sprint(counts) {
		t.Fatalf("a restarted replica processed records again")
	}
}

// TestReplicasStartingTogether: three replicas of one replay start at once, as a Deployment's pods do. The
// group is eager round robin: each join revokes every partition and assigns all again, often giving a replica
// back what it held, and the records it had read meanwhile are read again from the committed offset. Every
// replica takes a share, and every record is processed exactly once.
func TestReplicasStartingTogether(t *testing.T) {
	topic := kafkatest.Name(t, "events")
	handoverName := kafkatest.Name(t, "handover")
	kafkatest.CreateTopic(t, topic, 6)
	const n = 3000
	kafkatest.Produce(t, topic, records(n, 6, plain))
	s := settings(t, topic, handoverName, protocol.ModeDrain, "")
	s.MaxRecordsPerSecond = 200 // per replica: the replay outlasts the replicas' joins
	l := newLedger()
	members := []string{"replica-1", "replica-2", "replica-3"}
	var replicas []*replica
	for _, m := range members {
		replicas = append(replicas, start(s, l.handlerOf(m), m))
	}
	var group kafka.ConsumerGroupDescription
	kafkatest.Eventually(t, 60*time.Second, "the replay group is stable with the three replicas", func() bool {
		var ok bool
		group, ok = describeGroup(t, s.ReplayGroup)
		return ok && group.State == kafka.ConsumerGroupStateStable && len(group.Members) == len(members)
	})
	if group.PartitionAssignor != replay.ReplayAssignment {
		t.Fatalf("the replay group's assignor is %q, want %q (eager)", group.PartitionAssignor, replay.ReplayAssignment)
	}
	for _, m := range group.Members {
		if got := len(m.Assignment.TopicPartitions); got != 2 {
			t.Fatalf("member %s holds %d partitions, want 2 of 6 (round robin)", m.ClientID, got)
		}
	}
	topicClient := kafkatest.Handover(t, handoverName)
	kafkatest.Eventually(t, 120*time.Second, "every partition drained and handed over", func() bool {
		state, err := topicClient.ReadReplay(context.Background(), s.ReplayID)
		return err == nil && state.AllHandedOver()
	})
	for _, r := range replicas {
		r.stop(t)
	}
	requireEachOnce(t, l, n, "rebalances while starting must not replay")
	state, _ := topicClient.ReadReplay(context.Background(), s.ReplayID)
	for tp, h := range state.HandoverOffsets() {
		if h != n/6 {
			t.Fatalf("%v: H = %d, want %d (the end of the partition)", tp, h, n/6)
		}
	}
}

// TestHandoverExactlyOnceWithTheGuard: a live group (guarded) consumes while producers write; a Handover
// replay from the earliest offset runs in two replicas; from the live group's committed offset at the
// replay's start on, each record is processed by exactly one group.
func TestHandoverExactlyOnceWithTheGuard(t *testing.T) {
	topic := kafkatest.Name(t, "events")
	handoverName := kafkatest.Name(t, "handover")
	liveGroup := kafkatest.Name(t, "live")
	kafkatest.CreateTopic(t, topic, 3)
	kafkatest.Produce(t, topic, records(600, 3, plain))
	liveLedger, replayLedger := newLedger(), newLedger()
	// The handover topic exists before the live service starts, as the operator makes sure it does (a guard
	// looks for a missing one only every few seconds).
	topicClient := kafkatest.Handover(t, handoverName)
	conf := kafka.ConfigMap{"bootstrap.servers": kafkatest.Bootstrap(t), "group.id": liveGroup,
		"auto.offset.reset": "earliest", "auto.commit.interval.ms": 200}
	live, err := guard.NewConsumer(&conf, guard.Options{HandoverTopic: handoverName, Member: "live-1",
		ProgressInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.SubscribeTopics([]string{topic}, nil); err != nil {
		t.Fatal(err)
	}
	stopLive := make(chan struct{})
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		defer live.Close()
		for {
			select {
			case <-stopLive:
				return
			default:
			}
			if m, err := live.ReadMessage(100 * time.Millisecond); err == nil {
				liveLedger.add(m)
			}
		}
	}()
	kafkatest.Eventually(t, 60*time.Second, "the live group has read the history", func() bool { return liveLedger.size() >= 600 })
	var c0 [3]int64
	kafkatest.Eventually(t, 30*time.Second, "the live group committed the history", func() bool {
		for p := int32(0); p < 3; p++ {
			c0[p], _ = kafkatest.Committed(t, liveGroup, topic, p)
			if c0[p] < 200 {
				return false
			}
		}
		return true
	})
	// Producers keep writing while the replay runs.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < 10; i++ {
			kafkatest.Produce(t, topic, records(60, 3, plain))
			time.Sleep(300 * time.Millisecond)
		}
	}()
	s := settings(t, topic, handoverName, protocol.ModeHandover, liveGroup)
	// Slower than the history plus what the producers write, at first: the guard skips while the replay
	// catches up (a replay that reaches the end before any new record has nothing to hand over).
	s.MaxRecordsPerSecond = 200
	r1 := start(s, replayLedger.handler(), "replica-1")
	time.Sleep(500 * time.Millisecond)
	r2 := start(s, replayLedger.handler(), "replica-2")
	kafkatest.Eventually(t, 180*time.Second, "every partition handed over and acknowledged", func() bool {
		state, err := topicClient.ReadReplay(context.Background(), s.ReplayID)
		return err == nil && state.Complete()
	})
	<-produced
	total := 600 + 10*60
	kafkatest.Eventually(t, 60*time.Second, "the live group read everything produced", func() bool {
		live := liveLedger.snapshot()
		replayed := replayLedger.snapshot()
		seen := 0
		for p := int64(0); p < 3; p++ {
			for o := int64(0); o < int64(total/3); o++ {
				if live[[2]int64{p, o}] > 0 || replayed[[2]int64{p, o}] > 0 {
					seen++
				}
			}
		}
		return seen == total
	})
	close(stopLive)
	<-liveDone
	r1.stop(t)
	r2.stop(t)
	liveCounts, replayCounts := liveLedger.snapshot(), replayLedger.snapshot()
	state, err := topicClient.ReadReplay(context.Background(), s.ReplayID)
	if err != nil {
		t.Fatal(err)
	}
	// One H per partition: a second finish at another offset means the next owner found no `finished` mark
	// (a late commit erased it) and read on past the first H.
	for k, offsets := range handoverOffsets(t, handoverName, s.ReplayID) {
		if len(offsets) != 1 {
			t.Fatalf("%v: H published at %v: a partition finished twice (its finished mark was lost)", k, offsets)
		}
	}
	both, skippedFrom := 0, 0
	for p := int64(0); p < 3; p++ {
		part := state.Partitions[protocol.TopicPartition{Topic: topic, Partition: int32(p)}]
		h := part.Handover.Offset
		first := int64(1 << 62) // nothing skipped: the live group processed all it read
		if part.Guard != nil && part.Guard.FirstSkipped != nil {
			first = *part.Guard.FirstSkipped
			skippedFrom++
		}
		for o := int64(0); o < int64(total/3); o++ {
			k := [2]int64{p, o}
			switch {
			case o < h && replayCounts[k] != 1:
				t.Fatalf("%v below H %d: replayed %d times", k, h, replayCounts[k])
			case o >= h && replayCounts[k] != 0:
				t.Fatalf("%v at or above H %d: replayed", k, h)
			case o >= c0[p] && o < first && liveCounts[k] != 1:
				t.Fatalf("%v: the live group processed it %d times before skipping began at %d", k, liveCounts[k], first)
			case o >= first && liveCounts[k]+replayCounts[k] != 1:
				t.Fatalf("%v from F=%d on: live %d, replay %d: want exactly one group once", k, first, liveCounts[k], replayCounts[k])
			}
			if o >= first && liveCounts[k] > 0 && replayCounts[k] > 0 {
				both++
			}
		}
	}
	if both != 0 {
		t.Fatalf("%d records processed by both groups from the first skipped offset on", both)
	}
	if skippedFrom == 0 {
		t.Fatal("the guard skipped nothing: the test did not exercise the handover")
	}
}

// handoverOffsets reads every `handover` record of the replay on the handover topic (a view keeps only the last
// per partition): the distinct H offsets published for each partition.
func handoverOffsets(t *testing.T, topic, replayID string) map[protocol.TopicPartition][]int64 {
	t.Helper()
	reader, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": kafkatest.Bootstrap(t),
		"group.id": kafkatest.Name(t, "handover-reader"), "enable.auto.commit": false})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	_, high, err := reader.QueryWatermarkOffsets(topic, 0, 15000)
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		t.Fatal(err)
	}
	seen := map[protocol.TopicPartition]map[int64]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for at := int64(0); at < high; {
		if time.Now().After(deadline) {
			t.Fatalf("reading the handover topic: at %d of %d after 30s", at, high)
		}
		m, err := reader.ReadMessage(time.Second)
		if err != nil {
			continue
		}
		at = int64(m.TopicPartition.Offset) + 1
		if m.Value == nil {
			continue // a tombstone
		}
		_, record, err := protocol.Decode(m.Key, m.Value)
		if h, ok := record.(protocol.HandoverInfo); err == nil && ok && h.ReplayID == replayID {
			k := protocol.TopicPartition{Topic: h.Topic, Partition: h.Partition}
			if seen[k] == nil {
				seen[k] = map[int64]bool{}
			}
			seen[k][h.Offset] = true
		}
	}
	out := map[protocol.TopicPartition][]int64{}
	for k, offsets := range seen {
		for o := range offsets {
			out[k] = append(out[k], o)
		}
	}
	return out
}

// TestPoisonRecordsAreDeadLetteredOrSkipped: a value the filter cannot decode, and a record the handler
// keeps failing on, go to the dead-letter topic with their origin; without one they are counted and
// skipped. Never a crash loop, and every other record is delivered once.
func TestPoisonRecordsAreDeadLetteredOrSkipped(t *testing.T) {
	for _, withDLQ := range []bool{true, false} {
		t.Run(fmt.Sprintf("dlq=%v", withDLQ), func(t *testing.T) {
			topic := kafkatest.Name(t, "events")
			handoverName := kafkatest.Name(t, "handover")
			kafkatest.CreateTopic(t, topic, 2)
			kafkatest.Produce(t, topic, records(100, 2, func(i int) string {
				switch i {
				case 10:
					return `not json but says "paid"`
				case 33:
					return `{"kind":"paid","fail":true}`
				}
				return `{"kind":"paid"}`
			}))
			s := settings(t, topic, handoverName, protocol.ModeDrain, "")
			s.Filter, _ = protocol.ParseFilterSpec(`{"json":[{"path":"kind","equals":"paid"}]}`, "filter")
			s.HandlerRetries = 1
			s.ExitWhenDone = true
			dlq := kafkatest.Name(t, "dlq")
			if withDLQ {
				kafkatest.CreateTopic(t, dlq, 1)
				s.DLQTopic, s.PoisonPolicy = dlq, "dead-letter"
			}
			l := newLedger()
			failing := replay.HandlerFunc(func(ctx context.Context, batch []*kafka.Message) error {
				for _, m := range batch {
					if strings.Contains(string(m.Value), "fail") {
						return fmt.Errorf("cannot apply %s", m.Value)
					}
				}
				return l.handler().HandleRecords(ctx, batch)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			if err := replay.Run(ctx, s, failing); err != nil {
				t.Fatalf("the replay stopped with %v", err)
			}
			counts := l.snapshot()
			for k, c := range counts {
				if c != 1 {
					t.Fatalf("%v delivered %d times", k, c)
				}
			}
			if len(counts) != 98 {
				t.Fatalf("delivered %d records, want 98 (100 less two poison records)", len(counts))
			}
			if !withDLQ {
				return
			}
			c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": kafkatest.Bootstrap(t), "group.id": "dlq-reader",
				"enable.partition.eof": true, "auto.offset.reset": "earliest"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.Assign([]kafka.TopicPartition{{Topic: &dlq, Partition: 0, Offset: kafka.OffsetBeginning}})
			reasons := map[string]string{}
			for done := false; !done; {
				switch e := c.Poll(5000).(type) {
				case *kafka.Message:
					h := map[string]string{}
					for _, x := range e.Headers {
						h[x.Key] = string(x.Value)
					}
					reasons[h["reprise.source.partition"]+"@"+h["reprise.source.offset"]] = h["reprise.error"]
				case kafka.PartitionEOF, nil:
					done = true
				}
			}
			if len(reasons) != 2 || !strings.HasPrefix(reasons["0@5"], "undecodable") ||
				!strings.HasPrefix(reasons["1@16"], "handler failed") {
				t.Fatalf("dead letters %v", reasons)
			}
		})
	}
}

// requireEachOnce fails the test unless the ledger holds n distinct records, each processed once; why says what
// a record processed twice would mean.
func requireEachOnce(t *testing.T, l *ledger, n int, why string) {
	t.Helper()
	counts := l.snapshot()
	if len(counts) != n {
		t.Fatalf("processed %d distinct records, want %d", len(counts), n)
	}
	for k, c := range counts {
		if c != 1 {
			t.Fatalf("record %v processed %d times (%s)", k, c, why)
		}
	}
}
