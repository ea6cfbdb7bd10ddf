package main

// The seed's bug, shown and fixed, on the real broker (REPRISE_TEST_BOOTSTRAP). Replicas of a replay
// consumer are started one after another, as the seed's own procedure says ("bring up multiple consumer
// instances in the replay mode ... as you add a new consumer instance"), and the records processed twice are
// counted from the ledgers:
//
//   - cmd/naive-replay, the seed's design (rewind to the timestamp on every assignment): duplicates;
//   - this service in the replay role (REPRISE_* environment, Go replay role): none.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

const (
	partitions = 4
	perPart    = 250
	total      = partitions * perPart
)

func bootstrap(t *testing.T) string {
	b := os.Getenv("REPRISE_TEST_BOOTSTRAP")
	if b == "" {
		t.Fatal("REPRISE_TEST_BOOTSTRAP is not set: this test needs the real broker (tests/integration/go/test_go_suite.py sets it)")
	}
	return b
}

func build(t *testing.T, dir, pkg, binary string) string {
	t.Helper()
	out := filepath.Join(dir, binary)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build %s: %v", pkg, err)
	}
	return out
}

func createTopic(t *testing.T, name string) {
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("create topic: %v %v", err, res)
	}
	waitFor(t, 30*time.Second, "the topic has leaders", func() bool {
		md, err := admin.GetMetadata(&name, false, 5000)
		if err != nil || md.Topics[name].Error.Code() != kafka.ErrNoError || len(md.Topics[name].Partitions) != partitions {
			return false
		}
		for _, p := range md.Topics[name].Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return true
	})
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap(t), "acks": "all",
		"go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < total; i++ {
		for {
			err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &name, Partition: int32(i % partitions)},
				Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}, nil)
			if err == nil {
				break
			}
			p.Flush(100)
		}
	}
	if left := p.Flush(60000); left > 0 {
		t.Fatalf("%d records not delivered", left)
	}
}

// replicas starts processes one after another and stops them by PID.
type replicas struct {
	t     *testing.T
	procs []*exec.Cmd
}

func (r *replicas) start(binary string, env []string, logPath string) {
	r.t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.procs = append(r.procs, cmd)
}

func (r *replicas) stop() {
	for _, p := range r.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range r.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	r.procs = nil
}

// count reads the ledgers: lines (records processed) and distinct records.
func count(t *testing.T, paths []string) (lines, distinct int) {
	seen := map[string]bool{}
	for _, path := range paths {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) != 4 {
				continue // a line being written
			}
			lines++
			seen[fields[2]+"/"+fields[3]] = true
		}
		f.Close()
	}
	return lines, len(seen)
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runReplicas starts three replicas one after another (each once the previous one is processing), waits
// until every record was processed and the ledgers stopped growing, stops them, and returns the duplicates.
func runReplicas(t *testing.T, binary string, env func(i int) []string, dir, name string) int {
	r := &replicas{t: t}
	defer r.stop()
	var ledgers []string
	for i := 1; i <= 3; i++ {
		ledger := filepath.Join(dir, fmt.Sprintf("%s-ledger-%d.txt", name, i))
		ledgers = append(ledgers, ledger)
		r.start(binary, append(env(i), "LEDGER_FILE="+ledger, "PROCESS_DELAY_MS=3"),
			filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, i)))
		if i < 3 {
			want := i * total / 5
			waitFor(t, 120*time.Second, fmt.Sprintf("%s: replica %d is processing", name, i), func() bool {
				lines, _ := count(t, ledgers)
				return lines >= want
			})
		}
	}
	waitFor(t, 180*time.Second, name+": every record processed", func() bool {
		_, distinct := count(t, ledgers)
		return distinct == total
	})
	// Settled: nothing new for a while (the naive replicas may still be replaying after a late rebalance).
	last := -1
	waitFor(t, 180*time.Second, name+": the ledgers stopped growing", func() bool {
		lines, _ := count(t, ledgers)
		if lines == last {
			return true
		}
		last = lines
		time.Sleep(3 * time.Second)
		return false
	})
	r.stop()
	lines, distinct := count(t, ledgers)
	if distinct != total {
		t.Fatalf("%s: %d of %d records processed", name, distinct, total)
	}
	return lines - distinct
}

func TestSeedBugShownAndFixed(t *testing.T) {
	dir := t.TempDir()
	naive := build(t, dir, "./cmd/naive-replay", "naive-replay")
	service := build(t, dir, ".", "seed003")
	suffix := fmt.Sprint(time.Now().UnixNano())
	topic := "seed003-" + suffix
	createTopic(t, topic)
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)

	naiveDuplicates := runReplicas(t, naive, func(int) []string {
		return []string{"BOOTSTRAP_SERVERS=" + bootstrap(t), "TOPIC=" + topic, "GROUP_ID=naive-" + suffix,
			"REPLAY_FROM=" + from}
	}, dir, "naive")

	fixedDuplicates := runReplicas(t, service, func(i int) []string {
		return []string{"REPRISE_ROLE=replay", "REPRISE_BOOTSTRAP_SERVERS=" + bootstrap(t),
			"REPRISE_REPLAY_ID=seed003/" + suffix, "REPRISE_TOPICS=" + topic, "REPRISE_MODE=Drain",
			"REPRISE_REPLAY_GROUP=replay-" + suffix, `REPRISE_START={"timestamp":"` + from + `"}`,
			"REPRISE_HANDOVER_TOPIC=reprise.handover." + suffix, "REPRISE_METRICS_PORT=0",
			fmt.Sprintf("REPRISE_MEMBER_NAME=replica-%d", i)}
	}, dir, "replay-role")

	t.Logf("seed 003, three replicas started one after another over %d records: duplicates with the seed's "+
		"design %d, with the Go replay role %d", total, naiveDuplicates, fixedDuplicates)
	if report := os.Getenv("SEEDBUG_REPORT"); report != "" {
		_ = os.WriteFile(report, []byte(fmt.Sprintf("naive=%d replay_role=%d records=%d\n", naiveDuplicates,
			fixedDuplicates, total)), 0o644)
	}
	if naiveDuplicates == 0 {
		t.Fatal("the seed's design replayed nothing twice: the demonstration did not reproduce its bug")
	}
	if fixedDuplicates != 0 {
		t.Fatalf("the replay role processed %d records twice", fixedDuplicates)
	}
}
