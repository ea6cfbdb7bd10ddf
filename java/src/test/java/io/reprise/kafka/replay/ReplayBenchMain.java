package io.reprise.kafka.replay;

import io.reprise.kafka.bench.CpuClock;
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
 * ({@code replay}), over the whole topic. Both read with the role's consumer settings (read_committed, cooperative
 * rebalancing, {@code max.poll.records} = the batch size) and call the same handler, so they compare the loop, not
 * fetch tuning. Prints one JSON line: records; cpu_s and broker_cpu_s, the JVM's CPU (every thread) and the broker's
 * (/proc) from the start of {@code main} to the last record (start-up work counted, waiting costs none); seconds, from
 * the first batch handed to the handler to the last (the throughput); startup_s, from {@code main} to the first
 * batch (the role's bootstrap, the group join), and startup_cpu_s, the JVM's CPU meanwhile; steady_*, the same
 * from the batch that reaches a tenth of the topic to the last (the steady state); and the wall time to the end.
 *
 * <pre>java -cp ... io.reprise.kafka.replay.ReplayBenchMain bare|replay BOOTSTRAP TOPIC RECORDS GROUP [HANDOVER_TOPIC [BROKER_PID]]</pre>
 */
public final class ReplayBenchMain {

    static final int BATCH = 1000;

    private ReplayBenchMain() {}

    /** The handler both loops call: counts, and notes when the first and the last record arrived. */
    static final class NoOp implements RecordsHandler<byte[], byte[]> {
        final long total;
        final AtomicLong seen = new AtomicLong();
        final long brokerPid;
        volatile long first;
        volatile double firstCpu;
        volatile long last;
        volatile double lastCpu;
        volatile double lastBrokerCpu;
        volatile long steadyFrom = -1;
        volatile double steadyCpu;
        volatile double steadyBrokerCpu;

        NoOp(long total, long brokerPid) {
            this.total = total;
            this.brokerPid = brokerPid;
        }

        @Override
        public void handle(List<ConsumerRecord<byte[], byte[]>> records) {
            if (records.isEmpty()) {
                return;
            }
            if (first == 0) {
                first = System.nanoTime();
                firstCpu = CpuClock.jvmSeconds();
            }
            long now = seen.addAndGet(records.size());
            if (steadyFrom < 0 && now >= total / 10) {
                steadyFrom = now;
                steadyCpu = CpuClock.jvmSeconds();
                steadyBrokerCpu = CpuClock.processSeconds(brokerPid);
            }
            if (now >= total && last == 0) {
                last = System.nanoTime();
                lastCpu = CpuClock.jvmSeconds();
                lastBrokerCpu = CpuClock.processSeconds(brokerPid);
            }
        }
    }

    public static void main(String[] args) {
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        long records = Long.parseLong(args[3]);
        String group = args[4];
        long brokerPid = args.length > 6 ? Long.parseLong(args[6]) : 0;
        NoOp handler = new NoOp(records, brokerPid);
        double cpuBefore = CpuClock.jvmSeconds();
        double brokerBefore = CpuClock.processSeconds(brokerPid);
        long began = System.nanoTime();
        if (mode.equals("bare")) {
            bare(bootstrap, topic, group, handler);
        } else {
            Map<String, String> env = new HashMap<>(Map.of(
                    "REPRISE_BOOTSTRAP_SERVERS",
                    bootstrap,
                    "REPRISE_REPLAY_ID",
                    "bench/" + group,
                    "REPRISE_TOPICS",
                    topic,
                    "REPRISE_REPLAY_GROUP",
                    group,
                    "REPRISE_HANDOVER_TOPIC",
                    args.length > 5 ? args[5] : "reprise.handover",
                    "REPRISE_METRICS_PORT",
                    "0",
                    "REPRISE_EXIT_WHEN_DONE",
                    "true",
                    "REPRISE_BATCH_SIZE",
                    String.valueOf(BATCH),
                    "REPRISE_MEMBER_NAME",
                    "bench"));
            int code = ReplayRole.create(
                            env, Map.of(), new ByteArrayDeserializer(), new ByteArrayDeserializer(), handler)
                    .run();
            if (code != 0) {
                throw new IllegalStateException("the replay role exited with " + code);
            }
        }
        long wall = System.nanoTime() - began;
        if (handler.seen.get() < records) {
            throw new IllegalStateException("handled " + handler.seen.get() + " of " + records + " records");
        }
        double seconds = (handler.last - handler.first) / 1e9;
        System.out.printf(
                java.util.Locale.ROOT,
                "{\"mode\":\"%s\",\"records\":%d,\"seconds\":%.3f,\"rate\":%.1f,"
                        + "\"wall_seconds\":%.3f,\"cpu_s\":%.4f,\"broker_cpu_s\":%.4f,\"startup_s\":%.3f,\"startup_cpu_s\":%.4f,"
                        + "\"steady_records\":%d,\"steady_cpu_s\":%.4f,\"steady_broker_cpu_s\":%.4f}%n",
                mode,
                handler.seen.get(),
                seconds,
                handler.seen.get() / seconds,
                wall / 1e9,
                handler.lastCpu - cpuBefore,
                handler.lastBrokerCpu - brokerBefore,
                (handler.first - began) / 1e9,
                handler.firstCpu - cpuBefore,
                handler.seen.get() - handler.steadyFrom,
                handler.lastCpu - handler.steadyCpu,
                handler.lastBrokerCpu - handler.steadyBrokerCpu);
    }

    /** The loop a service writes: subscribe, poll, handle, commit asynchronously; the role's read settings. */
    static void bare(String bootstrap, String topic, String group, NoOp handler) {
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("enable.auto.commit", false);
        config.put("auto.offset.reset", "earliest");
        config.put("max.poll.records", BATCH);
        config.put("isolation.level", "read_committed");
        config.put(
                "partition.assignment.strategy",
                org.apache.kafka.clients.consumer.CooperativeStickyAssignor.class.getName());
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
