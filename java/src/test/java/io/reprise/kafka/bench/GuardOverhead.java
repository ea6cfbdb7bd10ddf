package io.reprise.kafka.bench;

import io.reprise.kafka.guard.GuardSettings;
import io.reprise.kafka.guard.GuardedConsumer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One loop of the Java guard benchmark: the guard with no replay active, or a bare {@link KafkaConsumer} loop
 * (benchmarks/java_guard.py runs one JVM of each on its own broker and topic, and reads the JSON lines they print).
 *
 * <pre>java ... io.reprise.kafka.bench.GuardOverhead BOOTSTRAP TOPIC RECORDS bare|guarded [BROKER_PID]</pre>
 *
 * Both loops read the whole topic from the beginning in a fresh group, call the same no-op handler on every record
 * (it reads the value's length) and commit after every poll. The JVM runs one loop only, as a service does: it warms
 * it up (see {@link #warm}), prints {@code {"warm_runs": N}}, then runs it once for every line {@code run ROUND}
 * read from stdin (the Python side interleaves the two JVMs' runs, ABBA) until stdin ends. Each run prints the JVM's
 * CPU time (every thread: the clients', GC, JIT) and the broker's (/proc) from just before the consumer is built to
 * its last record, the same from the record at a tenth of the topic to the last (the steady state) with the JVM's
 * CPU split by kind of thread ({@link CpuClock.Kind}) and the loop thread's own, the wall time from its first record
 * to its last (the throughput), and its start-up (build to first record). The Python side takes the medians: CPU
 * per record is steady on a shared machine, throughput is not.
 *
 * <p>Why a JVM per loop: in one JVM running both, the two loops share the JIT's type profiles and compiled code of
 * the client (the consumer's poll is called from the benchmark loop and from the guard), so each loop ran code
 * compiled for a mix of both; a service runs one.
 */
public final class GuardOverhead {
    private GuardOverhead() {}

    /** Warm-up runs at least and at most: until the JIT is quiet (see {@link #warm}). */
    static final int WARM_MIN = 3;

    static final int WARM_MAX = 12;
    /** The JIT is quiet when its threads took at most this share of a warm-up run's steady CPU. */
    static final double JIT_QUIET = 0.01;

    public static void main(String[] args) throws java.io.IOException {
        String bootstrap = args[0];
        String topic = args[1];
        long records = Long.parseLong(args[2]);
        boolean guard =
                switch (args[3]) {
                    case "bare" -> false;
                    case "guarded" -> true;
                    default -> throw new IllegalArgumentException("the loop is bare or guarded, not " + args[3]);
                };
        long brokerPid = args.length > 4 ? Long.parseLong(args[4]) : 0;
        int warmRuns = warm(bootstrap, topic, records, guard, brokerPid);
        System.out.println("{\"warm_runs\":" + warmRuns + "}");
        System.out.flush();
        java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            int round = Integer.parseInt(line.strip().substring("run ".length()));
            Run run = run(bootstrap, topic, records, guard, brokerPid);
            System.err.printf("round %d %s: %s%n", round, guard ? "guarded" : "bare", run.describe());
            System.out.println(run.json(round));
            System.out.flush();
        }
    }

    /**
     * Warm-up runs of the full size, not counted, until the JIT compilers' CPU in a run's steady window is at most
     * {@link #JIT_QUIET} of the run's steady CPU (at least {@link #WARM_MIN} runs, at most {@link #WARM_MAX}). C2
     * keeps compiling the client's paths for several runs (session 8 saw the bare loop's CPU per record fall 40%
     * over its five counted rounds: one warm-up was not enough); a fixed count either wastes minutes or leaves the
     * first counted rounds compiling. Returns the runs made.
     */
    static int warm(String bootstrap, String topic, long records, boolean guard, long brokerPid) {
        for (int n = 1; ; n++) {
            Run run = run(bootstrap, topic, records, guard, brokerPid);
            System.err.printf("warm-up %d %s: %s%n", n, guard ? "guarded" : "bare", run.describe());
            if (n >= WARM_MAX || (n >= WARM_MIN && run.steadyJitSeconds <= JIT_QUIET * run.steadyCpuSeconds)) {
                return n;
            }
        }
    }

    /**
     * One run's figures: from the consumer's build to the last record (with start-up), and the steady window (from
     * the record at a tenth of the topic to the last) with its CPU by kind of thread: the loop's thread, the JIT
     * compilers, the garbage collector, the guard's own threads.
     */
    record Run(
            boolean guarded,
            long records,
            double cpuSeconds,
            double brokerCpuSeconds,
            double windowSeconds,
            double startupSeconds,
            long steadyRecords,
            double steadyCpuSeconds,
            double steadyBrokerCpuSeconds,
            double steadySeconds,
            double steadyLoopSeconds,
            double steadyJitSeconds,
            double steadyGcSeconds,
            double steadyGuardSeconds,
            long steadyPolls) {
        String json(int round) {
            return String.format(
                    java.util.Locale.ROOT,
                    "{\"loop\":\"%s\",\"round\":%d,\"records\":%d,\"cpu_s\":%.4f,"
                            + "\"broker_cpu_s\":%.4f,\"window_s\":%.4f,\"startup_s\":%.4f,\"steady_records\":%d,"
                            + "\"steady_cpu_s\":%.4f,\"steady_broker_cpu_s\":%.4f,\"steady_s\":%.4f,"
                            + "\"steady_loop_cpu_s\":%.4f,\"steady_jit_cpu_s\":%.4f,\"steady_gc_cpu_s\":%.4f,"
                            + "\"steady_guard_threads_cpu_s\":%.4f,\"steady_polls\":%d}",
                    guarded ? "guarded" : "bare",
                    round,
                    records,
                    cpuSeconds,
                    brokerCpuSeconds,
                    windowSeconds,
                    startupSeconds,
                    steadyRecords,
                    steadyCpuSeconds,
                    steadyBrokerCpuSeconds,
                    steadySeconds,
                    steadyLoopSeconds,
                    steadyJitSeconds,
                    steadyGcSeconds,
                    steadyGuardSeconds,
                    steadyPolls);
        }

        String describe() {
            double per = 1e6 / steadyRecords;
            return String.format(
                    java.util.Locale.ROOT,
                    "steady us/record: CPU %.3f, without JIT %.3f (loop thread "
                            + "%.3f, GC %.3f, JIT %.3f, guard threads %.3f); %.0f records/poll; %.0f records/s",
                    steadyCpuSeconds * per,
                    (steadyCpuSeconds - steadyJitSeconds) * per,
                    steadyLoopSeconds * per,
                    steadyGcSeconds * per,
                    steadyJitSeconds * per,
                    steadyGuardSeconds * per,
                    (double) steadyRecords / Math.max(1, steadyPolls),
                    records / windowSeconds);
        }
    }

    static long handled;

    private static final java.lang.management.ThreadMXBean THREADS =
            java.lang.management.ManagementFactory.getThreadMXBean();

    private static double since(Map<CpuClock.Kind, Double> now, Map<CpuClock.Kind, Double> then, CpuClock.Kind kind) {
        return Math.max(0, now.get(kind) - then.getOrDefault(kind, 0.0));
    }

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
                ? GuardedConsumer.wrap(
                        raw,
                        GuardSettings.from(config)
                                .withHandoverTopic("reprise.handover")
                                .withMember("bench"))
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
            long steadyAt = 0;
            long steadyLoop = 0;
            Map<CpuClock.Kind, Double> steadyKinds = Map.of();
            long steadyPolls = 0;
            while (seen < records) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
                if (steadyFrom >= 0) {
                    steadyPolls++;
                }
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
                    steadyAt = System.nanoTime();
                    steadyLoop = THREADS.getCurrentThreadCpuTime();
                    steadyKinds = CpuClock.byKind();
                }
                consumer.commitAsync();
            }
            long ended = System.nanoTime();
            double cpuNow = CpuClock.jvmSeconds();
            double brokerNow = CpuClock.processSeconds(brokerPid);
            long loopNow = THREADS.getCurrentThreadCpuTime();
            Map<CpuClock.Kind, Double> kinds = CpuClock.byKind();
            Run run = new Run(
                    guard,
                    seen,
                    cpuNow - cpuBefore,
                    brokerNow - brokerBefore,
                    (ended - began) / 1e9,
                    (began - built) / 1e9,
                    seen - steadyFrom,
                    cpuNow - steadyCpu,
                    brokerNow - steadyBroker,
                    (ended - steadyAt) / 1e9,
                    (loopNow - steadyLoop) / 1e9,
                    since(kinds, steadyKinds, CpuClock.Kind.JIT),
                    since(kinds, steadyKinds, CpuClock.Kind.GC),
                    since(kinds, steadyKinds, CpuClock.Kind.GUARD),
                    steadyPolls);
            consumer.commitSync();
            return run;
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }
}
