// Package replay is the replay role for Go services: the service's own binary, started by the operator
// with the REPRISE_* environment (spec.consumer.entrypoint: Service), runs its record handler under the
// replay protocol of HANDOVER.md section 5:
//
//	func main() {
//	    config := &kafka.ConfigMap{"bootstrap.servers": servers, "group.id": "orders", ...}
//	    if replay.Requested() {
//	        os.Exit(replay.Main(replay.HandlerFunc(handleBatch), replay.WithServiceConfig(config)))
//	    }
//	    ... the live service, with guard.NewConsumer(config) ...
//	}
//
// The role's Kafka settings, later ones winning (as the Java role's runIfRequested(config, ...)): the
// service's own consumer settings given with WithServiceConfig (its security settings serve the replay too;
// its group, client id, offset and assignment settings do not, see ServiceOnly), the files of
// REPRISE_KAFKA_CONFIG_DIR (the Secret of spec.kafka.configFrom), and REPRISE_BOOTSTRAP_SERVERS; on top the
// role's own (manual commits, read_committed, idempotent producers), which neither can switch off.
//
// What it does: the bootstrap transaction (S resolved once by whichever replica wins), resume from
// committed offsets with no seek on rebalance, finish marks then H published, progress records, the
// Parallel/Handover/Drain stop rules, throttling, graceful SIGTERM, poison records to the dead-letter topic
// or counted and skipped, and /metrics, /healthz, /readyz on REPRISE_METRICS_PORT.
package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/handovertopic"
	"reprise.io/kafka/protocol"
)

// Exit codes of Main, the Python worker's: 0 done or stopped; 2 bad settings; 3 the start cannot be
// honoured; 1 anything else (Kubernetes restarts the pod, which resumes from committed offsets).
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitBadSettings = 2
	ExitStart       = 3
)

type loggerKey struct{}

func logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// Option adds to what Main takes from the environment.
type Option func(*options)

type options struct {
	service kafka.ConfigMap
}

// WithServiceConfig gives the role the service's own consumer settings: the settings that reach Kafka
// (security, timeouts, bootstrap.servers) serve the replay's clients too, so a service's SASL/TLS settings need
// not be copied into Reprise's Secret. The keys of ServiceOnly are left out; the map is not changed.
func WithServiceConfig(config *kafka.ConfigMap) Option {
	return func(o *options) {
		if config == nil {
			return
		}
		o.service = kafka.ConfigMap{}
		for k, v := range *config {
			if !ServiceOnly(k) {
				o.service[k] = v
			}
		}
	}
}

// ServiceOnly reports whether a setting of the service's consumer belongs to its own group membership, offset
// handling or Go channels, not to the replay's clients (the Java role leaves out the same kinds of keys).
func ServiceOnly(key string) bool {
	switch key {
	case "group.id", "group.instance.id", "group.protocol", "client.id", "enable.auto.commit",
		"enable.auto.offset.store", "auto.commit.interval.ms", "auto.offset.reset", "isolation.level",
		"partition.assignment.strategy", "enable.partition.eof":
		return true
	}
	return strings.HasPrefix(key, "go.")
}

// Main reads the settings from the environment, runs the replay until SIGTERM/SIGINT (or, with
// REPRISE_EXIT_WHEN_DONE, until every partition is finished) and returns the process exit code.
func Main(handler Handler, opts ...Option) int {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	settings, err := SettingsFromEnv(nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "replay role: %v\n", err)
		return ExitBadSettings
	}
	level := map[string]slog.Level{"DEBUG": slog.LevelDebug, "INFO": slog.LevelInfo, "WARNING": slog.LevelWarn,
		"ERROR": slog.LevelError}[settings.LogLevel]
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With(
		"replay_id", settings.ReplayID, "member", settings.MemberName)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = RunWithServiceConfig(context.WithValue(ctx, loggerKey{}, log), settings, o.service, handler)
	var settingsErr *SettingsError
	var retention *protocol.StartOlderThanRetention
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &settingsErr):
		log.Error(err.Error())
		return ExitBadSettings
	case errors.Is(err, protocol.ErrSpec) || errors.As(err, &retention):
		log.Error(err.Error(), "reason", "StartNotAvailable")
		return ExitStart
	default:
		log.Error("replay role failed", "error", err)
		return ExitFailed
	}
}

// KafkaSettings are the role's client settings before its own go on top: the service's (less ServiceOnly),
// then the Secret's files, then REPRISE_BOOTSTRAP_SERVERS; later ones win.
func KafkaSettings(service kafka.ConfigMap, files map[string]string, bootstrap string) kafka.ConfigMap {
	config := kafka.ConfigMap{}
	for k, v := range service {
		if !ServiceOnly(k) {
			config[k] = v
		}
	}
	for k, v := range files {
		config[k] = v
	}
	config["bootstrap.servers"] = bootstrap
	return config
}

// Run bootstraps the replay and runs one replica until ctx ends or (ExitWhenDone) the replay is finished.
// A logger may ride on ctx (see Main); slog.Default() otherwise.
func Run(ctx context.Context, s Settings, handler Handler) error {
	return RunWithServiceConfig(ctx, s, nil, handler)
}

// RunWithServiceConfig is Run with the service's own settings under the Secret's (see WithServiceConfig;
// the keys of ServiceOnly are left out here too).
func RunWithServiceConfig(ctx context.Context, s Settings, service kafka.ConfigMap, handler Handler) error {
	log := logger(ctx)
	files, err := LoadConfigDir(s.KafkaConfigDir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	config := KafkaSettings(service, files, s.BootstrapServers)
	base := handovertopic.Connection(config, "reprise-"+s.MemberName)
	// Settings from the config folder that are not connection settings (they are the user's) still apply.
	for k, v := range config {
		if _, ok := base[k]; !ok && !strings.HasPrefix(k, "group.") {
			base[k] = v
		}
	}
	log.Info("starting the replay role", "mode", s.Mode, "topics", s.Topics, "replay_group", s.ReplayGroup,
		"kafka_config_keys", names)
	metrics := NewMetrics(s.ReplayID, s.MemberName)
	if s.MetricsPort > 0 {
		// Served from the start: alive (not ready) while the bootstrap retries against a Kafka that is away.
		serveCtx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if _, err := metrics.Serve(serveCtx, s.MetricsPort); err != nil {
			return &SettingsError{Code: "invalid", Field: "REPRISE_METRICS_PORT", Message: err.Error()}
		}
	}
	state, err := Bootstrap(ctx, s, base)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped during the bootstrap
		}
		return err
	}
	worker, err := NewWorker(s, base, handler, metrics, state, log)
	if err != nil {
		return err
	}
	return worker.Run(ctx)
}
