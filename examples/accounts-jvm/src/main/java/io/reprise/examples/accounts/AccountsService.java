package io.reprise.examples.accounts;

import io.reprise.kafka.guard.GuardedConsumer;
import io.reprise.kafka.replay.ReplayRole;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The accounts service: consumes user events and records each one it processed in its {@link Ledger}.
 *
 * <p>It is an ordinary kafka-clients service (poll a batch, process it, commit) with two lines for Reprise:
 * <ol>
 *   <li>when the operator runs the service's own image as a standby replay consumer
 *       ({@code consumer.entrypoint: Service}, which sets {@code REPRISE_REPLAY_ID} and the other
 *       {@code REPRISE_*} variables), {@link ReplayRole#runIfRequested} runs the replay with the service's record
 *       handler instead of the live loop (and exits when it is done);</li>
 *   <li>its consumer is a {@link GuardedConsumer} (instead of a {@code KafkaConsumer}), so while a Handover replay
 *       covers a partition the live loop gets only the records the replay does not cover, and takes every record
 *       again from the handover offset on.</li>
 * </ol>
 *
 * <p>Settings come from the environment: {@code ACCOUNTS_BOOTSTRAP_SERVERS}, {@code ACCOUNTS_GROUP} (default
 * {@code accounts-jvm}), {@code ACCOUNTS_TOPIC} (default {@code users}), {@code ACCOUNTS_LEDGER_DIR},
 * {@code ACCOUNTS_BATCH} (records per poll, default 200) and {@code ACCOUNTS_SESSION_TIMEOUT_MS} (default 10000);
 * the guard reads {@code REPRISE_HANDOVER_TOPIC} (default {@code reprise.handover}). SIGTERM stops it after the
 * batch in hand.
 */
public final class AccountsService {

    private static final Logger LOG = LoggerFactory.getLogger(AccountsService.class);

    private AccountsService() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> env = System.getenv();
        Path ledgerDir = Path.of(required(env, "ACCOUNTS_LEDGER_DIR"));
        String group = env.getOrDefault("ACCOUNTS_GROUP", "accounts-jvm");
        Map<String, Object> config = consumerConfig(env, group);

        // Reprise's replay role: when the operator runs this image as a replay consumer, replay with the service's
        // own handler, then exit; otherwise this returns at once.
        Ledger replayed = Ledger.of(ledgerDir, true, env.get("REPRISE_REPLAY_GROUP"));
        ReplayRole.runIfRequested(config, new StringDeserializer(), new StringDeserializer(), replayed::record);

        try (Ledger ledger = Ledger.of(ledgerDir, false, group)) {
            runLive(config, env.getOrDefault("ACCOUNTS_TOPIC", "users"), ledger);
        }
    }

    static Map<String, Object> consumerConfig(Map<String, String> env, String group) {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(env, "ACCOUNTS_BOOTSTRAP_SERVERS"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, env.getOrDefault("ACCOUNTS_BATCH", "200"));
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, env.getOrDefault("ACCOUNTS_SESSION_TIMEOUT_MS", "10000"));
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        return config;
    }

    /** The live loop: poll, process, commit; commit on revoke, so a rebalance repeats nothing. */
    static void runLive(Map<String, Object> config, String topic, Ledger ledger) {
        // Reprise's guard: a GuardedConsumer where the service had `new KafkaConsumer<>(config, keys, values)`.
        Consumer<String, String> consumer =
                GuardedConsumer.create(config, new StringDeserializer(), new StringDeserializer());

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();  // SIGTERM: leave poll(); the batch in hand is finished and committed first
            try {
                stopped.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "accounts-shutdown"));
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    // Everything poll() handed out is processed before the next poll(): commit it while it is ours.
                    commit(consumer);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    LOG.info("assigned {}", partitions);
                }
            });
            long processed = 0;
            boolean uncommitted = false;
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (uncommitted) {
                        uncommitted = !commit(consumer);  // a commit a rebalance deferred, when no revoke took it
                    }
                    continue;
                }
                List<ConsumerRecord<String, String>> batch = new ArrayList<>(records.count());
                records.forEach(batch::add);
                ledger.record(batch);             // process first ...
                uncommitted = !commit(consumer);  // ... then commit: at-least-once, a crash repeats the batch
                processed += batch.size();
                if (processed / 10_000 != (processed - batch.size()) / 10_000) {
                    LOG.info("processed {} user events", processed);
                }
            }
        } catch (WakeupException stop) {
            LOG.info("stopping");
            commit(consumer);
        } finally {
            consumer.close();
            stopped.countDown();
        }
    }

    /** Commits what poll() handed out; false when a rebalance is under way (the next poll() finishes it). */
    private static boolean commit(Consumer<String, String> consumer) {
        try {
            consumer.commitSync();
            return true;
        } catch (RebalanceInProgressException | CommitFailedException e) {
            // Revoked partitions are committed by the revoke callback in the next poll(); the others after it.
            LOG.info("commit deferred to the rebalance: {}", e.getMessage());
            return false;
        }
    }

    private static String required(Map<String, String> env, String name) {
        String value = env.get(name);
        if (value == null || value.isBlank()) {
            throw new IllegalArgumentException(name + " is required");
        }
        return value;
    }
}
