package replay

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"reprise.io/kafka/protocol"
)

// Settings are the replay role's settings: the REPRISE_* environment the operator gives the replay
// consumers (the contract of replay_worker/settings.py). Kafka credentials are never settings: they are
// files in REPRISE_KAFKA_CONFIG_DIR, one librdkafka setting per file.
type Settings struct {
	BootstrapServers    string             // REPRISE_BOOTSTRAP_SERVERS, required
	ReplayID            string             // REPRISE_REPLAY_ID, required
	Topics              []string           // REPRISE_TOPICS, required, comma-separated
	Role                string             // REPRISE_ROLE: replay (backfill is the Python worker's)
	Mode                string             // REPRISE_MODE: Parallel, Handover or Drain (default Drain)
	ReplayGroup         string             // REPRISE_REPLAY_GROUP, required
	LiveGroup           string             // REPRISE_LIVE_GROUP, required for Parallel and Handover
	Start               protocol.StartSpec // REPRISE_START (default earliest)
	AllowClamp          bool               // REPRISE_ALLOW_CLAMP
	End                 *protocol.EndSpec  // REPRISE_END (not with Handover)
	Filter              protocol.FilterSpec
	HandoverTopic       string  // REPRISE_HANDOVER_TOPIC (default reprise.handover)
	DLQTopic            string  // REPRISE_DLQ_TOPIC
	PoisonPolicy        string  // REPRISE_POISON_POLICY: skip or dead-letter (default dead-letter with a DLQ)
	HandlerRetries      int     // REPRISE_HANDLER_RETRIES (default 2)
	BatchSize           int     // REPRISE_BATCH_SIZE (default 1000)
	MaxRecordsPerSecond float64 // REPRISE_MAX_RECORDS_PER_SECOND (0: unlimited)
	MaxBytesPerSecond   float64 // REPRISE_MAX_BYTES_PER_SECOND (0: unlimited)
	MetricsPort         int     // REPRISE_METRICS_PORT (default 9400; 0 off)
	KafkaConfigDir      string  // REPRISE_KAFKA_CONFIG_DIR
	MemberName          string  // REPRISE_MEMBER_NAME (default $HOSTNAME)
	ExitWhenDone        bool    // REPRISE_EXIT_WHEN_DONE
	CheckInterval       time.Duration
	LogLevel            string // REPRISE_LOG_LEVEL
}

// SettingsError is a missing or wrong setting; the message names the variable and what is accepted. Code and
// Field are the stable refusal every port gives for the same environment (conformance/vectors/settings.json):
// Code is required, invalid, out-of-range, conflict or unsupported; Field is the variable.
type SettingsError struct{ Code, Field, Message string }

func (e *SettingsError) Error() string { return e.Message }

func settingsErr(code, field, format string, args ...any) error {
	return &SettingsError{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Unsupported is what this role does not support, in the table's order (replay_worker/settings_table.py,
// UNSUPPORTED["go"]; the settings vectors check the two lists are equal): VARIABLE is refused with any value
// but its default, VARIABLE=value with that value. The role hands records to the service's own handler, so it
// neither forwards nor backfills, and it stops at the live group's offsets (no follow).
var Unsupported = []string{"REPRISE_ROLE=backfill", "REPRISE_FOLLOW", "REPRISE_FORWARD_TOPIC",
	"REPRISE_FORWARD_TRANSACTIONAL"}

// unsupportedAsked is the first entry of Unsupported that env asks for, or "". Empty is unset; a boolean asks
// unless it is a false spelling; VARIABLE=value asks with that value (any case).
func unsupportedAsked(env map[string]string) string {
	for _, entry := range Unsupported {
		name, value, hasValue := strings.Cut(entry, "=")
		text := strings.TrimSpace(env[name])
		if text == "" {
			continue
		}
		asks := true
		switch {
		case hasValue:
			asks = strings.EqualFold(text, value)
		case name == "REPRISE_FOLLOW" || name == "REPRISE_FORWARD_TRANSACTIONAL":
			switch strings.ToLower(text) {
			case "0", "false", "no", "off":
				asks = false
			}
		}
		if asks {
			return entry
		}
	}
	return ""
}

// Requested says whether this process was started in the replay role (the operator sets REPRISE_ROLE).
func Requested() bool { return os.Getenv("REPRISE_ROLE") != "" || os.Getenv("REPRISE_REPLAY_ID") != "" }

// SettingsFromEnv reads the REPRISE_* variables of env (os.Environ form when nil: the process environment).
// REPRISE_HANDLER is informational here: the service's own code handles the records.
func SettingsFromEnv(env map[string]string) (Settings, error) {
	if env == nil {
		env = map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "REPRISE_") {
				env[k] = v
			}
		}
	}
	get := func(name string) string { return strings.TrimSpace(env[name]) }
	s := Settings{Role: "replay", Mode: protocol.ModeDrain, Start: protocol.StartSpec{Kind: "earliest"},
		HandoverTopic: "reprise.handover", HandlerRetries: 2, BatchSize: 1000, MetricsPort: 9400,
		CheckInterval: time.Second, LogLevel: "INFO"}
	if entry := unsupportedAsked(env); entry != "" {
		name, _, _ := strings.Cut(entry, "=")
		return s, settingsErr("unsupported", name, "%s is not supported by the Go replay role: it hands the records "+
			"to the service's own handler in a replay group, never forwards, backfills or follows (use entrypoint "+
			"ReplayWorker, the Python worker)", entry)
	}
	s.BootstrapServers = get("REPRISE_BOOTSTRAP_SERVERS")
	s.ReplayID = get("REPRISE_REPLAY_ID")
	for _, t := range strings.Split(get("REPRISE_TOPICS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			s.Topics = append(s.Topics, t)
		}
	}
	if get("REPRISE_TOPICS") != "" && len(s.Topics) == 0 {
		return s, settingsErr("invalid", "REPRISE_TOPICS", "REPRISE_TOPICS: no topic given")
	}
	for _, required := range []string{"REPRISE_BOOTSTRAP_SERVERS", "REPRISE_REPLAY_ID", "REPRISE_TOPICS"} {
		if get(required) == "" {
			return s, settingsErr("required", required, "%s is required", required)
		}
	}
	if v := get("REPRISE_ROLE"); v != "" {
		if !strings.EqualFold(v, "replay") && !strings.EqualFold(v, "backfill") {
			return s, settingsErr("invalid", "REPRISE_ROLE", "REPRISE_ROLE %q is not one of replay, backfill", v)
		}
		s.Role = strings.ToLower(v)
	}
	if v := get("REPRISE_MODE"); v != "" {
		found := false
		for _, m := range []string{protocol.ModeParallel, protocol.ModeHandover, protocol.ModeDrain} {
			if strings.EqualFold(m, v) {
				s.Mode, found = m, true
			}
		}
		if !found {
			return s, settingsErr("invalid", "REPRISE_MODE", "REPRISE_MODE %q is not one of Parallel, Handover, Drain", v)
		}
	}
	s.ReplayGroup = get("REPRISE_REPLAY_GROUP")
	s.LiveGroup = get("REPRISE_LIVE_GROUP")
	var err error
	if v := get("REPRISE_START"); v != "" {
		if s.Start, err = protocol.ParseStartSpec(v, "start"); err != nil {
			return s, settingsErr("invalid", "REPRISE_START", "REPRISE_START: %v", err)
		}
	}
	if v := get("REPRISE_END"); v != "" {
		end, err := protocol.ParseEndSpec(v, "end")
		if err != nil {
			return s, settingsErr("invalid", "REPRISE_END", "REPRISE_END: %v", err)
		}
		s.End = &end
	}
	if v := get("REPRISE_FILTER"); v != "" {
		if s.Filter, err = protocol.ParseFilterSpec(v, "filter"); err != nil {
			return s, settingsErr("invalid", "REPRISE_FILTER", "REPRISE_FILTER: %v", err)
		}
	}
	if s.AllowClamp, err = boolOf(env, "REPRISE_ALLOW_CLAMP", false); err != nil {
		return s, err
	}
	if s.ExitWhenDone, err = boolOf(env, "REPRISE_EXIT_WHEN_DONE", false); err != nil {
		return s, err
	}
	if v := get("REPRISE_HANDOVER_TOPIC"); v != "" {
		s.HandoverTopic = v
	}
	s.DLQTopic = get("REPRISE_DLQ_TOPIC")
	s.PoisonPolicy = "skip"
	if s.DLQTopic != "" {
		s.PoisonPolicy = "dead-letter"
	}
	if v := strings.ToLower(get("REPRISE_POISON_POLICY")); v != "" {
		if v != "skip" && v != "dead-letter" {
			return s, settingsErr("invalid", "REPRISE_POISON_POLICY", "REPRISE_POISON_POLICY %q is not one of skip, dead-letter", v)
		}
		s.PoisonPolicy = v
	}
	ints := []struct {
		name     string
		target   *int
		min, max int
	}{{"REPRISE_HANDLER_RETRIES", &s.HandlerRetries, 0, math.MaxInt}, {"REPRISE_BATCH_SIZE", &s.BatchSize, 1, math.MaxInt},
		{"REPRISE_METRICS_PORT", &s.MetricsPort, 0, 65535}}
	for _, f := range ints {
		if v := get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return s, settingsErr("invalid", f.name, "%s %q is not a whole number", f.name, v)
			}
			if n < f.min || n > f.max {
				return s, settingsErr("out-of-range", f.name, "%s %q must be %d..%d", f.name, v, f.min, f.max)
			}
			*f.target = n
		}
	}
	floats := []struct {
		name   string
		target *float64
	}{{"REPRISE_MAX_RECORDS_PER_SECOND", &s.MaxRecordsPerSecond}, {"REPRISE_MAX_BYTES_PER_SECOND", &s.MaxBytesPerSecond}}
	for _, f := range floats {
		if v := get(f.name); v != "" {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n < 0 {
				return s, settingsErr("invalid", f.name, "%s %q must be a number >= 0", f.name, v)
			}
			*f.target = n
		}
	}
	if v := get("REPRISE_CHECK_INTERVAL"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			return s, settingsErr("invalid", "REPRISE_CHECK_INTERVAL", "REPRISE_CHECK_INTERVAL %q is not a number of seconds", v)
		}
		if n == 0 {
			return s, settingsErr("out-of-range", "REPRISE_CHECK_INTERVAL", "REPRISE_CHECK_INTERVAL must be > 0")
		}
		s.CheckInterval = time.Duration(n * float64(time.Second))
	}
	s.KafkaConfigDir = get("REPRISE_KAFKA_CONFIG_DIR")
	s.MemberName = get("REPRISE_MEMBER_NAME")
	if s.MemberName == "" {
		s.MemberName = os.Getenv("HOSTNAME")
	}
	if s.MemberName == "" {
		s.MemberName, _ = os.Hostname()
	}
	if v := strings.ToUpper(get("REPRISE_LOG_LEVEL")); v != "" {
		switch v {
		case "DEBUG", "INFO", "WARNING", "ERROR":
			s.LogLevel = v
		default:
			return s, settingsErr("invalid", "REPRISE_LOG_LEVEL", "REPRISE_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR")
		}
	}
	return s, s.validate()
}

func boolOf(env map[string]string, name string, fallback bool) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(env[name])) {
	case "":
		return fallback, nil
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, settingsErr("invalid", name, "%s %q is not a boolean (true or false)", name, env[name])
}

func (s Settings) validate() error {
	if s.ReplayGroup == "" {
		return settingsErr("required", "REPRISE_REPLAY_GROUP", "REPRISE_REPLAY_GROUP is required for role replay")
	}
	if s.Mode == protocol.ModeParallel || s.Mode == protocol.ModeHandover {
		if s.LiveGroup == "" {
			return settingsErr("required", "REPRISE_LIVE_GROUP", "REPRISE_LIVE_GROUP is required in mode %s", s.Mode)
		}
		if s.LiveGroup == s.ReplayGroup {
			return settingsErr("conflict", "REPRISE_LIVE_GROUP",
				"REPRISE_LIVE_GROUP and REPRISE_REPLAY_GROUP must differ: the replay runs in a group of its own")
		}
	}
	if s.Mode == protocol.ModeHandover && s.End != nil {
		return settingsErr("conflict", "REPRISE_END", "REPRISE_END cannot be used with mode Handover: the live "+
			"group takes over at the handover offset, so the replay has no end of its own")
	}
	if s.PoisonPolicy == "dead-letter" && s.DLQTopic == "" {
		return settingsErr("conflict", "REPRISE_POISON_POLICY", "REPRISE_POISON_POLICY=dead-letter needs REPRISE_DLQ_TOPIC")
	}
	return nil
}

// LoadConfigDir reads librdkafka settings from a folder, one per file (file name = key); dot-files (the
// `..data` links of a mounted Secret) are skipped and one trailing newline is removed. Values are
// credentials: they go to librdkafka and nowhere else (errors name the file, never the value).
func LoadConfigDir(dir string) (map[string]string, error) {
	out := map[string]string{}
	if dir == "" {
		return out, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, settingsErr("invalid", "REPRISE_KAFKA_CONFIG_DIR", "REPRISE_KAFKA_CONFIG_DIR %s is not a readable directory", dir)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, settingsErr("invalid", "REPRISE_KAFKA_CONFIG_DIR", "cannot read Kafka setting file %s", path)
		}
		out[e.Name()] = strings.TrimSuffix(string(data), "\n")
	}
	return out, nil
}
