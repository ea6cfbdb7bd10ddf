package io.reprise.kafka.guard;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A live service for the interoperability tests (tests/integration/java): a Java guarded consumer that records what
 * it processes, the twin of tests/integration/replay_worker/live_service.py.
 *
 * <pre>java ... io.reprise.kafka.guard.LedgerLiveService BOOTSTRAP GROUP TOPIC OUT_DIR HANDOVER_TOPIC</pre>
 *
 * Appends {@code L <topic> <partition> <offset>} per processed record to {@code OUT_DIR/live-<pid>.log} (one write
 * per batch), then commits synchronously: at-least-once, with the batch as the duplicate window. SIGTERM stops it
 * after the batch.
 */
public final class LedgerLiveService {
    private LedgerLiveService() {}

    public static void main(String[] args) throws IOException, InterruptedException {
        String bootstrap = args[0];
        String group = args[1];
        String topic = args[2];
        Path outDir = Path.of(args[3]);
        String handoverTopic = args.length > 4 ? args[4] : "reprise.handover";
        int batch = Integer.parseInt(System.getenv().getOrDefault("LIVE_BATCH", "200"));
        long pid = ProcessHandle.current().pid();
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("enable.auto.commit", false);
        config.put("auto.offset.reset", "earliest");
        config.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
        config.put("session.timeout.ms", 6000);
        config.put("heartbeat.interval.ms", 500);
        config.put("max.poll.records", batch);
        GuardSettings settings =
                GuardSettings.from(config).withHandoverTopic(handoverTopic).withMember("live-" + pid);
        Map<String, Object> inner = new HashMap<>(config);
        inner.put("key.deserializer", ByteArrayDeserializer.class.getName());
        inner.put("value.deserializer", ByteArrayDeserializer.class.getName());
        GuardedConsumer<byte[], byte[]> live = GuardedConsumer.wrap(
                new org.apache.kafka.clients.consumer.KafkaConsumer<>(inner), settings.withAutoCommit(false));
        CountDownLatch stopped = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            live.wakeup();
            try {
                stopped.await();
            } catch (InterruptedException e) {
                main.interrupt();
            }
        }));
        try (FileOutputStream out =
                new FileOutputStream(outDir.resolve("live-" + pid + ".log").toFile(), true)) {
            live.subscribe(List.of(topic));
            boolean uncommitted = false;
            while (true) {
                ConsumerRecords<byte[], byte[]> records = live.poll(Duration.ofMillis(200));
                if (!records.isEmpty()) {
                    StringBuilder lines = new StringBuilder();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        lines.append("L ")
                                .append(r.topic())
                                .append(' ')
                                .append(r.partition())
                                .append(' ')
                                .append(r.offset())
                                .append('\n');
                    }
                    out.write(lines.toString().getBytes(StandardCharsets.UTF_8));
                    uncommitted = true;
                }
                if (uncommitted) {
                    try {
                        live.commitSync();
                        uncommitted = false;
                    } catch (WakeupException e) {
                        throw e;
                    } catch (RuntimeException e) {
                        // Refused while the group rebalances (a Java consumer commits only in a stable generation):
                        // tried again after the next poll. Until then the batch is the duplicate window.
                        System.err.println("commit failed, retried after the next poll: " + e);
                    }
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: stop after the batch
        } finally {
            try {
                live.close(Duration.ofSeconds(10));
            } finally {
                stopped.countDown();
            }
        }
    }
}
