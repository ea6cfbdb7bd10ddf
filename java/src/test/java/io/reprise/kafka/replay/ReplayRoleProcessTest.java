package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The replay role as the service's own process ({@link LedgerReplayMain}, through {@code ReplayRole.runIfRequested}):
 * kill -9 and a restart resume from committed offsets, repeating only the batch that was processed but not
 * committed; SIGTERM finishes the batch, commits, leaves the group and exits 0.
 */
class ReplayRoleProcessTest {

    static final int PARTITIONS = 3;
    static final int PER_PARTITION = 300;
    static final int BATCH = 20;

    static Process start(Map<String, String> env, Path ledger, long delayMs, Path log) throws IOException {
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder builder = new ProcessBuilder(java, "-cp", classpath, LedgerReplayMain.class.getName());
        builder.environment().putAll(env);
        builder.environment().put("REPRISE_TEST_LEDGER", ledger.toString());
        builder.environment().put("REPRISE_TEST_BATCH_DELAY_MS", String.valueOf(delayMs));
        builder.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        return builder.start();
    }

    /**
     * The role's settings. Kafka settings come from a config folder, as in a pod: a short session timeout, so the
     * group takes the partitions of a killed replica away in seconds rather than the default 45.
     */
    static Map<String, String> env(String topic, String handover, Path dir) throws IOException {
        Path config = Files.createDirectories(dir.resolve("kafka-config"));
        Files.writeString(config.resolve("session.timeout.ms"), "6000\n");
        Files.writeString(config.resolve("heartbeat.interval.ms"), "500\n");
        return ReplayRoleBrokerTest.env(
                "ns/" + topic + "/uid",
                topic,
                topic + "-replay",
                handover,
                "REPRISE_BATCH_SIZE",
                String.valueOf(BATCH),
                "REPRISE_KAFKA_CONFIG_DIR",
                config.toString());
    }

    static List<String> lines(Path ledger) throws IOException {
        return Files.exists(ledger) ? Files.readAllLines(ledger) : List.of();
    }

    static void awaitLines(Path ledger, int count, Process process, Path log) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (lines(ledger).size() < count) {
            if (!process.isAlive()) {
                throw new AssertionError(
                        "the replay role exited early (" + process.exitValue() + "):\n" + Files.readString(log));
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the replay role processed only "
                        + lines(ledger).size() + " records:\n" + Files.readString(log));
            }
            Thread.sleep(50);
        }
    }

    /** How often each "partition offset" is in the ledger. */
    static Map<String, Integer> counts(Path ledger) throws IOException {
        Map<String, Integer> counts = new HashMap<>();
        for (String line : lines(ledger)) {
            String[] f = line.split(" ");
            counts.merge(f[2] + " " + f[3], 1, Integer::sum);
        }
        return counts;
    }

    static void runToTheEnd(Map<String, String> env, Path ledger, Path log) throws Exception {
        Process rest = start(env, ledger, 0, log);
        try {
            assertTrue(rest.waitFor(120, TimeUnit.SECONDS), "the restarted replay role did not finish");
            assertEquals(0, rest.exitValue(), Files.readString(log));
        } finally {
            rest.destroyForcibly();
        }
    }

    @Test
    void killNineAndRestartRepeatOnlyTheUncommittedBatch(@TempDir Path dir) throws Exception {
        String topic = RealKafka.unique("kill");
        String handover = RealKafka.unique("handover");
        RealKafka.createTopic(topic, PARTITIONS);
        RealKafka.produce(topic, PARTITIONS, PER_PARTITION);
        Path ledger = dir.resolve("ledger.txt");
        Path log = dir.resolve("role.log");
        Map<String, String> env = env(topic, handover, dir);
        Process first = start(env, ledger, 30, log);
        try {
            awaitLines(ledger, 200, first, log);
        } finally {
            first.destroyForcibly(); // SIGKILL: no commit, no leave
            first.waitFor(30, TimeUnit.SECONDS);
        }
        Map<TopicPartition, OffsetAndMetadata> atKill = RealKafka.committed(topic + "-replay");
        runToTheEnd(env, ledger, log);
        Map<String, Integer> counts = counts(ledger);
        int repeated = 0;
        for (int p = 0; p < PARTITIONS; p++) {
            long committed = atKill.get(new TopicPartition(topic, p)).offset();
            for (int o = 0; o < PER_PARTITION; o++) {
                int n = counts.getOrDefault(p + " " + o, 0);
                assertTrue(n >= 1, "lost: partition " + p + " offset " + o);
                if (n > 1) {
                    // Only what was processed after the last commit before the kill is processed again.
                    assertTrue(
                            o >= committed,
                            "committed batch replayed: partition " + p + " offset " + o + " (committed " + committed
                                    + ")");
                    assertEquals(2, n);
                    repeated++;
                }
            }
        }
        assertTrue(repeated <= PARTITIONS * 2 * BATCH, "repeated " + repeated);
    }

    @Test
    void sigtermFinishesTheBatchCommitsAndExitsZero(@TempDir Path dir) throws Exception {
        String topic = RealKafka.unique("term");
        String handover = RealKafka.unique("handover");
        RealKafka.createTopic(topic, PARTITIONS);
        RealKafka.produce(topic, PARTITIONS, PER_PARTITION);
        Path ledger = dir.resolve("ledger.txt");
        Path log = dir.resolve("role.log");
        Map<String, String> env = env(topic, handover, dir);
        Process first = start(env, ledger, 30, log);
        try {
            awaitLines(ledger, 150, first, log);
            first.destroy(); // SIGTERM
            assertTrue(first.waitFor(60, TimeUnit.SECONDS), "SIGTERM did not stop the replay role");
            assertEquals(0, first.exitValue(), Files.readString(log));
        } finally {
            first.destroyForcibly();
        }
        // Everything processed is committed: the committed offsets are exactly what the ledger holds.
        Map<TopicPartition, OffsetAndMetadata> committed = RealKafka.committed(topic + "-replay");
        Map<String, Integer> before = counts(ledger);
        for (int p = 0; p < PARTITIONS; p++) {
            int partition = p;
            long processed = before.keySet().stream()
                    .filter(k -> k.startsWith(partition + " "))
                    .count();
            assertEquals(processed, committed.get(new TopicPartition(topic, p)).offset(), "partition " + p);
        }
        runToTheEnd(env, ledger, log);
        Map<String, Integer> counts = counts(ledger);
        assertEquals(PARTITIONS * PER_PARTITION, counts.size());
        assertTrue(counts.values().stream().allMatch(n -> n == 1), "a record was processed twice after SIGTERM");
        assertTrue(Files.readString(log).length() > 0);
        assertTrue(new File(ledger.toString()).length() > 0);
        // The bootstrap's offset lookups of both starts: no kafka-clients WARN per partition it did not hold.
        assertFalse(Files.readString(log).contains("Not updating last stable offset"), Files.readString(log));
    }
}
