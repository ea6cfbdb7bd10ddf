package io.reprise.kafka.replay;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One run of the replay-role benchmark ({@code benchmarks/java_replay.py}): a no-op handler fed either by a bare
 * {@code KafkaConsumer} loop ({@code bare}: poll, handle, commit asynchronously) or by the replay role in Drain mode
 * ({@code replay}), over the whole topic. Both get {@code max.poll.records} = the batch size and the same handler, so
 * they compare the loop, not fetch tuning. Prints one JSON line: records, seconds from the first batch handed to the
 * handler to the last (the throughput), and the wall time including start-up (the role's bootstrap, the group join).
 *
 * <pre>java -cp ... io.reprise.kafka.replay.ReplayBenchMain bare|replay BOOTSTRAP TOPIC RECORDS GROUP [HANDOVER_TOPIC]</pre>
 */
public final class ReplayBenchMain {

    static final int BATCH = 1000;

    private ReplayBenchMain() {
    }

    /** The handler both loops call: counts, and notes when the first and the last record arrived. */
    static final class NoOp implements RecordsHandler<byte[], byte[]> {
        final long total;
        final AtomicLong seen = new AtomicLong();
        volatile long first;
        volatile long last;

        NoOp(long total) {
            this.total = total;
        }

        @Override
        public void handle(List<ConsumerRecord<byte[], byte[]>> records) {
            if (records.isEmpty()) {
                return;
            }
            if (first == 0) {
                first = System.nanoTime();
            }
            if (seen.addAndGet(records.size()) >= total) {
                last = System.nanoTime();
            }
        }
    }

    public static void main(String[] args) {
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        long records = Long.parseLong(args[3]);
        String group = args[4];
        NoOp handler = new NoOp(records);
        long began = System.nanoTime();
        if (mode.equals("bare")) {
            bare(bootstrap, topic, group, handler);
        } else {
            Map<String, String> env = new HashMap<>(Map.of("REPRISE_BOOTSTRAP_SERVERS", bootstrap,
                    "REPRISE_REPLAY_ID", "bench/" + group, "REPRISE_TOPICS", topic, "REPRISE_REPLAY_GROUP", group,
                    "REPRISE_HANDOVER_TOPIC", args.length > 5 ? args[5] : "reprise.handover",
                    "REPRISE_METRICS_PORT", "0", "REPRISE_EXIT_WHEN_DONE", "true",
                    "REPRISE_BATCH_SIZE", String.valueOf(BATCH), "REPRISE_MEMBER_NAME", "bench"));
            int code = ReplayRole.create(env, Map.of(), new ByteArrayDeserializer(), new ByteArrayDeserializer(), handler).run();
            if (code != 0) {
                throw new IllegalStateException("the replay role exited with " + code);
            }
        }
        long wall = System.nanoTime() - began;
        if (handler.seen.get() < records) {
            throw new IllegalStateException("handled " + handler.seen.get() + " of " + records + " records");
        }
        double seconds = (handler.last - handler.first) / 1e9;
        System.out.printf("{\"mode\":\"%s\",\"records\":%d,\"seconds\":%.3f,\"rate\":%.1f,\"wall_seconds\":%.3f}%n",
                mode, handler.seen.get(), seconds, handler.seen.get() / seconds, wall / 1e9);
    }

    /** The loop a service writes: subscribe, poll, handle, commit asynchronously. */
    static void bare(String bootstrap, String topic, String group, NoOp handler) {
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("enable.auto.commit", false);
        config.put("auto.offset.reset", "earliest");
        config.put("max.poll.records", BATCH);
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            consumer.subscribe(List.of(topic));
            while (handler.seen.get() < handler.total) {
                List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>();
                consumer.poll(Duration.ofMillis(200)).forEach(batch::add);
                try {
                    handler.handle(batch);
                } catch (Exception impossible) {
                    throw new IllegalStateException(impossible);
                }
                if (!batch.isEmpty()) {
                    consumer.commitAsync();
                }
            }
            consumer.commitSync();
        }
    }
}
