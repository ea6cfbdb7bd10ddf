// reprise-bench measures one consumer loop over a whole topic, for benchmarks/go.py (`make bench`). Loops,
// in pairs that do the same work:
//
//   - bare: a plain confluent-kafka-go Poll loop, automatic offset store and commit, the handler per record;
//   - guard: the same loop through guard.NewConsumer, no replay active;
//   - batch: a hand-written replay loop: the replay role's consumer settings (replay.ConsumerSettings), up to
//     -batch records per Poll round, the handler per batch, the batch's offsets committed in the background
//     (one commit in flight), as the role commits;
//   - replay: the replay role (replay.Run, Drain mode, exit when done) with the same handler.
//
// It prints one JSON line: the records handled; cpu_s and broker_cpu_s, this process's CPU seconds (getrusage,
// every thread) and the broker's (/proc, with -broker-pid) from just before the loop creates its clients to the
// last record handled (a start-up's work counts, its waiting costs no CPU; closing is left out); window_s, the
// wall seconds from the first record handed to the handler to the last (the throughput); and startup_s, from
// the loop's start to its first record (group join, the guard's handover-topic catch-up, the replay's bootstrap
// transaction); and steady_*, the same from the record at a tenth of the topic to the last (the steady state:
// start-up and the prefetch it allowed are behind, in every loop alike).
//
//	reprise-bench -bootstrap HOST:PORT -topic T -records N -loop bare|guard|batch|replay [-broker-pid PID]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/guard"
	"reprise.io/kafka/protocol"
	"reprise.io/kafka/replay"
)

// fetch: the live loops' fetch settings (bare and guard alike).
var fetch = kafka.ConfigMap{"fetch.max.bytes": 52428800, "queued.max.messages.kbytes": 65536}

// moment is what the meter reads at the edges of the window.
type moment struct {
	at        time.Time
	cpu       float64
	brokerCPU float64
}

// meter counts handled records and reads the clocks at the loop's start, its first record and its last.
type meter struct {
	records   int64
	brokerPid int
	checksum  int64
	handled   int64
	start     moment
	first     time.Time
	steady    moment // at the first tenth of the records: start-up and its prefetch are behind
	last      moment
}

func (m *meter) read() moment {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	return moment{at: time.Now(), cpu: cpu, brokerCPU: processCPU(m.brokerPid)}
}

// processCPU: user + system seconds of another process (the broker), from /proc/PID/stat.
func processCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return float64(utime+stime) / 100 // USER_HZ is 100 on Linux
}

// handle is the handler every loop calls: it touches each record's value, as a handler would, and counts.
func (m *meter) handle(batch []*kafka.Message) {
	if len(batch) == 0 {
		return
	}
	if m.handled == 0 {
		m.first = time.Now()
	}
	for _, r := range batch {
		if len(r.Value) > 0 {
			m.checksum += int64(r.Value[len(r.Value)-1])
		}
	}
	m.handled += int64(len(batch))
	if m.handled >= m.records/10 && m.steady.at.IsZero() {
		m.steady = m.read()
	}
	if m.handled >= m.records && m.last.at.IsZero() {
		m.last = m.read()
		if path := os.Getenv("REPRISE_BENCH_HEAPPROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
	}
}

func main() {
	began := time.Now()
	bootstrap := flag.String("bootstrap", "", "Kafka bootstrap servers")
	topic := flag.String("topic", "", "topic to read whole")
	records := flag.Int64("records", 0, "records in the topic")
	loop := flag.String("loop", "bare", "bare, guard, batch or replay")
	brokerPid := flag.Int("broker-pid", 0, "the broker's process id, to read its CPU time")
	handoverTopic := flag.String("handover-topic", "reprise.handover.bench", "the handover topic")
	batchSize := flag.Int("batch", 1000, "records per batch (batch and replay loops)")
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
	level := slog.LevelWarn
	if os.Getenv("REPRISE_BENCH_DEBUG") != "" {
		level = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	m := &meter{records: *records, brokerPid: *brokerPid}
	m.start = m.read()
	group := fmt.Sprintf("bench-%s-%d", *loop, time.Now().UnixNano())
	var err error
	switch *loop {
	case "bare", "guard":
		err = live(m, *bootstrap, *topic, group, *handoverTopic, *loop == "guard")
	case "batch":
		err = batchLoop(m, *bootstrap, *topic, group, *batchSize)
	case "replay":
		err = replayRole(m, *bootstrap, *topic, group, *handoverTopic, *batchSize)
	default:
		err = fmt.Errorf("unknown loop %q", *loop)
	}
	if err == nil && m.handled != *records {
		err = fmt.Errorf("handled %d of %d records", m.handled, *records)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "reprise-bench:", err)
		os.Exit(1)
	}
	window := m.last.at.Sub(m.first).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"loop": *loop, "records": m.handled,
		"cpu_s": m.last.cpu - m.start.cpu, "broker_cpu_s": m.last.brokerCPU - m.start.brokerCPU,
		"steady_records": m.handled - m.records/10, "steady_cpu_s": m.last.cpu - m.steady.cpu,
		"steady_broker_cpu_s": m.last.brokerCPU - m.steady.brokerCPU, "steady_s": m.last.at.Sub(m.steady.at).Seconds(),
		"window_s": window, "records_per_second": float64(m.handled) / window,
		"startup_s": m.first.Sub(m.start.at).Seconds(), "close_s": time.Since(m.last.at).Seconds(),
		"process_s": time.Since(began).Seconds()})
}

type poller interface {
	Poll(int) kafka.Event
	Close() error
}

// live: the loop of a live service, bare or guarded; the handler per record, offsets stored and committed
// automatically (librdkafka's defaults).
func live(m *meter, bootstrap, topic, group, handoverTopic string, guarded bool) error {
	conf := kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
	for k, v := range fetch {
		conf[k] = v
	}
	var c poller
	if guarded {
		g, err := guard.NewConsumer(&conf, guard.Options{HandoverTopic: handoverTopic, Member: "bench"})
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
	defer c.Close()
	one := make([]*kafka.Message, 1)
	deadline := time.Now().Add(30 * time.Minute)
	for m.handled < m.records {
		if time.Now().After(deadline) {
			return fmt.Errorf("read %d of %d records in 30 minutes", m.handled, m.records)
		}
		if msg, ok := c.Poll(100).(*kafka.Message); ok && msg.TopicPartition.Error == nil {
			one[0] = msg
			m.handle(one)
		}
	}
	return nil
}

// batchLoop: what a service would write by hand to re-read a topic at least once, with the replay role's
// consumer settings and commit policy.
func batchLoop(m *meter, bootstrap, topic, group string, size int) error {
	conf := kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group}
	for k, v := range replay.ConsumerSettings {
		conf[k] = v
	}
	conf["auto.offset.reset"] = "earliest" // the role commits its start first; a fresh group starts here
	c, err := kafka.NewConsumer(&conf)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SubscribeTopics([]string{topic}, nil); err != nil {
		return err
	}
	var committing sync.WaitGroup
	defer committing.Wait()
	batch := make([]*kafka.Message, 0, size)
	deadline := time.Now().Add(30 * time.Minute)
	for m.handled < m.records {
		if time.Now().After(deadline) {
			return fmt.Errorf("read %d of %d records in 30 minutes", m.handled, m.records)
		}
		batch = batch[:0]
		wait := 100
		for len(batch) < size {
			ev := c.Poll(wait)
			if ev == nil {
				break
			}
			if msg, ok := ev.(*kafka.Message); ok && msg.TopicPartition.Error == nil {
				batch = append(batch, msg)
				wait = 0
			}
		}
		if len(batch) == 0 {
			continue
		}
		m.handle(batch)
		next := map[int32]kafka.TopicPartition{}
		for _, msg := range batch {
			tp := msg.TopicPartition
			tp.Offset++
			next[tp.Partition] = tp
		}
		offsets := make([]kafka.TopicPartition, 0, len(next))
		for _, tp := range next {
			offsets = append(offsets, tp)
		}
		committing.Wait()
		committing.Add(1)
		go func() {
			defer committing.Done()
			_, _ = c.CommitOffsets(offsets)
		}()
	}
	return nil
}

func replayRole(m *meter, bootstrap, topic, group, handoverTopic string, size int) error {
	s := replay.Settings{BootstrapServers: bootstrap, ReplayID: "bench/" + group, Topics: []string{topic},
		Role: "replay", Mode: protocol.ModeDrain, ReplayGroup: group, Start: protocol.StartSpec{Kind: "earliest"},
		HandoverTopic: handoverTopic, PoisonPolicy: "skip", BatchSize: size, ExitWhenDone: true,
		CheckInterval: time.Second, MemberName: "bench", LogLevel: "WARNING"}
	return replay.Run(context.Background(), s, replay.HandlerFunc(func(_ context.Context, batch []*kafka.Message) error {
		m.handle(batch)
		return nil
	}))
}
