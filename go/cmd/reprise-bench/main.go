// reprise-bench measures one consumer loop over a whole topic, for benchmarks/go.py (`make bench`): the
// bare confluent-kafka-go loop, the same loop through guard.NewConsumer (no replay active), or the replay
// role in Drain mode; every loop calls the same no-op handler per record. It prints one JSON line:
// {"loop": ..., "records": N, "seconds": S, "records_per_second": R}.
//
//	reprise-bench -bootstrap HOST:PORT -topic T -records N -loop bare|guard|replay
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/guard"
	"reprise.io/kafka/protocol"
	"reprise.io/kafka/replay"
)

// handled is the no-op handler's work: count the record (and touch its value, as a handler would).
var handled atomic.Int64
var checksum atomic.Int64

func handle(m *kafka.Message) {
	if len(m.Value) > 0 {
		checksum.Add(int64(m.Value[len(m.Value)-1]))
	}
	handled.Add(1)
}

// fetch: the same fetch settings for every loop, so they compare code, not tuning.
var fetch = kafka.ConfigMap{"fetch.max.bytes": 52428800, "queued.max.messages.kbytes": 65536}

func main() {
	bootstrap := flag.String("bootstrap", "", "Kafka bootstrap servers")
	topic := flag.String("topic", "", "topic to read whole")
	records := flag.Int64("records", 0, "records in the topic")
	loop := flag.String("loop", "bare", "bare, guard or replay")
	flag.Parse()
	if *bootstrap == "" || *topic == "" || *records <= 0 {
		fmt.Fprintln(os.Stderr, "reprise-bench: -bootstrap, -topic and -records are required")
		os.Exit(2)
	}
	if path := os.Getenv("REPRISE_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	group := fmt.Sprintf("bench-%s-%d", *loop, time.Now().UnixNano())
	began := time.Now()
	var err error
	switch *loop {
	case "bare", "guard":
		err = consume(*bootstrap, *topic, group, *records, *loop == "guard")
	case "replay":
		err = replayRole(*bootstrap, *topic, group, *records)
	default:
		err = fmt.Errorf("unknown loop %q", *loop)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "reprise-bench:", err)
		os.Exit(1)
	}
	seconds := time.Since(began).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"loop": *loop, "records": handled.Load(),
		"seconds": seconds, "records_per_second": float64(handled.Load()) / seconds})
}

type poller interface {
	Poll(int) kafka.Event
	Close() error
}

func consume(bootstrap, topic, group string, records int64, guarded bool) error {
	start := time.Now()
	conf := kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
	for k, v := range fetch {
		conf[k] = v
	}
	var c poller
	if guarded {
		g, err := guard.NewConsumer(&conf, guard.Options{HandoverTopic: "reprise.handover.bench"})
		if err != nil {
			return err
		}
		if err := g.SubscribeTopics([]string{topic}, nil); err != nil {
			return err
		}
		c = g
	} else {
		k, err := kafka.NewConsumer(&conf)
		if err != nil {
			return err
		}
		if err := k.SubscribeTopics([]string{topic}, nil); err != nil {
			return err
		}
		c = k
	}
	defer func() {
		began := time.Now()
		_ = c.Close()
		if os.Getenv("REPRISE_BENCH_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "close took %s\n", time.Since(began))
		}
	}()
	deadline := time.Now().Add(30 * time.Minute)
	for handled.Load() < records {
		if time.Now().After(deadline) {
			return fmt.Errorf("read %d of %d records in 30 minutes", handled.Load(), records)
		}
		if m, ok := c.Poll(100).(*kafka.Message); ok && m.TopicPartition.Error == nil {
			handle(m)
			if n := handled.Load(); os.Getenv("REPRISE_BENCH_DEBUG") != "" && (n == 1 || n%20000 == 0) {
				fmt.Fprintf(os.Stderr, "%d at %s\n", n, time.Since(start))
			}
		}
	}
	return nil
}

func replayRole(bootstrap, topic, group string, records int64) error {
	s := replay.Settings{BootstrapServers: bootstrap, ReplayID: "bench/" + group, Topics: []string{topic},
		Role: "replay", Mode: protocol.ModeDrain, ReplayGroup: group, Start: protocol.StartSpec{Kind: "earliest"},
		HandoverTopic: "reprise.handover.bench", PoisonPolicy: "skip", BatchSize: 1000, ExitWhenDone: true,
		CheckInterval: time.Second, MemberName: "bench", LogLevel: "WARNING"}
	ctx := context.Background()
	level := slog.LevelWarn
	if os.Getenv("REPRISE_BENCH_DEBUG") != "" {
		level = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	err := replay.Run(ctx, s, replay.HandlerFunc(func(_ context.Context, batch []*kafka.Message) error {
		for _, m := range batch {
			handle(m)
		}
		return nil
	}))
	if err == nil && handled.Load() != records {
		return fmt.Errorf("the replay handled %d of %d records", handled.Load(), records)
	}
	return err
}
