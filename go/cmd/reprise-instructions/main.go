//go:build instructions

// reprise-instructions runs one live service's Poll loop over records held in memory, for callgrind
// (benchmarks/guard_path.py): the same loop as reprise-bench's live loops, bare (the records come straight from
// the source) or through the guard with no replay active (guard.Source feeds the guard's Poll, so everything the
// guard does per record runs, and librdkafka's fetching does not). The instructions counted inside `counted`
// (callgrind --toggle-collect=main.counted) divided by -records are the loop's per record; the guard's minus the
// bare loop's are what the guard adds to every record. Records: 1 KiB values over 12 partitions, in runs of -run
// records of one partition, -records counted after as many uncounted.
//
//	go build -tags instructions -o reprise-instructions ./cmd/reprise-instructions
//	valgrind --tool=callgrind --collect-atstart=no --toggle-collect=main.counted ./reprise-instructions -loop guard
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/guard"
)

const (
	topic      = "bench-source"
	partitions = 12
	valueBytes = 1024
)

// memory hands out the records in order, as a consumer's Poll would; nil once they are all out.
type memory struct {
	records []*kafka.Message
	next    int
}

func (s *memory) Poll(int) kafka.Event {
	if s.next == len(s.records) {
		return nil
	}
	r := s.records[s.next]
	s.next++
	return r
}

func (s *memory) Close() error { return nil }

type poller interface {
	Poll(int) kafka.Event
	Close() error
}

// handler: reprise-bench's meter.handle without its clock readings (the same work per record).
type handler struct {
	checksum int64
	handled  int64
}

func (h *handler) handle(batch []*kafka.Message) {
	for _, r := range batch {
		if len(r.Value) > 0 {
			h.checksum += int64(r.Value[len(r.Value)-1])
		}
	}
	h.handled += int64(len(batch))
}

func records(count, run int) []*kafka.Message {
	name := topic
	next := make([]kafka.Offset, partitions)
	out := make([]*kafka.Message, 0, count)
	for p := int32(0); len(out) < count; p = (p + 1) % partitions {
		for i := 0; i < run && len(out) < count; i++ {
			value := make([]byte, valueBytes)
			for j := range value {
				value[j] = byte('a' + (int(next[p])+j)%26)
			}
			out = append(out, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &name, Partition: p,
				Offset: next[p]}, Key: []byte(fmt.Sprint(next[p])), Value: value})
			next[p]++
		}
	}
	return out
}

// counted is reprise-bench's live loop: what callgrind counts. Entered once: callgrind's toggle follows calls,
// and Go's stack growth (in the first calls) can leave it out of step.
//
//go:noinline
func counted(c poller, h *handler, until int64) {
	one := make([]*kafka.Message, 1)
	for h.handled < until {
		if msg, ok := c.Poll(100).(*kafka.Message); ok && msg.TopicPartition.Error == nil {
			one[0] = msg
			h.handle(one)
		}
	}
}

// warm is the same loop, not counted: the first records (the guard's maps, the goroutine's stack grown).
//
//go:noinline
func warm(c poller, h *handler, until int64) {
	one := make([]*kafka.Message, 1)
	for h.handled < until {
		if msg, ok := c.Poll(100).(*kafka.Message); ok && msg.TopicPartition.Error == nil {
			one[0] = msg
			h.handle(one)
		}
	}
}

func main() {
	// callgrind's toggle is per thread: a goroutine the scheduler moves to another thread inside counted would leave
	// the rest of the loop uncounted (one run counted 62 instructions per record of the guard's 163).
	runtime.LockOSThread()
	loop := flag.String("loop", "bare", "bare or guard")
	count := flag.Int("records", 60000, "records counted (as many go first, uncounted)")
	run := flag.Int("run", 500, "records of one partition in a row")
	flag.Parse()
	source := &memory{records: records(2**count, *run)}
	var c poller = source
	if *loop == "guard" {
		guard.Source = source.Poll
		// Nothing listens there: the guard's own clients (the handover topic's tail) retry in their threads,
		// which callgrind does not count; its Poll never reaches librdkafka.
		g, err := guard.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": "127.0.0.1:9", "group.id": "instructions",
			"log_level": 0}, guard.Options{HandoverTopic: "reprise.handover.instructions", Member: "instructions"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "reprise-instructions:", err)
			os.Exit(1)
		}
		g.AssignReleased(topic, partitions)
		c = g
	} else if *loop != "bare" {
		fmt.Fprintln(os.Stderr, "reprise-instructions: -loop is bare or guard")
		os.Exit(2)
	}
	h := &handler{}
	warm(c, h, int64(*count))
	counted(c, h, int64(2**count))
	fmt.Printf("{\"loop\":%q,\"records\":%d,\"checksum\":%d}\n", *loop, *count, h.checksum)
}
