package io.reprise.examples.accounts;

import io.reprise.kafka.guard.GuardedConsumer;
import io.reprise.kafka.replay.ReplayRole;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
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
 *   <li>its consumer is wrapped by {@link GuardedConsumer}, so while a Handover replay covers a partition the live
 *       loop gets only the records the replay does not cover, and takes every record again from the handover
 *       offset on;</li>
 *   <li>when the operator runs the service's own image as a standby replay consumer
 *       ({@code consumer.entrypoint: Service}, which sets {@code REPRISE_REPLAY_ID} and the other
 *       {@code REPRISE_*} variables), {@link ReplayRole} runs the replay with the same record handler instead of
 *       the live loop.</li>
 * </ol>
 *
 * <p>Settings come from the environment: {@code ACCOUNTS_BOOTSTRAP_SERVERS}, {@code ACCOUNTS_GROUP} (default
 * {@code accounts-jvm}), {@code ACCOUNTS_TOPIC} (default {@code users}), {@code ACCOUNTS_LEDGER_DIR},
 * {@code ACCOUNTS_BATCH} (records per poll, default 200), {@code ACCOUNTS_SESSION_TIMEOUT_MS} (default 10000) and
 * {@code REPRISE_HANDOVER_TOPIC} (default {@code reprise.handover}). SIGTERM stops it after the batch in hand.
 */
public final class AccountsService {

    private static final Logger LOG = LoggerFactory.getLogger(AccountsService.class);

    private AccountsService() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> env = System.getenv();
        Path ledgerDir = Path.of(required(env, "ACCOUNTS_LEDGER_DIR"));
        if (ReplayRole.requested()) {
            // A standby replay consumer: the replay role reads REPRISE_* and calls the service's own handler.
            try (Ledger ledger = Ledger.open(ledgerDir, true, env.get("REPRISE_REPLAY_GROUP"))) {
                ReplayRole.run(new StringDeserializer(), new StringDeserializer(), ledger::record);
            }
            return;
        }
        String group = env.getOrDefault("ACCOUNTS_GROUP", "accounts-jvm");
        try (Ledger ledger = Ledger.open(ledgerDir, false, group)) {
            runLive(env, group, ledger);
        }
    }

    /** The live loop: poll, process, commit; commit on revoke, so a rebalance repeats nothing. */
    static void runLive(Map<String, String> env, String group, Ledger ledger) throws InterruptedException {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(env, "ACCOUNTS_BOOTSTRAP_SERVERS"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, env.getOrDefault("ACCOUNTS_BATCH", "200"));
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, env.getOrDefault("ACCOUNTS_SESSION_TIMEOUT_MS", "10000"));
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        String topic = env.getOrDefault("ACCOUNTS_TOPIC", "users");
        String handoverTopic = env.getOrDefault("REPRISE_HANDOVER_TOPIC", "reprise.handover");

        // The one change for Handover replays: the guard wraps the service's consumer.
        Consumer<String, String> consumer = new GuardedConsumer<>(
                new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer()), handoverTopic);

        CountDownLatch stopped = new CountDownLatch(1);
        Thread loop = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();  // SIGTERM: leave poll(); the batch in hand is finished and committed first
            try {
                stopped.await();
            } catch (InterruptedException e) {
                loop.interrupt();
            }
        }, "accounts-shutdown"));
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    // Everything poll() handed out is processed before the next poll(): commit it while it is ours.
                    consumer.commitSync();
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    LOG.info("assigned {}", partitions);
                }
            });
            long processed = 0;
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                List<ConsumerRecord<String, String>> batch = new ArrayList<>(records.count());
                records.forEach(batch::add);
                ledger.record(batch);  // process first ...
                commit(consumer);      // ... then commit: at-least-once, the batch is the window a crash repeats
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

    private static void commit(Consumer<String, String> consumer) {
        try {
            consumer.commitSync();
        } catch (RebalanceInProgressException | CommitFailedException e) {
            // The partitions are being revoked: the revoke callback in the next poll() commits them.
            LOG.info("commit deferred to the rebalance: {}", e.getMessage());
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
