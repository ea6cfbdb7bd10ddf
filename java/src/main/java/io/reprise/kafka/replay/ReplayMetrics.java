package io.reprise.kafka.replay;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;

/**
 * The replay role's Prometheus metrics, with the names and labels of the Python worker
 * ({@code replay_worker/replay/metrics.py}) so one dashboard serves both, and the HTTP endpoint on the JDK's own server:
 * {@code /metrics} (text format 0.0.4), {@code /healthz} (the loop went round within two minutes: a role stuck in
 * a handler stops answering 200 and Kubernetes restarts it, which resumes from committed offsets) and
 * {@code /readyz}.
 */
final class ReplayMetrics {

    /** Values of {@code reprise_worker_partition_state}. */
    static final Map<String, Integer> PARTITION_STATES = Map.of("replaying", 0, "finished", 1, "paused", 2);

    static final long STALE_AFTER_NANOS = 120_000_000_000L;

    final Counter consumed = new Counter("reprise_worker_records_consumed", "Records read from the source topics");
    final Counter matched = new Counter("reprise_worker_records_matched", "Records that matched the filter");
    final Counter delivered =
            new Counter("reprise_worker_records_delivered", "Records handed to the handler or forwarded");
    final Counter skipped = new Counter("reprise_worker_records_skipped", "Records the filter did not match");
    final Counter deadLettered =
            new Counter("reprise_worker_records_dead_lettered", "Poison records sent to the dead-letter topic");
    final Counter poisonSkipped =
            new Counter("reprise_worker_records_poison_skipped", "Poison records counted and skipped (no DLQ)");
    final Counter bytes = new Counter("reprise_worker_bytes_consumed", "Key and value bytes read");
    final Counter commits = new Counter("reprise_worker_commits", "Offset commits (or committed transactions)");
    final Counter rebalances = new Counter("reprise_worker_rebalances", "Partitions assigned, revoked or lost");
    final Counter errors = new Counter("reprise_worker_errors", "Errors the loop recovered from");
    final AtomicLong finishedPartitions = new AtomicLong();
    final AtomicLong assignedPartitions = new AtomicLong();

    private final String labels;
    private final Map<String, PartitionGauges> partitions = new ConcurrentSkipListMap<>();
    private volatile long heartbeat = System.nanoTime();

    ReplayMetrics(String replayId, String member) {
        this.labels = "replay=\"" + escape(replayId) + "\",member=\"" + escape(member) + "\"";
    }

    void beat() {
        heartbeat = System.nanoTime();
    }

    boolean alive() {
        return System.nanoTime() - heartbeat < STALE_AFTER_NANOS;
    }

    /** Sets what is given (null leaves a gauge as it is); the lag follows position and end. */
    void partition(String topic, int partition, Long position, Long end, String state) {
        PartitionGauges gauges =
                partitions.computeIfAbsent(topic + "\u0000" + partition, k -> new PartitionGauges(topic, partition));
        if (position != null) {
            gauges.position = position;
        }
        if (end != null) {
            gauges.end = end;
        }
        if (state != null) {
            gauges.state = PARTITION_STATES.get(state);
        }
    }

    /** A partition left this replica: its gauges are someone else's now. */
    void forget(String topic, int partition) {
        partitions.remove(topic + "\u0000" + partition);
    }

    String render() {
        StringBuilder out = new StringBuilder(4096);
        for (Counter c : new Counter[] {
            consumed, matched, delivered, skipped, deadLettered, poisonSkipped, bytes, commits, rebalances, errors
        }) {
            out.append("# HELP ")
                    .append(c.name)
                    .append("_total ")
                    .append(c.help)
                    .append('\n');
            out.append("# TYPE ").append(c.name).append("_total counter\n");
            out.append(c.name)
                    .append("_total{")
                    .append(labels)
                    .append("} ")
                    .append(c.value.sum())
                    .append(".0\n");
        }
        Map<String, String[]> perPartition = new LinkedHashMap<>();
        perPartition.put("reprise_worker_partition_position", new String[] {"Next offset the replay processes"});
        perPartition.put("reprise_worker_partition_end", new String[] {"End offset (high watermark) last seen"});
        perPartition.put(
                "reprise_worker_partition_lag", new String[] {"Records left to the end (or to the stop offset)"});
        perPartition.put(
                "reprise_worker_partition_state",
                new String[] {"0 replaying, 1 finished (handed over / drained), 2 paused"});
        for (Map.Entry<String, String[]> metric : perPartition.entrySet()) {
            String name = metric.getKey();
            out.append("# HELP ")
                    .append(name)
                    .append(' ')
                    .append(metric.getValue()[0])
                    .append('\n');
            out.append("# TYPE ").append(name).append(" gauge\n");
            for (PartitionGauges g : partitions.values()) {
                Long value =
                        switch (name) {
                            case "reprise_worker_partition_position" -> g.position;
                            case "reprise_worker_partition_end" -> g.end;
                            case "reprise_worker_partition_lag" -> g.position != null && g.end != null
                                    ? Math.max(0, g.end - g.position)
                                    : null;
                            default -> g.state == null ? null : (long) g.state;
                        };
                if (value != null) {
                    out.append(name)
                            .append('{')
                            .append(labels)
                            .append(",topic=\"")
                            .append(escape(g.topic))
                            .append("\",partition=\"")
                            .append(g.partition)
                            .append("\"} ")
                            .append(value)
                            .append(".0\n");
                }
            }
        }
        gauge(
                out,
                "reprise_worker_partitions_finished",
                "Partitions finished in this replay",
                finishedPartitions.get());
        gauge(
                out,
                "reprise_worker_partitions_assigned",
                "Partitions assigned to this replica",
                assignedPartitions.get());
        return out.toString();
    }

    private void gauge(StringBuilder out, String name, String help, long value) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n');
        out.append("# TYPE ").append(name).append(" gauge\n");
        out.append(name).append('{').append(labels).append("} ").append(value).append(".0\n");
    }

    private static String escape(String value) {
        return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }

    static final class Counter {
        final String name;
        final String help;
        final LongAdder value = new LongAdder();

        Counter(String name, String help) {
            this.name = name;
            this.help = help;
        }

        void inc(long amount) {
            if (amount != 0) {
                value.add(amount);
            }
        }

        long get() {
            return value.sum();
        }
    }

    private static final class PartitionGauges {
        final String topic;
        final int partition;
        volatile Long position;
        volatile Long end;
        volatile Integer state;

        PartitionGauges(String topic, int partition) {
            this.topic = topic;
            this.partition = partition;
        }
    }

    /** Serves {@code /metrics}, {@code /healthz} and {@code /readyz} on the JDK's HTTP server. */
    static final class Endpoint implements AutoCloseable {
        private final HttpServer server;

        Endpoint(int port, ReplayMetrics metrics, BooleanSupplier ready) throws IOException {
            server = HttpServer.create(new InetSocketAddress(port), 0);
            server.createContext("/", exchange -> {
                try (exchange) {
                    String path = exchange.getRequestURI().getPath();
                    switch (path) {
                        case "/metrics" -> reply(
                                exchange, 200, metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
                        case "/healthz" -> reply(
                                exchange,
                                metrics.alive() ? 200 : 503,
                                metrics.alive() ? "ok\n" : "stale\n",
                                "text/plain");
                        case "/readyz" -> reply(
                                exchange,
                                ready.getAsBoolean() ? 200 : 503,
                                ready.getAsBoolean() ? "ready\n" : "not ready\n",
                                "text/plain");
                        default -> reply(exchange, 404, "not found\n", "text/plain");
                    }
                }
            });
            server.setExecutor(Executors.newSingleThreadExecutor(runnable -> {
                Thread thread = new Thread(runnable, "reprise-metrics");
                thread.setDaemon(true);
                return thread;
            }));
            server.start();
        }

        int port() {
            return server.getAddress().getPort();
        }

        private static void reply(HttpExchange exchange, int code, String body, String type) throws IOException {
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", type);
            exchange.sendResponseHeaders(code, bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }

    static Map<String, Long> snapshotCounters(ReplayMetrics m) {
        Map<String, Long> result = new ConcurrentHashMap<>();
        for (Counter c : new Counter[] {
            m.consumed, m.matched, m.delivered, m.skipped, m.deadLettered, m.poisonSkipped, m.commits, m.errors
        }) {
            result.put(c.name, c.get());
        }
        return result;
    }
}
