// A user's orders service in Go, written from docs/own-service.md: the guard on the live side, the replay
// role with the service's own settings on the replay side.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/guard"
	"reprise.io/kafka/replay"
)

func ledger(side string) *os.File {
	path := filepath.Join(os.Getenv("ORDERS_LEDGER_DIR"), fmt.Sprintf("go-%s-%d.log", side, os.Getpid()))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	return f
}

func line(side string, m *kafka.Message, group string) string {
	return fmt.Sprintf("%s %s %d %d %s\n", side, *m.TopicPartition.Topic, m.TopicPartition.Partition,
		m.TopicPartition.Offset, group)
}

func main() {
	group := os.Getenv("ORDERS_GROUP")
	config := &kafka.ConfigMap{"bootstrap.servers": os.Getenv("ORDERS_BOOTSTRAP_SERVERS"), "group.id": group,
		"enable.auto.offset.store": false, "auto.offset.reset": "earliest"}
	if replay.Requested() {
		out := ledger("R")
		replayGroup := os.Getenv("REPRISE_REPLAY_GROUP")
		os.Exit(replay.Main(replay.HandlerFunc(func(ctx context.Context, records []*kafka.Message) error {
			text := ""
			for _, m := range records {
				text += line("R", m, replayGroup)
			}
			_, err := out.WriteString(text)
			return err
		}), replay.WithServiceConfig(config)))
	}
	consumer, err := guard.NewConsumer(config)
	if err != nil {
		panic(err)
	}
	if err := consumer.SubscribeTopics([]string{os.Getenv("ORDERS_TOPIC")}, nil); err != nil {
		panic(err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	out := ledger("L")
	for running := true; running; {
		select {
		case <-stop:
			running = false
			continue
		default:
		}
		m, err := consumer.ReadMessage(time.Second)
		if err != nil {
			continue
		}
		if _, err := out.WriteString(line("L", m, group)); err != nil {
			panic(err)
		}
		if _, err := consumer.StoreMessage(m); err != nil {
			fmt.Fprintln(os.Stderr, "store:", err)
		}
	}
	consumer.Commit()
	consumer.Close()
}
