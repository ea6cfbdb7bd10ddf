package guard_test

// Records no reader can be broken by (finding H3; HANDOVER.md section 2 "Limits", section 4 steps 5 and 8):
// the same records as the Python reference's tests/integration/replay_worker/test_poison_json.py, so the
// Python, Java and Go guards are seen to agree on which records the replay covers.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"reprise.io/kafka/internal/kafkatest"
	"reprise.io/kafka/protocol"
)

const (
	poisonRecords = 30
	deepAt        = 20
	bigAt         = 21
	poisonH       = 22
	tenMB         = 10_000_000
	bigTopic      = "12000000" // max.message.bytes of the test's topics: room for a 10 MB record
)

// liveValue is record n of the live topic: JSON, except the two poison records.
func liveValue(n int) string {
	switch n {
	case deepAt: // holds the wanted bytes, so it reaches the parser: 5000 levels
		return `{"kind":"odd","note":"even","deep":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}"
	case bigAt: // valid JSON whose kind is odd, but above the size limit: undecodable, so covered
		head := `{"kind":"odd","note":"even","pad":"`
		return head + strings.Repeat("x", tenMB-len(head)-2) + `"}`
	}
	kind := "odd"
	if n%2 == 0 {
		kind = "even"
	}
	return fmt.Sprintf(`{"n":%d,"kind":"%s"}`, n, kind)
}

// TestPoisonRecords: a key and a value nested 5000 deep and a 10 MB value between the replay's `start` and
// its `handover` record, and a 5000-deep and a 10 MB value in the live topic. The guard learns H, hands
// exactly the records the replay does not cover, acknowledges H, and counts the three it could not read.
func TestPoisonRecords(t *testing.T) {
	topic := kafkatest.Name(t, "orders")
	handoverName := kafkatest.Name(t, "handover")
	group := kafkatest.Name(t, "live")
	replayID := "shop/" + topic + "/poison"
	kafkatest.CreateTopicWithConfig(t, topic, 1, map[string]string{"max.message.bytes": bigTopic})
	kafkatest.CreateTopicWithConfig(t, handoverName, 1,
		map[string]string{"cleanup.policy": "compact", "max.message.bytes": bigTopic})
	handover := kafkatest.Handover(t, handoverName)
	var records []kafkatest.Record
	for n := 0; n < poisonRecords; n++ {
		records = append(records, kafkatest.Record{Key: fmt.Sprint(n), Value: liveValue(n)})
	}
	kafkatest.Produce(t, topic, records)

	// Two values, so the single-field prefix rule does not apply and a value holding "even" is parsed.
	filter, _ := protocol.ParseOrdered([]byte(`{"json":[{"path":"kind","in":["even","none"]}]}`))
	kafkatest.Publish(t, handover,
		protocol.ReplayInfo{ReplayID: replayID, Mode: protocol.ModeHandover, ReplayGroup: "replay-" + group,
			LiveGroup: protocol.String(group), Topics: []string{topic}, Filter: filter.(*protocol.Object)},
		protocol.StartInfo{ReplayID: replayID, Topic: topic, Partition: 0, Offset: 0})
	tp := &protocol.TopicPartition{Topic: topic, Partition: 0}
	hKey, hValue := protocol.Encode(protocol.HandoverInfo{ReplayID: replayID, Topic: topic, Partition: 0,
		Offset: poisonH, Reason: protocol.ReasonCaughtUp, By: "test"})
	// The 10 MB record comes alone in its fetch; the 5000-deep key (the review's A3) and H in the next one.
	kafkatest.Produce(t, handoverName, []kafkatest.Record{
		{Key: string(protocol.EncodeKey(replayID, protocol.KindProgress, tp)),
			Value: `{"v":1,"kind":"progress","deep":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}"},
		{Key: string(protocol.EncodeKey(replayID, protocol.KindGuard, tp)),
			Value: `{"v":1,"kind":"guard","pad":"` + strings.Repeat("x", tenMB) + `"}`},
		{Key: strings.Repeat("[", 5000), Value: "{}"},
		{Key: string(hKey), Value: string(hValue)},
	})

	ledger := map[int64]int{}
	live := newService(t, group, topic, handoverName, false, ledger)
	// The replay covers the even records below H and the two undecodable ones; the guard hands the rest.
	var want []int64
	for n := int64(0); n < poisonRecords; n++ {
		if n >= poisonH || (n%2 == 1 && n != deepAt && n != bigAt) {
			want = append(want, n)
		}
	}
	live.run(120*time.Second, "the live side processed what the replay does not cover", func() bool {
		return len(ledger) >= len(want)
	})
	if got := offsets(ledger); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("processed %v, want %v", got, want)
	}
	kafkatest.Eventually(t, 60*time.Second, "the guard acknowledges H (it learned H after the poison)", func() bool {
		live.pollFor(300 * time.Millisecond)
		view, err := handover.ReadReplay(t.Context(), replayID)
		if err != nil {
			return false
		}
		part := view.Partitions[*tp]
		return part != nil && part.Acknowledged() && part.Ack.Offset == poisonH
	})
	if s := live.consumer.Stats(); s.HandoverRecordsFailed != 3 {
		t.Fatalf("the follower counted %d records it could not apply, want 3", s.HandoverRecordsFailed)
	}
	for o, n := range ledger {
		if n != 1 {
			t.Fatalf("offset %d processed %d times", o, n)
		}
	}
}
