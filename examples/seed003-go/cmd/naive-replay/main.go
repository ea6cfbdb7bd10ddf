// naive-replay is seed 003's replay consumer as the seed wrote it, kept to show its bug: in replay mode,
// every AssignedPartitions event rewinds the assigned partitions to the replay timestamp
// (OffsetsForTimes, then Assign with those offsets). A rebalance (any replica joining or leaving) makes
// every replica replay again. Do not copy it; ../../main.go is the same service written the exact way.
//
// Settings: BOOTSTRAP_SERVERS, TOPIC, GROUP_ID, LEDGER_FILE, REPLAY_FROM (RFC 3339), PROCESS_DELAY_MS.
package main

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func main() {
	delay, _ := strconv.Atoi(os.Getenv("PROCESS_DELAY_MS"))
	from, err := time.Parse(time.RFC3339Nano, os.Getenv("REPLAY_FROM"))
	if err != nil {
		log.Fatalf("failed to parse replay timestamp %s due to error %v", os.Getenv("REPLAY_FROM"), err)
	}
	ledger, err := os.OpenFile(os.Getenv("LEDGER_FILE"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer ledger.Close()
	group := os.Getenv("GROUP_ID")
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": os.Getenv("BOOTSTRAP_SERVERS"),
		"group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
	if err != nil {
		log.Fatal(err)
	}
	err = c.SubscribeTopics([]string{os.Getenv("TOPIC")}, func(c *kafka.Consumer, ev kafka.Event) error {
		switch e := ev.(type) {
		case kafka.AssignedPartitions:
			if len(e.Partitions) == 0 {
				return nil
			}
			log.Printf("Assigned/Re-assigned Partitions: %v", e.Partitions)
			// The seed's resetPartitionOffsetsToTimestamp, on every assignment.
			var prs []kafka.TopicPartition
			for _, p := range e.Partitions {
				prs = append(prs, kafka.TopicPartition{Topic: p.Topic, Partition: p.Partition,
					Offset: kafka.Offset(from.UnixNano() / int64(time.Millisecond))})
			}
			updated, err := c.OffsetsForTimes(prs, 5000)
			if err != nil {
				log.Fatalf("error trying to reset offsets to timestamp: %v", err)
			}
			return c.Assign(updated)
		case kafka.RevokedPartitions:
			return c.Unassign()
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case <-stop:
			_ = c.Close()
			return
		default:
		}
		msg, err := c.ReadMessage(200 * time.Millisecond)
		if err != nil {
			continue
		}
		if delay > 0 {
			time.Sleep(time.Duration(delay) * time.Millisecond)
		}
		fmt.Fprintf(ledger, "%s %s %d %d\n", group, *msg.TopicPartition.Topic, msg.TopicPartition.Partition,
			msg.TopicPartition.Offset)
	}
}
