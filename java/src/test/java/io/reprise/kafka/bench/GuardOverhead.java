package io.reprise.kafka.bench;

import io.reprise.kafka.guard.GuardSettings;
import io.reprise.kafka.guard.GuardedConsumer;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The Java guard's overhead with no replay active, against a bare {@link KafkaConsumer} loop (benchmarks/java_guard.py
 * runs it on its own broker and topic, and reads the JSON line it prints).
 *
 * <pre>java ... io.reprise.kafka.bench.GuardOverhead BOOTSTRAP TOPIC RECORDS ROUNDS</pre>
 *
 * Both loops read the whole topic from the beginning in a fresh group, call the same no-op handler on every record
 * (it reads the value's length) and commit after every poll; the clock runs from the first record to the last, so
 * the group join is not measured. After an uncounted warm-up of each, the runs are interleaved (bare, guarded,
 * guarded, bare, ...), every run is printed, and the best of each kind counts: on a shared machine the spread
 * between two runs of one loop is larger than the difference measured, and the best run is the one least disturbed.
 */
public final class GuardOverhead {
    private GuardOverhead() {
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        long records = Long.parseLong(args[2]);
        int rounds = Integer.parseInt(args[3]);
        // A warm-up of each loop, not counted: the JIT compiles the client's and the guard's code paths first.
        run(bootstrap, topic, Math.max(1, records / 4), false);
        run(bootstrap, topic, Math.max(1, records / 4), true);
        List<Double> bare = new ArrayList<>();
        List<Double> guarded = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            boolean guardFirst = round % 2 == 1;
            for (int k = 0; k < 2; k++) {
                boolean guard = (k == 0) == guardFirst;
                double rate = run(bootstrap, topic, records, guard);
                (guard ? guarded : bare).add(rate);
                System.err.printf("round %d %s: %.0f records/s%n", round, guard ? "guarded" : "bare", rate);
            }
        }
        double bestBare = bare.stream().mapToDouble(Double::doubleValue).max().orElse(0);
        double bestGuarded = guarded.stream().mapToDouble(Double::doubleValue).max().orElse(0);
        System.out.printf("{\"bare_records_per_s\":%s,\"guarded_records_per_s\":%s,\"bare_runs\":%s,\"guarded_runs\":%s,"
                        + "\"guard_ratio\":%.4f}%n", Math.round(bestBare), Math.round(bestGuarded), rates(bare), rates(guarded),
                bestGuarded / bestBare);
    }

    private static String rates(List<Double> rates) {
        return rates.stream().map(r -> Long.toString(Math.round(r))).toList().toString();
    }

    static long handled;

    /** The no-op handler both loops call. */
    static void handle(ConsumerRecord<byte[], byte[]> record) {
        handled += record.value() == null ? 0 : record.value().length;
    }

    private static double run(String bootstrap, String topic, long records, boolean guard) {
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", "bench-" + (guard ? "guarded-" : "bare-") + UUID.randomUUID());
        config.put("enable.auto.commit", false);
        config.put("auto.offset.reset", "earliest");
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> raw = new KafkaConsumer<>(config);
        Consumer<byte[], byte[]> consumer = guard
                ? GuardedConsumer.wrap(raw, GuardSettings.from(config).withHandoverTopic("reprise.handover").withMember("bench"))
                : raw;
        try {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            long seen = 0;
            long began = 0;
            while (seen < records) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
                if (batch.isEmpty()) {
                    continue;
                }
                if (began == 0) {
                    began = System.nanoTime();
                }
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    handle(record);
                }
                seen += batch.count();
                consumer.commitAsync();
            }
            double seconds = (System.nanoTime() - began) / 1e9;
            consumer.commitSync();
            return seen / seconds;
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }
}
