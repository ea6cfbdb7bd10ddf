package guard_test

// The guard on the real broker: it skips the matching records of [S, H), seeks back when H becomes known,
// records its state in commit marks (and a new owner restores it from them), and acknowledges the handover.
// The replay's side is played by writing its handover records directly.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/guard"
	"reprise.io/kafka/internal/kafkatest"
	"reprise.io/kafka/protocol"
)

// service is a live service's consumer loop with a ledger of the offsets it processed.
type service struct {
	t        *testing.T
	consumer *guard.Consumer
	manual   bool
	ledger   map[int64]int
}

func newService(t *testing.T, group, topic, handover string, manual bool, ledger map[int64]int) *service {
	t.Helper()
	conf := kafka.ConfigMap{"bootstrap.servers": kafkatest.Bootstrap(t), "group.id": group,
		"auto.offset.reset": "earliest", "enable.partition.eof": true}
	if manual {
		// The StoreOffsets/Commit style: the service stores and commits what it processed.
		conf["enable.auto.offset.store"] = false
		conf["enable.auto.commit"] = false
	}
	c, err := guard.NewConsumer(&conf, guard.Options{HandoverTopic: handover, Member: "live-" + group,
		ProgressInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	assigned := 0
	if err := c.SubscribeTopics([]string{topic}, func(_ *kafka.Consumer, ev kafka.Event) error {
		// The service's own callback still runs.
		if _, ok := ev.(kafka.AssignedPartitions); ok {
			assigned++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := &service{t: t, consumer: c, manual: manual, ledger: ledger}
	t.Cleanup(func() { _ = c.Close() })
	return s
}

// run polls for a while, processing what it is handed, until cond holds.
func (s *service) run(within time.Duration, what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not reached within %s (ledger %v)", what, within, offsets(s.ledger))
		}
		msg, err := s.consumer.ReadMessage(100 * time.Millisecond)
		if err != nil {
			if kerr, ok := err.(kafka.Error); ok && kerr.IsTimeout() {
				continue
			}
			if msg == nil {
				continue
			}
		}
		s.ledger[int64(msg.TopicPartition.Offset)]++
		if s.manual {
			if _, err := s.consumer.StoreMessage(msg); err != nil {
				s.t.Fatalf("store: %v", err)
			}
			if _, err := s.consumer.Commit(); err != nil && !strings.Contains(err.Error(), "No offset") {
				s.t.Fatalf("commit: %v", err)
			}
		}
	}
}

// pollFor keeps the loop going for a while (the guard works inside the service's calls).
func (s *service) pollFor(d time.Duration) {
	until := time.Now().Add(d)
	s.run(d+time.Second, "polling", func() bool { return time.Now().After(until) })
}

func offsets(ledger map[int64]int) []int64 {
	out := make([]int64, 0, len(ledger))
	for o := range ledger {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestGuardSkipsSeeksBackCommitsMarksAndAcknowledges(t *testing.T) {
	for _, style := range []struct {
		name   string
		manual bool
	}{{"auto-store-and-commit", false}, {"store-offsets-and-commit", true}} {
		t.Run(style.name, func(t *testing.T) {
			topic := kafkatest.Name(t, "orders")
			handoverName := kafkatest.Name(t, "handover")
			group := kafkatest.Name(t, "live")
			replayID := "shop/" + topic + "/1"
			kafkatest.CreateTopic(t, topic, 1)
			handover := kafkatest.Handover(t, handoverName)
			var records []kafkatest.Record
			for i := 0; i < 20; i++ {
				kind := "odd"
				if i%2 == 0 {
					kind = "even"
				}
				records = append(records, kafkatest.Record{Key: fmt.Sprint(i), Value: fmt.Sprintf(`{"kind":"%s","n":%d}`, kind, i)})
			}
			kafkatest.Produce(t, topic, records)
			// A Handover replay of the even records from S = 5, H not known yet.
			filter, _ := protocol.ParseOrdered([]byte(`{"json":[{"path":"kind","equals":"even"}]}`))
			kafkatest.Publish(t, handover,
				protocol.ReplayInfo{ReplayID: replayID, Mode: protocol.ModeHandover, ReplayGroup: "replay-" + group,
					LiveGroup: protocol.String(group), Topics: []string{topic}, Filter: filter.(*protocol.Object)},
				protocol.StartInfo{ReplayID: replayID, Topic: topic, Partition: 0, Offset: 5})

			ledger := map[int64]int{}
			first := newService(t, group, topic, handoverName, style.manual, ledger)
			// Everything below S, and the odd records from S on, are the live side's; the even ones the replay's.
			want := []int64{0, 1, 2, 3, 4, 5, 7, 9, 11, 13, 15, 17, 19}
			first.run(60*time.Second, "the live side processed what the replay does not cover", func() bool {
				return len(ledger) == len(want)
			})
			if got := offsets(ledger); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("processed %v, want %v", got, want)
			}
			// The commit carries the skip mark (F = 6), so a new owner knows what was skipped.
			kafkatest.Eventually(t, 30*time.Second, "the skip mark is committed", func() bool {
				first.pollFor(300 * time.Millisecond)
				_, _ = first.consumer.Commit()
				offset, metadata := kafkatest.Committed(t, group, topic, 0)
				mark := protocol.DecodeMark(metadata)
				return offset == 20 && mark != nil && mark.SkipFrom != nil && *mark.SkipFrom == 6 && mark.ReplayID == replayID
			})
			if s := first.consumer.Stats(); s.Skipped != 7 {
				t.Fatalf("skipped %d records, want 7 (the even ones in [6, 20))", s.Skipped)
			}
			// A crash-free restart: another replica takes over and restores F from the mark.
			if err := first.consumer.Close(); err != nil {
				t.Fatal(err)
			}
			second := newService(t, group, topic, handoverName, style.manual, ledger)
			second.run(10*time.Second, "the new owner reads nothing yet", func() bool {
				return second.consumer.Stats().ActivePartitions == 1
			})
			// The replay processed the even records of [5, 12) and hands over at H = 12: the live side re-reads
			// [12, 20) and processes the matching records it skipped there, and nothing else again.
			kafkatest.Publish(t, handover, protocol.HandoverInfo{ReplayID: replayID, Topic: topic, Partition: 0,
				Offset: 12, Reason: protocol.ReasonCaughtUp, By: "test"})
			want = []int64{0, 1, 2, 3, 4, 5, 7, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19}
			second.run(60*time.Second, "the skipped matching records at or above H are processed", func() bool {
				return len(ledger) == len(want)
			})
			if got := offsets(ledger); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("processed %v, want %v", got, want)
			}
			for o, n := range ledger {
				if n != 1 {
					t.Fatalf("offset %d processed %d times", o, n)
				}
			}
			if s := second.consumer.Stats(); s.Seeks < 1 {
				t.Fatalf("no seek back: %+v", s)
			}
			// The live group commits past H without a mark, and acknowledges H.
			kafkatest.Eventually(t, 60*time.Second, "the handover is acknowledged", func() bool {
				second.pollFor(300 * time.Millisecond)
				view, err := handover.ReadReplay(t.Context(), replayID)
				if err != nil {
					return false
				}
				part := view.Partitions[protocol.TopicPartition{Topic: topic, Partition: 0}]
				return part != nil && part.Acknowledged() && part.Ack.Committed >= 12
			})
			offset, metadata := kafkatest.Committed(t, group, topic, 0)
			if offset < 20 || protocol.DecodeMark(metadata) != nil {
				t.Fatalf("committed %d with %q, want >= 20 and no mark", offset, metadata)
			}
			// Guard records told the operator what was skipped.
			view, err := handover.ReadReplay(t.Context(), replayID)
			if err != nil {
				t.Fatal(err)
			}
			guardRecord := view.Partitions[protocol.TopicPartition{Topic: topic, Partition: 0}].Guard
			if guardRecord == nil || guardRecord.FirstSkipped == nil || *guardRecord.FirstSkipped != 6 {
				raw, _ := json.Marshal(guardRecord)
				t.Fatalf("guard record %s, want first_skipped 6", raw)
			}
		})
	}
}

// TestGuardWithBadInputSkipsNothingAndSaysWhy: a replay whose filter this guard cannot evaluate covers
// nothing the guard can prove, so it hands every record to the service, logs it, and publishes a `guard`
// record naming the problem (what the operator's status shows).
func TestGuardWithBadInputSkipsNothingAndSaysWhy(t *testing.T) {
	topic := kafkatest.Name(t, "orders")
	handoverName := kafkatest.Name(t, "handover")
	group := kafkatest.Name(t, "live")
	replayID := "shop/" + topic + "/bad"
	kafkatest.CreateTopic(t, topic, 1)
	handover := kafkatest.Handover(t, handoverName)
	var records []kafkatest.Record
	for i := 0; i < 10; i++ {
		records = append(records, kafkatest.Record{Key: fmt.Sprint(i), Value: `{"kind":"even"}`})
	}
	kafkatest.Produce(t, topic, records)
	filter, _ := protocol.ParseOrdered([]byte(`{"regex":"ev.n"}`)) // a filter feature this guard does not know
	kafkatest.Publish(t, handover,
		protocol.ReplayInfo{ReplayID: replayID, Mode: protocol.ModeHandover, ReplayGroup: "replay-" + group,
			LiveGroup: protocol.String(group), Topics: []string{topic}, Filter: filter.(*protocol.Object)},
		protocol.StartInfo{ReplayID: replayID, Topic: topic, Partition: 0, Offset: 0})
	ledger := map[int64]int{}
	live := newService(t, group, topic, handoverName, false, ledger)
	live.run(60*time.Second, "every record handed to the service", func() bool { return len(ledger) == 10 })
	if s := live.consumer.Stats(); s.Skipped != 0 {
		t.Fatalf("skipped %d records of a replay it cannot follow", s.Skipped)
	}
	kafkatest.Eventually(t, 30*time.Second, "the problem is published", func() bool {
		live.pollFor(300 * time.Millisecond)
		view, err := handover.ReadReplay(t.Context(), replayID)
		if err != nil {
			return false
		}
		part := view.Partitions[protocol.TopicPartition{Topic: topic, Partition: 0}]
		return part != nil && part.Guard != nil && part.Guard.Problem != nil &&
			*part.Guard.Problem == "unevaluable-filter:unknown-field"
	})
}
