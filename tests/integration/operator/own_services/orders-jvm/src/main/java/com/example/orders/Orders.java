package com.example.orders;

import io.reprise.kafka.guard.GuardedConsumer;
import io.reprise.kafka.replay.ReplayRole;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;

/** A user's orders service, written from docs/own-service.md: the replay role, then the guarded live loop. */
public final class Orders {

    private Orders() {
    }

    static void append(String side, String text) throws IOException {
        Path file = Path.of(System.getenv("ORDERS_LEDGER_DIR"), "java-" + side + "-" + ProcessHandle.current().pid() + ".log");
        Files.writeString(file, text, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    static String line(String side, ConsumerRecord<String, String> r, String group) {
        return side + " " + r.topic() + " " + r.partition() + " " + r.offset() + " " + group + "\n";
    }

    public static void main(String[] args) throws Exception {
        String group = System.getenv("ORDERS_GROUP");
        Map<String, Object> config = Map.of("bootstrap.servers", System.getenv("ORDERS_BOOTSTRAP_SERVERS"),
                "group.id", group, "enable.auto.commit", false, "auto.offset.reset", "earliest");
        String replayGroup = System.getenv().getOrDefault("REPRISE_REPLAY_GROUP", "replay");
        ReplayRole.runIfRequested(config, new StringDeserializer(), new StringDeserializer(), records -> {
            StringBuilder text = new StringBuilder();
            records.forEach(r -> text.append(line("R", r, replayGroup)));
            append("R", text.toString());
        });
        Consumer<String, String> consumer =
                GuardedConsumer.create(config, new StringDeserializer(), new StringDeserializer());
        consumer.subscribe(List.of(System.getenv("ORDERS_TOPIC")));
        Runtime.getRuntime().addShutdownHook(new Thread(consumer::wakeup));
        try {
            while (true) {
                StringBuilder text = new StringBuilder();
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofSeconds(1))) {
                    text.append(line("L", r, group));
                }
                if (text.length() > 0) {
                    append("L", text.toString());
                    try {
                        consumer.commitSync();
                    } catch (org.apache.kafka.clients.consumer.CommitFailedException
                             | org.apache.kafka.common.errors.RebalanceInProgressException rebalance) {
                        // A commit during a rebalance: the partition's new owner re-reads what was not committed.
                        System.err.println("commit failed: " + rebalance.getMessage());
                    }
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException stopping) {
            consumer.close();
        }
    }
}
