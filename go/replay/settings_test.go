package replay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"reprise.io/kafka/protocol"
)

func env(overrides map[string]string) map[string]string {
	e := map[string]string{"REPRISE_BOOTSTRAP_SERVERS": "k:9092", "REPRISE_REPLAY_ID": "ns/r/1",
		"REPRISE_TOPICS": "orders, refunds", "REPRISE_REPLAY_GROUP": "orders-replay", "REPRISE_ROLE": "replay"}
	for k, v := range overrides {
		if v == "" {
			delete(e, k)
		} else {
			e[k] = v
		}
	}
	return e
}

func TestSettingsFromEnvReadsTheOperatorsContract(t *testing.T) {
	s, err := SettingsFromEnv(env(map[string]string{"REPRISE_MODE": "handover", "REPRISE_LIVE_GROUP": "orders",
		"REPRISE_START": `{"duration":"2h"}`, "REPRISE_FILTER": `{"json":[{"path":"kind","equals":"paid"}]}`,
		"REPRISE_DLQ_TOPIC": "orders-dlq", "REPRISE_BATCH_SIZE": "250", "REPRISE_MAX_RECORDS_PER_SECOND": "1500.5",
		"REPRISE_CHECK_INTERVAL": "0.5", "REPRISE_EXIT_WHEN_DONE": "yes", "REPRISE_MEMBER_NAME": "pod-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != protocol.ModeHandover || s.LiveGroup != "orders" || len(s.Topics) != 2 || s.Topics[1] != "refunds" {
		t.Fatalf("%+v", s)
	}
	if s.Start.Kind != "duration" || s.Start.DurationS != 7200 || len(s.Filter.JSONMatches) != 1 {
		t.Fatalf("start %+v filter %+v", s.Start, s.Filter)
	}
	if s.PoisonPolicy != "dead-letter" || s.BatchSize != 250 || s.MaxRecordsPerSecond != 1500.5 ||
		s.CheckInterval != 500*time.Millisecond || !s.ExitWhenDone || s.MemberName != "pod-1" || s.MetricsPort != 9400 {
		t.Fatalf("%+v", s)
	}
}

func TestSettingsErrorsNameTheVariable(t *testing.T) {
	cases := []struct {
		name      string
		overrides map[string]string
		mentions  string
	}{
		{"missing bootstrap", map[string]string{"REPRISE_BOOTSTRAP_SERVERS": ""}, "REPRISE_BOOTSTRAP_SERVERS"},
		{"missing topics", map[string]string{"REPRISE_TOPICS": ""}, "REPRISE_TOPICS"},
		{"missing replay group", map[string]string{"REPRISE_REPLAY_GROUP": ""}, "REPRISE_REPLAY_GROUP"},
		{"backfill is the Python worker's", map[string]string{"REPRISE_ROLE": "backfill"}, "REPRISE_ROLE"},
		{"unknown mode", map[string]string{"REPRISE_MODE": "Mirror"}, "REPRISE_MODE"},
		{"live group needed", map[string]string{"REPRISE_MODE": "Parallel"}, "REPRISE_LIVE_GROUP"},
		{"groups must differ", map[string]string{"REPRISE_MODE": "Handover", "REPRISE_LIVE_GROUP": "orders-replay"}, "must differ"},
		{"no end with Handover", map[string]string{"REPRISE_MODE": "Handover", "REPRISE_LIVE_GROUP": "l",
			"REPRISE_END": `{"snapshot":true}`}, "REPRISE_END"},
		{"bad start", map[string]string{"REPRISE_START": `{"duration":"soon"}`}, "REPRISE_START"},
		{"bad filter", map[string]string{"REPRISE_FILTER": `{"regex":"x"}`}, "REPRISE_FILTER"},
		{"dead-letter needs a topic", map[string]string{"REPRISE_POISON_POLICY": "dead-letter"}, "REPRISE_DLQ_TOPIC"},
		{"a forward is the worker's", map[string]string{"REPRISE_FORWARD_TOPIC": "copy"}, "REPRISE_FORWARD_TOPIC"},
		{"batch size", map[string]string{"REPRISE_BATCH_SIZE": "0"}, "REPRISE_BATCH_SIZE"},
		{"metrics port", map[string]string{"REPRISE_METRICS_PORT": "70000"}, "REPRISE_METRICS_PORT"},
		{"boolean", map[string]string{"REPRISE_ALLOW_CLAMP": "maybe"}, "REPRISE_ALLOW_CLAMP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := SettingsFromEnv(env(c.overrides))
			var se *SettingsError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.mentions) {
				t.Fatalf("got %v, want a settings error naming %s", err, c.mentions)
			}
		})
	}
}

func TestLoadConfigDirSkipsSecretLinksAndNeverShowsValues(t *testing.T) {
	dir := t.TempDir()
	for name, value := range map[string]string{"sasl.password": "s3cret\n", "security.protocol": "SASL_SSL", ".hidden": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LoadConfigDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["sasl.password"] != "s3cret" || got["security.protocol"] != "SASL_SSL" {
		t.Fatalf("%v", got)
	}
	if _, err := LoadConfigDir(filepath.Join(dir, "missing")); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("missing folder: %v", err)
	}
}

func TestMetricsRenderPrometheusText(t *testing.T) {
	m := NewMetrics(`ns/"r"/1`, "pod-1")
	m.Delivered.Add(7)
	m.SetPartition("orders", 3, 40, 100, stateReplaying)
	text := m.Render()
	for _, want := range []string{
		`reprise_worker_records_delivered_total{replay="ns/\"r\"/1",member="pod-1"} 7`,
		`reprise_worker_partition_lag{replay="ns/\"r\"/1",member="pod-1",topic="orders",partition="3"} 60`,
		"# TYPE reprise_worker_partition_state gauge",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("missing %q in\n%s", want, text)
		}
	}
	if !m.Alive() {
		t.Fatal("a fresh loop is alive")
	}
}
