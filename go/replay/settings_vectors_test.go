package replay

// conformance/vectors/settings.json: the REPRISE_* environment in, the normalised settings or a {code, field}
// refusal out. The expected outcome is the case's ports.go where it has one (a setting this role declares
// unsupported; the handler is the service's own), else the reference's. REPRISE_VECTORS points at another
// folder (a kit not merged yet).

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

type settingsOutcome struct {
	Settings map[string]any                `json:"settings"`
	Error    *struct{ Code, Field string } `json:"error"`
}

type settingsVectors struct {
	Unsupported map[string][]string `json:"unsupported"`
	Compared    []string            `json:"compared"`
	Cases       []struct {
		Name   string                     `json:"name"`
		Env    map[string]string          `json:"env"`
		Result settingsOutcome            `json:"result"`
		Ports  map[string]settingsOutcome `json:"ports"`
	} `json:"cases"`
}

func loadSettingsVectors(t *testing.T) settingsVectors {
	t.Helper()
	dir := os.Getenv("REPRISE_VECTORS")
	if dir == "" {
		dir = filepath.Join("..", "..", "conformance", "vectors")
	}
	data, err := os.ReadFile(filepath.Join(dir, "settings.json"))
	if err != nil {
		t.Fatalf("conformance vector file settings.json is missing (set REPRISE_VECTORS to the kit's folder): %v", err)
	}
	var v settingsVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("settings.json: %v", err)
	}
	if len(v.Cases) == 0 {
		t.Fatal("settings.json has no cases")
	}
	return v
}

// normalised is the settings by variable, as the vectors write them.
func normalised(s Settings) map[string]any {
	topics := make([]any, len(s.Topics))
	for i, t := range s.Topics {
		topics[i] = t
	}
	orNil := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	return map[string]any{
		"REPRISE_BOOTSTRAP_SERVERS": s.BootstrapServers, "REPRISE_KAFKA_CONFIG_DIR": orNil(s.KafkaConfigDir),
		"REPRISE_ROLE": s.Role, "REPRISE_REPLAY_ID": s.ReplayID, "REPRISE_TOPICS": topics, "REPRISE_MODE": s.Mode,
		"REPRISE_REPLAY_GROUP": orNil(s.ReplayGroup), "REPRISE_LIVE_GROUP": orNil(s.LiveGroup),
		"REPRISE_ALLOW_CLAMP": s.AllowClamp, "REPRISE_DLQ_TOPIC": orNil(s.DLQTopic),
		"REPRISE_POISON_POLICY": s.PoisonPolicy, "REPRISE_HANDLER_RETRIES": float64(s.HandlerRetries),
		"REPRISE_BATCH_SIZE": float64(s.BatchSize), "REPRISE_HANDOVER_TOPIC": s.HandoverTopic,
		"REPRISE_MAX_RECORDS_PER_SECOND": s.MaxRecordsPerSecond, "REPRISE_MAX_BYTES_PER_SECOND": s.MaxBytesPerSecond,
		"REPRISE_METRICS_PORT": float64(s.MetricsPort), "REPRISE_MEMBER_NAME": s.MemberName,
		"REPRISE_EXIT_WHEN_DONE": s.ExitWhenDone, "REPRISE_CHECK_INTERVAL": s.CheckInterval.Seconds(),
		"REPRISE_LOG_LEVEL": s.LogLevel,
	}
}

func TestConformanceSettings(t *testing.T) {
	v := loadSettingsVectors(t)
	if !slices.Equal(v.Unsupported["go"], Unsupported) {
		t.Fatalf("replay.Unsupported %v is not the published list %v", Unsupported, v.Unsupported["go"])
	}
	var compared []string
	for _, name := range v.Compared {
		if !slices.Contains(Unsupported, name) {
			compared = append(compared, name)
		}
	}
	if len(compared) < 18 {
		t.Fatalf("settings.json compares too few settings: %v", compared)
	}
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			want, ok := c.Ports["go"]
			if !ok {
				want = c.Result
			}
			s, err := SettingsFromEnv(c.Env)
			if err != nil {
				var se *SettingsError
				if !errors.As(err, &se) {
					t.Fatalf("not a SettingsError: %v", err)
				}
				if want.Error == nil || want.Error.Code != se.Code || want.Error.Field != se.Field {
					t.Fatalf("refused {%s %s} (%v), want %+v", se.Code, se.Field, err, want)
				}
				return
			}
			if want.Error != nil {
				t.Fatalf("accepted, want the refusal %+v", *want.Error)
			}
			got := normalised(s)
			for _, name := range compared {
				if !reflect.DeepEqual(got[name], want.Settings[name]) {
					t.Errorf("%s: got %#v, want %#v", name, got[name], want.Settings[name])
				}
			}
		})
	}
}
