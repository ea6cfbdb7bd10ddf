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
 * <pre>java ... io.reprise.kafka.bench.GuardOverhead BOOTSTRAP TOPIC RECORDS ROUNDS [BROKER_PID]</pre>
 *
 * Both loops read the whole topic from the beginning in a fresh group, call the same no-op handler on every record
 * (it reads the value's length) and commit after every poll. After an uncounted warm-up of each (the JIT compiles
 * the client's and the guard's code paths first), the runs are interleaved (bare, guarded, guarded, bare, ...). Each
 * run reports the JVM's CPU time (every thread: the clients', GC, JIT) and the broker's (/proc) from just before the
 * consumer is built to its last record, the same from the record at a tenth of the topic to the last (the steady
 * state), the wall time from its first record to its last (the throughput), and its start-up (build to first record). The Python side takes the medians: CPU per record is steady on a shared machine,
 * throughput is not.
 */
public final class GuardOverhead {
    private GuardOverhead() {
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        long records = Long.parseLong(args[2]);
        int rounds = Integer.parseInt(args[3]);
        long brokerPid = args.length > 4 ? Long.parseLong(args[4]) : 0;
        // Warm-ups of the full size, not counted: C2 keeps compiling the client's and the guard's paths for longer
        // than a quarter of the topic takes.
        run(bootstrap, topic, records, false, brokerPid);
        run(bootstrap, topic, records, true, brokerPid);
        List<String> runs = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            boolean guardFirst = round % 2 == 1;
            for (int k = 0; k < 2; k++) {
                boolean guard = (k == 0) == guardFirst;
                Run run = run(bootstrap, topic, records, guard, brokerPid);
                runs.add(run.json(round));
                System.err.printf("round %d %s: %.2f us/record CPU (steady %.2f), %.0f records/s%n", round,
                        guard ? "guarded" : "bare", run.cpuSeconds / records * 1e6,
                        run.steadyCpuSeconds / run.steadyRecords * 1e6, records / run.windowSeconds);
            }
        }
        System.out.println("{\"runs\":" + runs + "}");
    }

    /** One run's figures. */
    record Run(boolean guarded, long records, double cpuSeconds, double brokerCpuSeconds, double windowSeconds,
               double startupSeconds, long steadyRecords, double steadyCpuSeconds, double steadyBrokerCpuSeconds) {
        String json(int round) {
            return String.format(java.util.Locale.ROOT, "{\"loop\":\"%s\",\"round\":%d,\"records\":%d,\"cpu_s\":%.4f,"
                            + "\"broker_cpu_s\":%.4f,\"window_s\":%.4f,\"startup_s\":%.4f,\"steady_records\":%d,"
                            + "\"steady_cpu_s\":%.4f,\"steady_broker_cpu_s\":%.4f}", guarded ? "guarded" : "bare",
                    round, records, cpuSeconds, brokerCpuSeconds, windowSeconds, startupSeconds, steadyRecords,
                    steadyCpuSeconds, steadyBrokerCpuSeconds);
        }
    }

    static long handled;

    /** The no-op handler both loops call. */
    static void handle(ConsumerRecord<byte[], byte[]> record) {
        handled += record.value() == null ? 0 : record.value().length;
    }

    private static Run run(String bootstrap, String topic, long records, boolean guard, long brokerPid) {
        double cpuBefore = CpuClock.jvmSeconds();
        double brokerBefore = CpuClock.processSeconds(brokerPid);
        long built = System.nanoTime();
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
            long steadyFrom = -1; // the steady state: from a tenth of the topic on, start-up and its prefetch behind
            double steadyCpu = 0;
            double steadyBroker = 0;
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
                if (steadyFrom < 0 && seen >= records / 10) {
                    steadyFrom = seen;
                    steadyCpu = CpuClock.jvmSeconds();
                    steadyBroker = CpuClock.processSeconds(brokerPid);
                }
                consumer.commitAsync();
            }
            long ended = System.nanoTime();
            double cpuNow = CpuClock.jvmSeconds();
            double brokerNow = CpuClock.processSeconds(brokerPid);
            Run run = new Run(guard, seen, cpuNow - cpuBefore, brokerNow - brokerBefore, (ended - began) / 1e9,
                    (began - built) / 1e9, seen - steadyFrom, cpuNow - steadyCpu, brokerNow - steadyBroker);
            consumer.commitSync();
            return run;
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }
}
