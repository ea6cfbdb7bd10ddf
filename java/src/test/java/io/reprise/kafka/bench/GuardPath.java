package io.reprise.kafka.bench;

import io.reprise.kafka.guard.GuardSettings;
import io.reprise.kafka.guard.GuardedConsumer;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java guard's per-record path with no replay active, apart from Kafka: GuardOverhead's loop over batches held
 * in memory, bare and through the guard, in one JVM (benchmarks/guard_path.py runs it; a tool, not a test).
 *
 * <pre>java ... io.reprise.kafka.bench.GuardPath BOOTSTRAP HANDOVER_TOPIC [RECORDS [WARM [ROUNDS]]]</pre>
 *
 * The batches are fixed: 1 KiB values over 12 partitions, 500 records of one partition a batch (a poll of
 * {@code max.poll.records}' default), made before anything runs. {@link Fixed}, a {@link MockConsumer}, hands
 * them out as a {@code KafkaConsumer}'s poll would (positions moved, nothing copied) and takes commits at once;
 * its {@code commitAsync()} builds the offsets of every assigned partition, as the real one does. So both loops do
 * what they do around the consumer and nothing of Kafka's. The guard's handover-topic tail runs against a real
 * broker (BOOTSTRAP, an empty HANDOVER_TOPIC), so its partitions are released as in a live service.
 *
 * <p>After WARM runs of each loop (the JIT compiles both paths), ROUNDS rounds in ABBA order; each run reports the
 * loop thread's CPU per record (the guard adds no work to other threads per record) and the bytes it allocated per
 * record (what the collector pays for, and a figure the neighbours cannot move). The last line is JSON.
 */
public final class GuardPath {
    static final String TOPIC = "bench-source";
    static final int PARTITIONS = 12;
    static final int BATCH = 500;

    private GuardPath() {}

    /** Fixed batches as a consumer's poll returns them; commits taken at once. */
    static final class Fixed extends MockConsumer<byte[], byte[]> {
        private final List<ConsumerRecords<byte[], byte[]>> batches;
        private final long[] positions = new long[PARTITIONS];
        private final List<TopicPartition> partitions = new ArrayList<>();
        private int next;
        private boolean armed;
        Map<TopicPartition, OffsetAndMetadata> lastCommit;

        Fixed(List<ConsumerRecords<byte[], byte[]>> batches) {
            super("earliest");
            this.batches = batches;
            for (int p = 0; p < PARTITIONS; p++) {
                partitions.add(new TopicPartition(TOPIC, p));
            }
        }

        @Override
        public synchronized ConsumerRecords<byte[], byte[]> poll(Duration timeout) {
            if (!armed || next == batches.size()) {
                return ConsumerRecords.empty();
            }
            ConsumerRecords<byte[], byte[]> batch = batches.get(next++);
            batch.nextOffsets().forEach((tp, oam) -> positions[tp.partition()] = oam.offset());
            return batch;
        }

        /** What a KafkaConsumer commits without offsets: the position of every assigned partition. */
        @Override
        public synchronized void commitAsync(OffsetCommitCallback callback) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : partitions) {
                if (positions[tp.partition()] > 0) {
                    offsets.put(tp, new OffsetAndMetadata(positions[tp.partition()], Optional.empty(), ""));
                }
            }
            commitAsync(offsets, callback);
        }

        @Override
        public synchronized void commitAsync() {
            commitAsync((OffsetCommitCallback) null);
        }

        @Override
        public synchronized void commitAsync(
                Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) {
            lastCommit = offsets;
        }
    }

    static List<ConsumerRecords<byte[], byte[]>> batches(long records) {
        List<byte[]> values = new ArrayList<>();
        for (int v = 0; v < 64; v++) {
            byte[] value = new byte[1024];
            for (int i = 0; i < value.length; i++) {
                value[i] = (byte) ('a' + (v + i) % 26);
            }
            values.add(value);
        }
        long[] offsets = new long[PARTITIONS];
        List<ConsumerRecords<byte[], byte[]>> out = new ArrayList<>();
        for (long made = 0, p = 0; made < records; made += BATCH, p = (p + 1) % PARTITIONS) {
            TopicPartition tp = new TopicPartition(TOPIC, (int) p);
            List<ConsumerRecord<byte[], byte[]>> list = new ArrayList<>(BATCH);
            for (int i = 0; i < BATCH; i++) {
                long offset = offsets[(int) p]++;
                list.add(new ConsumerRecord<>(
                        TOPIC, (int) p, offset, Long.toString(offset).getBytes(), values.get((int) (offset % 64))));
            }
            out.add(new ConsumerRecords<>(Map.of(tp, list), Map.of(tp, new OffsetAndMetadata(offsets[(int) p]))));
        }
        return out;
    }

    record Run(boolean guarded, long records, double cpuNanos, double allocated) {
        String json(int round) {
            return String.format(
                    Locale.ROOT,
                    "{\"loop\":\"%s\",\"round\":%d,\"records\":%d,\"cpu_ns\":%.1f," + "\"allocated_bytes\":%.1f}",
                    guarded ? "guarded" : "bare",
                    round,
                    records,
                    cpuNanos,
                    allocated);
        }
    }

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    static long handled;

    static Run run(
            String bootstrap,
            String handoverTopic,
            List<ConsumerRecords<byte[], byte[]>> batches,
            long records,
            boolean guard) {
        Fixed fixed = new Fixed(batches);
        Map<String, Object> config =
                Map.of("bootstrap.servers", bootstrap, "group.id", "guard-path", "enable.auto.commit", false);
        Consumer<byte[], byte[]> consumer = guard
                ? GuardedConsumer.wrap(
                        fixed,
                        GuardSettings.from(config)
                                .withHandoverTopic(handoverTopic)
                                .withMember("path"))
                : fixed;
        try {
            consumer.assign(fixed.partitions);
            if (guard) {
                // Until the guard's view is current and the partitions released (its tail reads the empty topic).
                long until = System.nanoTime() + 3_000_000_000L;
                while (System.nanoTime() < until) {
                    consumer.poll(Duration.ofMillis(50));
                }
            }
            fixed.armed = true;
            long seen = 0;
            long cpu = THREADS.getCurrentThreadCpuTime();
            long bytes = THREADS.getCurrentThreadAllocatedBytes();
            while (seen < records) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
                if (batch.isEmpty()) {
                    throw new IllegalStateException("no records after " + seen + ": the guard held its partitions");
                }
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    handled += record.value() == null ? 0 : record.value().length;
                }
                seen += batch.count();
                consumer.commitAsync();
            }
            double cpuNanos = THREADS.getCurrentThreadCpuTime() - cpu;
            double allocated = THREADS.getCurrentThreadAllocatedBytes() - bytes;
            if (fixed.lastCommit == null || fixed.lastCommit.size() != PARTITIONS) {
                throw new IllegalStateException("the loop's last commit was " + fixed.lastCommit);
            }
            return new Run(guard, seen, cpuNanos / seen, allocated / seen);
        } finally {
            consumer.close(Duration.ofSeconds(5));
        }
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String handoverTopic = args[1];
        long records = args.length > 2 ? Long.parseLong(args[2]) : 1_000_000;
        int warm = args.length > 3 ? Integer.parseInt(args[3]) : 10;
        int rounds = args.length > 4 ? Integer.parseInt(args[4]) : 10;
        List<ConsumerRecords<byte[], byte[]>> batches = batches(records);
        for (int w = 0; w < warm; w++) {
            for (boolean guard : new boolean[] {false, true}) {
                Run run = run(bootstrap, handoverTopic, batches, records, guard);
                System.err.printf(
                        Locale.ROOT,
                        "warm-up %d %s: %.1f ns/record, %.1f B/record%n",
                        w,
                        guard ? "guarded" : "bare",
                        run.cpuNanos(),
                        run.allocated());
            }
        }
        List<String> runs = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < 2; k++) {
                boolean guard = (k == 0) == (round % 2 == 1);
                Run run = run(bootstrap, handoverTopic, batches, records, guard);
                runs.add(run.json(round));
                System.err.printf(
                        Locale.ROOT,
                        "round %d %s: %.1f ns/record, %.1f B/record%n",
                        round,
                        guard ? "guarded" : "bare",
                        run.cpuNanos(),
                        run.allocated());
            }
        }
        System.out.println("{\"runs\":" + runs + "}");
    }
}
