package replay

// Prometheus metrics of the replay role, in the text format by hand (a service need not carry a client
// library for them), and the HTTP endpoint: /metrics, liveness /healthz, /readyz. The names are the Python
// worker's, so one dashboard serves every language.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// staleAfter: a loop that has not gone round for this long is reported dead on /healthz.
const staleAfter = 120 * time.Second

// Partition states of reprise_worker_partition_state.
const (
	stateReplaying = 0
	stateFinished  = 1
)

// Metrics are the replay role's counters and gauges.
type Metrics struct {
	replay, member string

	Consumed, Matched, Delivered, Skipped, DeadLettered, PoisonSkipped atomic.Int64
	Bytes, Commits, Rebalances, Errors                                 atomic.Int64
	Finished, Assigned                                                 atomic.Int64

	mu         sync.Mutex
	partitions map[string]*partitionGauges
	heartbeat  atomic.Int64
	ready      atomic.Bool
}

type partitionGauges struct {
	topic     string
	partition int32
	position  int64
	end       int64
	hasEnd    bool
	state     int
}

// NewMetrics returns the metrics of one replica.
func NewMetrics(replayID, member string) *Metrics {
	m := &Metrics{replay: replayID, member: member, partitions: map[string]*partitionGauges{}}
	m.Beat()
	return m
}

// Beat marks the loop as alive.
func (m *Metrics) Beat() { m.heartbeat.Store(time.Now().UnixNano()) }

// Alive says whether the loop went round recently.
func (m *Metrics) Alive() bool { return time.Since(time.Unix(0, m.heartbeat.Load())) < staleAfter }

// SetPartition updates the gauges of one partition (end < 0: unknown).
func (m *Metrics) SetPartition(topic string, partition int32, position, end int64, state int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := fmt.Sprintf("%s\x00%d", topic, partition)
	g := m.partitions[k]
	if g == nil {
		g = &partitionGauges{topic: topic, partition: partition}
		m.partitions[k] = g
	}
	if position >= 0 {
		g.position = position
	}
	if end >= 0 {
		g.end, g.hasEnd = end, true
	}
	if state >= 0 {
		g.state = state
	}
}

// Forget drops a partition that left this replica.
func (m *Metrics) Forget(topic string, partition int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.partitions, fmt.Sprintf("%s\x00%d", topic, partition))
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// Render writes the Prometheus text exposition.
func (m *Metrics) Render() string {
	var b strings.Builder
	labels := fmt.Sprintf(`replay="%s",member="%s"`, escape(m.replay), escape(m.member))
	counters := []struct {
		name, help string
		v          *atomic.Int64
	}{
		{"reprise_worker_records_consumed", "Records read from the source topics", &m.Consumed},
		{"reprise_worker_records_matched", "Records that matched the filter", &m.Matched},
		{"reprise_worker_records_delivered", "Records handed to the handler", &m.Delivered},
		{"reprise_worker_records_skipped", "Records the filter did not match", &m.Skipped},
		{"reprise_worker_records_dead_lettered", "Poison records sent to the dead-letter topic", &m.DeadLettered},
		{"reprise_worker_records_poison_skipped", "Poison records counted and skipped (no DLQ)", &m.PoisonSkipped},
		{"reprise_worker_bytes_consumed", "Key and value bytes read", &m.Bytes},
		{"reprise_worker_commits", "Offset commits", &m.Commits},
		{"reprise_worker_rebalances", "Partitions assigned, revoked or lost", &m.Rebalances},
		{"reprise_worker_errors", "Errors the loop recovered from", &m.Errors},
	}
	for _, c := range counters {
		fmt.Fprintf(&b, "# HELP %s_total %s\n# TYPE %s_total counter\n%s_total{%s} %d\n", c.name, c.help, c.name, c.name, labels, c.v.Load())
	}
	fmt.Fprintf(&b, "# HELP reprise_worker_partitions_finished Partitions finished in this replay\n# TYPE reprise_worker_partitions_finished gauge\nreprise_worker_partitions_finished{%s} %d\n", labels, m.Finished.Load())
	fmt.Fprintf(&b, "# HELP reprise_worker_partitions_assigned Partitions assigned to this replica\n# TYPE reprise_worker_partitions_assigned gauge\nreprise_worker_partitions_assigned{%s} %d\n", labels, m.Assigned.Load())
	m.mu.Lock()
	keys := make([]string, 0, len(m.partitions))
	for k := range m.partitions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	gauges := []struct{ name, help string }{
		{"reprise_worker_partition_position", "Next offset the replay processes"},
		{"reprise_worker_partition_end", "End offset (high watermark) last seen"},
		{"reprise_worker_partition_lag", "Records left to the end"},
		{"reprise_worker_partition_state", "0 replaying, 1 finished (handed over / drained), 2 paused"},
	}
	for i, g := range gauges {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, k := range keys {
			p := m.partitions[k]
			pl := fmt.Sprintf(`%s,topic="%s",partition="%d"`, labels, escape(p.topic), p.partition)
			switch i {
			case 0:
				fmt.Fprintf(&b, "%s{%s} %d\n", g.name, pl, p.position)
			case 1:
				if p.hasEnd {
					fmt.Fprintf(&b, "%s{%s} %d\n", g.name, pl, p.end)
				}
			case 2:
				if p.hasEnd {
					fmt.Fprintf(&b, "%s{%s} %d\n", g.name, pl, max(0, p.end-p.position))
				}
			case 3:
				fmt.Fprintf(&b, "%s{%s} %d\n", g.name, pl, p.state)
			}
		}
	}
	m.mu.Unlock()
	return b.String()
}

// Serve runs /metrics, /healthz and /readyz on port until ctx ends; returns the bound address.
func (m *Metrics) Serve(ctx context.Context, port int) (string, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(m.Render()))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if m.Alive() {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("stale\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if m.ready.Load() {
			_, _ = w.Write([]byte("ready\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready\n"))
	})
	listener, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return "", fmt.Errorf("REPRISE_METRICS_PORT %d: %w", port, err)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	go func() {
		<-ctx.Done()
		_ = server.Close()
	}()
	return listener.Addr().String(), nil
}
