package io.reprise.kafka.topic;

import io.reprise.kafka.protocol.HandoverKey;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.HandoverView;
import io.reprise.kafka.protocol.HandoverWire;
import io.reprise.kafka.protocol.PartitionHandover;
import io.reprise.kafka.protocol.ReplayHandover;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The handover topic in Kafka (HANDOVER.md section 2): blocking reads ({@code read_committed}, from the beginning
 * to the last stable offset), durable writes (idempotent, {@code acks=all}: a write counts once acknowledged),
 * creation and cleanup. One partition, compacted: every record of every replay in one total order.
 *
 * <pre>{@code
 * try (HandoverTopic topic = new HandoverTopic(KafkaConnection.bootstrap(servers), HandoverTopic.DEFAULT_TOPIC)) {
 *     topic.ensure(true);
 *     ReplayHandover state = topic.readReplay(replayId);
 *     topic.publish(new HandoverRecord.Handover(replayId, "orders", 0, 1234, "caught-up", "replay", now));
 * }
 * }</pre>
 */
public final class HandoverTopic implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(HandoverTopic.class);

    /**
     * What a handover topic is created with (HANDOVER.md section 2): compacted, never deleted by age, capped in size
     * ({@code retention.bytes}), each record at most the protocol's 1 MiB plus its batch header.
     */
    public static final Map<String, String> REQUIRED_SETTINGS = Map.of(
            "cleanup.policy", "compact,delete",
            "min.compaction.lag.ms", "60000",
            "max.message.bytes", "1048588",
            "retention.ms", "-1",
            "retention.bytes", "1073741824");

    public static final String DEFAULT_TOPIC = "reprise.handover";

    private final Map<String, Object> connection;
    private final String topic;
    private final Duration timeout;
    private final String clientId;
    private KafkaProducer<byte[], byte[]> producer;
    private Admin admin;

    public HandoverTopic(Map<String, Object> connection, String topic, Duration timeout, String clientId) {
        this.connection = Map.copyOf(connection);
        this.topic = topic;
        this.timeout = timeout;
        this.clientId = clientId;
    }

    public HandoverTopic(Map<String, Object> connection, String topic) {
        this(connection, topic, Duration.ofSeconds(30), "reprise-handover");
    }

    public String topic() {
        return topic;
    }

    public TopicPartition partition() {
        return new TopicPartition(topic, 0);
    }

    private synchronized KafkaProducer<byte[], byte[]> producer() {
        if (producer == null) {
            producer = new KafkaProducer<>(KafkaConnection.producerConfig(connection, clientId + "-producer"));
        }
        return producer;
    }

    private synchronized Admin admin() {
        if (admin == null) {
            admin = Admin.create(KafkaConnection.adminConfig(connection, clientId + "-admin"));
        }
        return admin;
    }

    @Override
    public synchronized void close() {
        if (producer != null) {
            producer.close(timeout);
            producer = null;
        }
        if (admin != null) {
            admin.close(timeout);
            admin = null;
        }
    }

    // -- the topic itself

    /** Checks the topic exists with one partition; creates it (compacted) when missing and {@code create}. */
    public void ensure(boolean create) {
        ensure(create, this::describedPartitions);
    }

    /**
     * As {@link #ensure(boolean)}, looking with the reader a not yet started {@code follower} keeps (the replay
     * role's): an admin client is made only to create a missing topic.
     */
    public void ensure(boolean create, HandoverFollower<?> follower) {
        ensure(create, () -> follower.partitionsNow(timeout).size());
    }

    private void ensure(boolean create, PartitionCount count) {
        ensure(
                topic,
                create,
                count,
                () -> {
                    NewTopic spec = new NewTopic(topic, java.util.Optional.of(1), java.util.Optional.empty())
                            .configs(REQUIRED_SETTINGS);
                    try {
                        admin().createTopics(List.of(spec)).all().get(timeout.toMillis(), TimeUnit.MILLISECONDS);
                        log.info("created the handover topic {}", topic);
                    } catch (ExecutionException e) {
                        if (!(e.getCause() instanceof TopicExistsException)) {
                            throw new HandoverTopicException(
                                    "cannot create handover topic " + topic + ": "
                                            + e.getCause().getMessage(),
                                    e);
                        }
                    }
                },
                timeout);
    }

    /**
     * The check of {@link #ensure(boolean)}: {@code count} looks at the topic's partitions (0: it does not exist),
     * {@code creator} creates it. After a creation it returns only once {@code count} shows the topic, within
     * {@code timeout}: CreateTopics returns when the controller has recorded the topic, and the metadata a client
     * reads can show it later (seconds, on a loaded machine). Without the wait, what the caller does next with the
     * same client (the replay role's catch-up) finds no topic, and a check like this one would refuse the topic it
     * has just made. The Python and Go ports wait the same way.
     */
    static void ensure(String topic, boolean create, PartitionCount count, TopicCreator creator, Duration timeout) {
        try {
            int partitions = count.get();
            if (partitions == 0) {
                if (!create) {
                    throw new HandoverTopicException(
                            "handover topic " + topic + " does not exist: create it (1 partition, "
                                    + "cleanup.policy=compact) or let the operator create it");
                }
                creator.create();
                awaitVisible(topic, count, timeout);
                return;
            }
            if (partitions != 1) {
                throw new HandoverTopicException("handover topic " + topic + " has " + partitions
                        + " partitions; the protocol needs exactly 1 (one total order of every replay's records): "
                        + "recreate it with 1 partition");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HandoverTopicException("interrupted while checking handover topic " + topic, e);
        } catch (ExecutionException | TimeoutException e) {
            throw new HandoverTopicException("handover topic " + topic + ": " + e, e);
        }
    }

    /** The topic's partition count as the admin client describes it; 0 when it does not exist. */
    private int describedPartitions() throws ExecutionException, InterruptedException, TimeoutException {
        try {
            TopicDescription found = admin().describeTopics(List.of(topic))
                    .allTopicNames()
                    .get(timeout.toMillis(), TimeUnit.MILLISECONDS)
                    .get(topic);
            return found == null ? 0 : found.partitions().size();
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                return 0;
            }
            throw e;
        }
    }

    private static void awaitVisible(String topic, PartitionCount count, Duration timeout)
            throws ExecutionException, InterruptedException, TimeoutException {
        long deadline = System.nanoTime() + timeout.toNanos();
        int partitions;
        while ((partitions = count.get()) == 0) {
            if (System.nanoTime() > deadline) {
                throw new HandoverTopicException("handover topic " + topic + " was created but the metadata does not "
                        + "show it after " + timeout.toMillis() + " ms: is the broker overloaded? (it is retried)");
            }
            Thread.sleep(50);
        }
        if (partitions != 1) {
            throw new HandoverTopicException("handover topic " + topic + " has " + partitions
                    + " partitions; the protocol needs exactly 1 (one total order of every replay's records): "
                    + "recreate it with 1 partition");
        }
    }

    /** How many partitions the topic has now (0: it does not exist). */
    @FunctionalInterface
    interface PartitionCount {
        int get() throws ExecutionException, InterruptedException, TimeoutException;
    }

    /** Creates the topic; returns when Kafka accepted it (or it existed already). */
    @FunctionalInterface
    interface TopicCreator {
        void create() throws ExecutionException, InterruptedException, TimeoutException;
    }

    /**
     * The offset a {@code read_committed} reader reaches at the end now (the last stable offset), or null when the
     * topic does not exist (then no replay exists either). Uses the given reader, assigned or not.
     */
    static Long readableEnd(KafkaConsumer<byte[], byte[]> reader, String topic, Duration timeout) {
        if (!exists(reader, topic, timeout)) {
            return null;
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        return reader.endOffsets(Set.of(tp), timeout).get(tp);
    }

    static boolean exists(KafkaConsumer<byte[], byte[]> reader, String topic, Duration timeout) {
        // The topic list, not partitionsFor: asking for a missing topic's partitions retries until it gives up.
        List<PartitionInfo> partitions = reader.listTopics(timeout).get(topic);
        return partitions != null && !partitions.isEmpty();
    }

    // -- reads

    /**
     * The offset a {@code read_committed} reader reaches at the end now (the last stable offset), or null when the
     * topic does not exist (then no replay exists either).
     */
    public Long readableEnd() {
        try (KafkaConsumer<byte[], byte[]> reader =
                new KafkaConsumer<>(KafkaConnection.readerConfig(connection, clientId + "-reader"))) {
            return readableEnd(reader, topic, timeout);
        }
    }

    /** Every replay's state, read from the beginning to the readable end. */
    public HandoverView read() {
        HandoverView view = new HandoverView();
        try (KafkaConsumer<byte[], byte[]> reader =
                new KafkaConsumer<>(KafkaConnection.readerConfig(connection, clientId + "-reader"))) {
            if (!exists(reader, topic, timeout)) {
                return view;
            }
            TopicPartition tp = partition();
            reader.assign(List.of(tp));
            reader.seekToBeginning(List.of(tp));
            long end = reader.endOffsets(Set.of(tp), timeout).get(tp);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (reader.position(tp, timeout) < end) {
                if (System.nanoTime() > deadline) {
                    throw new HandoverTopicException("reading handover topic " + topic + " to offset " + end
                            + " took over " + timeout.toSeconds() + "s (reached " + reader.position(tp) + ")");
                }
                for (ConsumerRecord<byte[], byte[]> record : reader.poll(Duration.ofMillis(100))) {
                    // Not past the end: it is a transaction boundary, a poll's batch may stop inside a later
                    // transaction (a replay that looks bootstrapped with some starts missing).
                    if (record.offset() < end) {
                        view.apply(record.key(), record.value());
                    }
                }
            }
        }
        return view;
    }

    /** One replay's state: per partition start S, handover H, guard progress and acknowledgement. */
    public ReplayHandover readReplay(String replayId) {
        return read().replay(replayId);
    }

    // -- writes

    /** Writes records and returns once Kafka has them durably (acks=all); throws otherwise. */
    public void publish(HandoverRecord... records) {
        publish(List.of(records));
    }

    public void publish(Collection<? extends HandoverRecord> records) {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (HandoverRecord record : records) {
            HandoverWire.Encoded encoded = HandoverWire.encode(record);
            sent.add(producer().send(new ProducerRecord<>(topic, 0, encoded.key(), encoded.value())));
        }
        await(sent);
    }

    private void await(List<Future<RecordMetadata>> sent) {
        long deadline = System.nanoTime() + timeout.toNanos();
        for (Future<RecordMetadata> future : sent) {
            try {
                future.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                throw new HandoverTopicException(
                        "handover record(s) not acknowledged by Kafka within " + timeout.toSeconds() + "s", e);
            } catch (ExecutionException e) {
                throw new HandoverTopicException(
                        "writing to handover topic " + topic + " failed: "
                                + e.getCause().getMessage(),
                        e.getCause());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new HandoverTopicException("interrupted while writing to handover topic " + topic, e);
            }
        }
    }

    /**
     * Publishes H for every listed partition that has a start and no H yet; returns what was published. For aborting
     * a replay from outside: stop the replay group first, and pass its committed offsets.
     */
    public List<HandoverRecord.Handover> forceHandover(
            String replayId, Map<TopicPartition, Long> offsets, String by, String reason) {
        ReplayHandover state = readReplay(replayId);
        List<HandoverRecord.Handover> records = new ArrayList<>();
        Map<String, TopicPartition> ordered = new TreeMap<>();
        offsets.keySet().forEach(tp -> ordered.put(tp.topic() + "\u0000" + String.format("%010d", tp.partition()), tp));
        for (TopicPartition tp : ordered.values()) {
            PartitionHandover part = state.partitions.get(tp);
            if (part == null || part.start == null || part.handover != null) {
                continue;
            }
            records.add(new HandoverRecord.Handover(
                    replayId,
                    tp.topic(),
                    tp.partition(),
                    Math.max(offsets.get(tp), part.start.offset()),
                    reason,
                    by,
                    System.currentTimeMillis()));
        }
        if (!records.isEmpty()) {
            publish(records);
        }
        return records;
    }

    /** Deletes every record of a replay id ({@code replay} first, so every guard sees it gone at once); returns how many keys. */
    public int tombstone(String replayId) {
        List<byte[]> keys = new ArrayList<>();
        for (ByteBuffer key : readReplay(replayId).liveKeys) {
            byte[] raw = new byte[key.remaining()];
            key.duplicate().get(raw);
            keys.add(raw);
        }
        keys.sort((a, b) -> {
            boolean ra = isReplayKey(a);
            boolean rb = isReplayKey(b);
            return ra != rb ? (ra ? -1 : 1) : java.util.Arrays.compare(a, b);
        });
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (byte[] key : keys) {
            sent.add(producer().send(new ProducerRecord<>(topic, 0, key, null)));
        }
        await(sent);
        return keys.size();
    }

    private static boolean isReplayKey(byte[] raw) {
        try {
            return "replay".equals(HandoverKey.decode(raw).kind());
        } catch (Exception e) {
            return false;
        }
    }
}
