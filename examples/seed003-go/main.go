// Seed 003's replay consumer, written the exact way.
//
// The seed (../../../shared/seeds/003: "Replaying Kafka Messages, An Implementation in Golang") runs one
// binary in two ways: live, and in "replay mode" as a standby Deployment, where its rebalance handler seeks
// every assigned partition to the replay timestamp. That re-seek runs on every rebalance, so each replica
// that joins makes every replica replay again. Here the same binary:
//
//   - live: builds its consumer with guard.NewConsumer instead of kafka.NewConsumer (the only change), so
//     during a Handover replay it leaves the records the replay covers to the replay;
//   - replay: when the operator starts it with the REPRISE_* environment (spec.consumer.entrypoint:
//     Service), hands the same record handler to replay.Main, which resolves the start once (a Kafka
//     transaction), resumes every replica from committed offsets, and never seeks on a rebalance.
//
// Settings (live): BOOTSTRAP_SERVERS, TOPIC, GROUP_ID, LEDGER_FILE, PROCESS_DELAY_MS, HANDOVER_TOPIC (the
// guard's; default reprise.handover), AUTO_COMMIT_INTERVAL_MS (librdkafka's, default 5000). LEDGER_DIR, if
// set, puts the ledger in <dir>/<group>-<pid>.log instead: replicas of one Deployment share their settings,
// and a checker must tell which process (a killed one?) wrote which lines.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/guard"
	"reprise.io/kafka/replay"
)

func main() {
	delay, _ := strconv.Atoi(os.Getenv("PROCESS_DELAY_MS"))
	group := os.Getenv("GROUP_ID")
	if replay.Requested() {
		group = os.Getenv("REPRISE_REPLAY_GROUP")
	}
	path := envOr("LEDGER_FILE", "ledger.txt")
	if dir := os.Getenv("LEDGER_DIR"); dir != "" {
		path = filepath.Join(dir, fmt.Sprintf("%s-%d.log", group, os.Getpid()))
	}
	book, err := openLedger(path, group, time.Duration(delay)*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	defer book.close()
	if replay.Requested() {
		// The replay role: the same handler, under the replay protocol.
		code := replay.Main(replay.HandlerFunc(func(_ context.Context, records []*kafka.Message) error {
			for _, m := range records {
				if err := book.apply(m); err != nil {
					return err
				}
			}
			return nil
		}))
		book.close()
		os.Exit(code)
	}
	if err := live(book, group); err != nil {
		log.Fatal(err)
	}
}

func isNoOffset(err error) bool {
	var kerr kafka.Error
	return errors.As(err, &kerr) && kerr.Code() == kafka.ErrNoOffset
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// live is the seed's consumer loop, minus the replay mode: the guard takes care of replays.
func live(book *ledger, group string) error {
	for _, required := range []string{"BOOTSTRAP_SERVERS", "TOPIC", "GROUP_ID"} {
		if os.Getenv(required) == "" {
			return fmt.Errorf("%s is required", required)
		}
	}
	interval, _ := strconv.Atoi(envOr("AUTO_COMMIT_INTERVAL_MS", "5000"))
	consumer, err := guard.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":       os.Getenv("BOOTSTRAP_SERVERS"),
		"group.id":                group,
		"auto.offset.reset":       "earliest",
		"session.timeout.ms":      10000,
		"auto.commit.interval.ms": interval,
	}, guard.Options{HandoverTopic: os.Getenv("HANDOVER_TOPIC")})
	if err != nil {
		return err
	}
	if err := consumer.SubscribeTopics([]string{os.Getenv("TOPIC")}, func(_ *kafka.Consumer, ev kafka.Event) error {
		switch e := ev.(type) {
		case kafka.AssignedPartitions:
			// The seed logged its assignment and, in replay mode, seeked here: no seek, ever.
			log.Printf("Assigned/Re-assigned Partitions: %v", e.Partitions)
		case kafka.RevokedPartitions:
			log.Printf("Revoked Partitions: %v", e.Partitions)
			// Commit what was processed before the partitions move, through the guard (which attaches its
			// mark): otherwise the new owner processes again up to an auto-commit interval of records.
			if _, err := consumer.Commit(); err != nil && !isNoOffset(err) {
				log.Printf("commit on revoke: %v", err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case <-stop:
			return consumer.Close()
		default:
		}
		msg, err := consumer.ReadMessage(200 * time.Millisecond)
		if err != nil {
			var kerr kafka.Error
			if errors.As(err, &kerr) && kerr.IsTimeout() {
				continue
			}
			log.Printf("consumer error: %v", err)
			continue
		}
		if err := book.apply(msg); err != nil {
			return err
		}
	}
}
