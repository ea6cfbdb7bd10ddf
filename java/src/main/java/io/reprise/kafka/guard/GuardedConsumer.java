package io.reprise.kafka.guard;

import io.reprise.kafka.protocol.ActiveHandover;
import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.CommitMetadata;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.HandoverWire;
import io.reprise.kafka.protocol.PartitionHandover;
import io.reprise.kafka.topic.HandoverFollower;
import io.reprise.kafka.topic.KafkaConnection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The handover guard for a live service's Kafka consumer (HANDOVER.md section 6). It behaves like the consumer
 * it wraps, with one difference: while a Handover-mode replay covers one of its partitions, the records the
 * replay processes are not returned, and commits carry the guard's state in their metadata.
 *
 * <pre>{@code
 * Consumer<String, Order> consumer = GuardedConsumer.create(config, new StringDeserializer(), orderDeserializer);
 * consumer.subscribe(List.of("orders"), myListener);      // the service's listener is still called
 * while (running) {
 *     for (ConsumerRecord<String, Order> record : consumer.poll(Duration.ofSeconds(1))) {
 *         apply(record);
 *     }
 *     consumer.commitSync();                                // or enable.auto.commit: the guard commits
 * }
 * }</pre>
 *
 * <p>The guard judges records by their bytes (the replay's filter reads headers, key bytes and JSON values), so
 * it wraps a {@code Consumer<byte[], byte[]>} and deserializes the records it hands out itself, with the
 * service's deserializers. Requirements: commit only through this object; the wrapped consumer must not commit
 * automatically ({@link #create} builds one that does not, and commits for the service when its config asks for
 * automatic commits). The service is assumed done with the records of one poll when it polls again (the
 * assumption a consumer's commit of its position makes).
 *
 * <p>With no replay active nothing is done per record: per batch one look at the handover view and one
 * bookkeeping step per partition. A partition is held (paused) from its assignment until the guard's view of
 * the handover topic is current, so a live replica never acts on an older view than the replica before it: if
 * the handover topic cannot be read, those partitions wait rather than risk processing what a replay covers.
 */
public final class GuardedConsumer<K, V> implements Consumer<K, V> {
    private static final Logger log = LoggerFactory.getLogger(GuardedConsumer.class);
    private static final Duration SLICE = Duration.ofMillis(200);

    private static final java.util.concurrent.atomic.AtomicInteger INSTANCES =
            new java.util.concurrent.atomic.AtomicInteger();

    private final Consumer<byte[], byte[]> raw;
    private final String clientId;
    private final Deserializer<K> keys;
    private final Deserializer<V> values;
    private final boolean identity;
    private final GuardSettings settings;
    private final String groupId;
    private final GuardBook book = new GuardBook(true);
    private final GuardStats stats = new GuardStats();
    private final HandoverFollower<Map<TopicPartition, ActiveHandover>> follower;
    /**
     * Made at the first guard record or acknowledgement: a service with no replay ever active never needs one
     * (building a producer costs a tenth of a second of CPU, and its thread and metadata refreshes run for good).
     */
    private KafkaProducer<byte[], byte[]> producer;

    private final Set<TopicPartition> userPaused = new HashSet<>();
    private volatile Map<TopicPartition, GuardBook.PendingAck> pendingAcks = Map.of();
    private Admin admin;
    private long seenVersion = -1;
    private long lastProgress;
    private long lastAutoCommit = System.nanoTime();
    private long lastAckCheck;
    private boolean manualAssignment;
    private volatile boolean closing;
    /** Made by {@link #create}: the deserializers are closed with the consumer, as a KafkaConsumer closes its own. */
    private boolean ownsDeserializers;

    /**
     * A guarded consumer of its own: a {@link KafkaConsumer} of bytes built from {@code config} (which must have
     * {@code group.id} and {@code bootstrap.servers}), never committing by itself; when the config asks for
     * automatic commits the guard makes them, with its marks.
     */
    public static <K, V> GuardedConsumer<K, V> create(
            Map<String, Object> config, Deserializer<K> keys, Deserializer<V> values) {
        return create(config, keys, values, java.util.function.UnaryOperator.identity());
    }

    /** As {@link #create(Map, Deserializer, Deserializer)}, with settings changed (the handover topic, the member). */
    public static <K, V> GuardedConsumer<K, V> create(
            Map<String, Object> config,
            Deserializer<K> keys,
            Deserializer<V> values,
            java.util.function.UnaryOperator<GuardSettings> customize) {
        GuardSettings settings = customize.apply(GuardSettings.from(config));
        Map<String, Object> inner = new HashMap<>(config);
        inner.put("enable.auto.commit", false);
        inner.put("key.deserializer", ByteArrayDeserializer.class.getName());
        inner.put("value.deserializer", ByteArrayDeserializer.class.getName());
        inner.remove("auto.commit.interval.ms");
        keys.configure(config, true);
        values.configure(config, false);
        GuardedConsumer<K, V> guarded = new GuardedConsumer<>(new KafkaConsumer<>(inner), keys, values, settings);
        guarded.ownsDeserializers = true;
        return guarded;
    }

    /** A service that consumes bytes: no deserialization, the records are handed as they come. */
    public static GuardedConsumer<byte[], byte[]> wrap(Consumer<byte[], byte[]> raw, GuardSettings settings) {
        return new GuardedConsumer<>(raw, null, null, settings);
    }

    /**
     * Wraps a consumer of bytes that does not commit automatically; {@code keys} and {@code values} deserialize
     * the records handed to the service (null for both: the service consumes bytes).
     */
    public GuardedConsumer(
            Consumer<byte[], byte[]> raw, Deserializer<K> keys, Deserializer<V> values, GuardSettings settings) {
        if ((keys == null) != (values == null)) {
            throw new IllegalArgumentException("give both deserializers, or neither (a service of bytes)");
        }
        this.raw = raw;
        this.keys = keys;
        this.values = values;
        this.identity = keys == null;
        this.settings = settings;
        this.groupId = settings.groupId() != null
                ? settings.groupId()
                : raw.groupMetadata().groupId();
        if (groupId == null || groupId.isEmpty()) {
            throw new IllegalArgumentException("the guard acts for one live group: the consumer needs group.id");
        }
        // One process may run several guarded consumers (a listener container's concurrency): client ids differ.
        this.clientId = "reprise-guard-" + settings.member() + "-" + INSTANCES.incrementAndGet();
        this.follower = new HandoverFollower<>(
                        settings.connection(),
                        settings.handoverTopic(),
                        view -> view.activeFor(groupId),
                        Duration.ofMillis(100),
                        this::tick,
                        clientId + "-follower")
                .start();
    }

    private synchronized KafkaProducer<byte[], byte[]> producer() {
        if (producer == null) {
            producer = new KafkaProducer<>(KafkaConnection.producerConfig(settings.connection(), clientId));
        }
        return producer;
    }

    public GuardStats stats() {
        stats.handoverRecordsFailed =
                follower.failures().values().stream().mapToLong(Long::longValue).sum();
        return stats;
    }

    /** The live group this guard acts for. */
    public String groupId() {
        return groupId;
    }

    /** The guard's bookkeeping, for tests and the service's own status pages. */
    GuardBook book() {
        return book;
    }

    // -- subscription and rebalances

    /** The service's listener, called after the guard took a new assignment and before it drops a revoked one. */
    private final class GuardListener implements ConsumerRebalanceListener {
        private final ConsumerRebalanceListener user;

        GuardListener(ConsumerRebalanceListener user) {
            this.user = user;
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            take(partitions);
            if (user != null) {
                user.onPartitionsAssigned(partitions);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (user != null) {
                user.onPartitionsRevoked(partitions); // the service commits here, through us, while the state exists
            }
            if (settings.autoCommit() && !partitions.isEmpty()) {
                commitStored(partitions);
            }
            drop(partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            if (user != null) {
                user.onPartitionsLost(partitions);
            }
            drop(partitions);
        }
    }

    /**
     * New partitions: read the live group's committed offset and mark, and hold them until the handover view is at
     * least as new as this moment (the previous owner may have acted on state this replica has not read yet).
     */
    private void take(Collection<TopicPartition> partitions) {
        if (partitions.isEmpty() || closing) {
            return;
        }
        raw.pause(partitions);
        Map<TopicPartition, OffsetAndMetadata> committed = raw.committed(new HashSet<>(partitions));
        long ticket = follower.requestSync();
        for (TopicPartition tp : partitions) {
            userPaused.remove(tp);
            OffsetAndMetadata found = committed.get(tp);
            Long offset = found == null || found.offset() < 0 ? null : found.offset();
            CommitMark mark = found == null ? null : CommitMetadata.read(found.metadata());
            book.assign(tp, offset, mark, ticket);
        }
    }

    private void drop(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            book.drop(tp);
            userPaused.remove(tp);
        }
    }

    @Override
    public void subscribe(Collection<String> topics) {
        subscribe(topics, null);
    }

    @Override
    public void subscribe(Collection<String> topics, ConsumerRebalanceListener listener) {
        leaveManualAssignment();
        raw.subscribe(topics, new GuardListener(listener));
    }

    @Override
    public void subscribe(Pattern pattern, ConsumerRebalanceListener listener) {
        leaveManualAssignment();
        raw.subscribe(pattern, new GuardListener(listener));
    }

    @Override
    public void subscribe(Pattern pattern) {
        subscribe(pattern, null);
    }

    @Override
    public void subscribe(SubscriptionPattern pattern, ConsumerRebalanceListener listener) {
        leaveManualAssignment();
        raw.subscribe(pattern, new GuardListener(listener));
    }

    @Override
    public void subscribe(SubscriptionPattern pattern) {
        subscribe(pattern, null);
    }

    /** Manual assignment: the guard takes and drops partitions as a rebalance would. */
    @Override
    public void assign(Collection<TopicPartition> partitions) {
        Set<TopicPartition> before = new HashSet<>(raw.assignment());
        raw.assign(partitions);
        manualAssignment = true;
        List<TopicPartition> gone =
                before.stream().filter(tp -> !partitions.contains(tp)).toList();
        drop(gone);
        take(partitions.stream().filter(tp -> !before.contains(tp)).toList());
    }

    private void leaveManualAssignment() {
        if (manualAssignment) {
            drop(new ArrayList<>(book.parts().keySet()));
            manualAssignment = false;
        }
    }

    @Override
    public void unsubscribe() {
        raw.unsubscribe(); // runs the revocation callbacks
        drop(new ArrayList<>(book.parts().keySet()));
        manualAssignment = false;
    }

    @Override
    public Set<TopicPartition> assignment() {
        return raw.assignment();
    }

    @Override
    public Set<String> subscription() {
        return raw.subscription();
    }

    // -- the state the handover topic gives

    /** Releases partitions whose sync is done and applies state changes; seeks back where the rules say. */
    private void refresh() {
        long version = follower.version();
        Map<TopicPartition, ActiveHandover> snapshot = follower.snapshot();
        Map<TopicPartition, Long> seeks = new HashMap<>();
        if (version != seenVersion) {
            seenVersion = version;
            seeks.putAll(book.apply(snapshot));
        }
        List<TopicPartition> released = new ArrayList<>();
        for (Map.Entry<TopicPartition, GuardBook.PartitionBook> e : book.parts().entrySet()) {
            Long ticket = e.getValue().ticket();
            if (ticket != null && follower.synced(ticket)) {
                Long target = book.release(e.getKey(), snapshot.get(e.getKey()));
                if (target != null) {
                    seeks.put(e.getKey(), target);
                }
                released.add(e.getKey());
            }
        }
        for (Map.Entry<TopicPartition, Long> seek : seeks.entrySet()) {
            GuardBook.PartitionBook part = book.part(seek.getKey());
            stats.seeks++;
            log.info(
                    "guard seeks {} back to offset {} (replay {})",
                    seek.getKey(),
                    seek.getValue(),
                    part.rules.replayId() != null ? part.rules.replayId() : part.rules.rereadReplay());
            raw.seek(seek.getKey(), seek.getValue());
        }
        if (!released.isEmpty()) {
            List<TopicPartition> resume =
                    released.stream().filter(tp -> !userPaused.contains(tp)).toList();
            raw.resume(resume);
        }
    }

    // -- consuming

    @Override
    public ConsumerRecords<K, V> poll(Duration timeout) {
        long deadline = System.nanoTime() + Math.max(0, timeout.toNanos());
        // Commits the guard makes are for records handed out by earlier calls: by calling again, the service is
        // done with those. Never for the batch about to be returned.
        progress();
        ConsumerRecords<byte[], byte[]> records;
        while (true) {
            refresh();
            long left = Math.max(0, deadline - System.nanoTime());
            records = raw.poll(Duration.ofNanos(Math.min(left, SLICE.toNanos())));
            if (!records.isEmpty()) {
                break;
            }
            progress();
            if (System.nanoTime() >= deadline) {
                return ConsumerRecords.empty();
            }
        }
        if (!book.guarded()) {
            return unguarded(records);
        }
        return guarded(records);
    }

    /** No replay active: everything goes to the service; the positions are what a commit commits. */
    @SuppressWarnings("unchecked")
    private ConsumerRecords<K, V> unguarded(ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, Long> positions = new HashMap<>();
        if (identity) {
            for (TopicPartition tp : records.partitions()) {
                List<ConsumerRecord<byte[], byte[]>> list = records.records(tp);
                positions.put(tp, list.get(list.size() - 1).offset() + 1);
            }
            book.handedUnguarded(positions);
            stats.handed += records.count();
            return (ConsumerRecords<K, V>) (ConsumerRecords<?, ?>) records;
        }
        Map<TopicPartition, List<ConsumerRecord<K, V>>> out = new LinkedHashMap<>();
        RecordDeserializationException failure = null;
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<byte[], byte[]>> list = records.records(tp);
            List<ConsumerRecord<K, V>> handed = new ArrayList<>(list.size());
            long position = list.get(0).offset();
            for (ConsumerRecord<byte[], byte[]> record : list) {
                ConsumerRecord<K, V> typed;
                try {
                    typed = deserialize(record);
                } catch (RecordDeserializationException e) {
                    failure = failure == null ? e : failure;
                    raw.seek(tp, record.offset());
                    break;
                }
                handed.add(typed);
                position = record.offset() + 1;
            }
            positions.put(tp, position);
            if (!handed.isEmpty()) {
                out.put(tp, handed);
            }
        }
        book.handedUnguarded(positions);
        return result(out, records, failure);
    }

    /** Per record, the rules of HANDOVER.md section 6. */
    @SuppressWarnings("unchecked")
    private ConsumerRecords<K, V> guarded(ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, List<ConsumerRecord<K, V>>> out = new LinkedHashMap<>();
        RecordDeserializationException failure = null;
        for (TopicPartition tp : records.partitions()) {
            GuardBook.PartitionBook part = book.part(tp);
            List<ConsumerRecord<byte[], byte[]>> list = records.records(tp);
            if (part == null) {
                continue; // revoked meanwhile
            }
            if (part.held()) {
                // Fetched before the hold took effect: put it back, it is read again once the view is current.
                raw.seek(tp, list.get(0).offset());
                raw.pause(List.of(tp));
                continue;
            }
            List<ConsumerRecord<K, V>> handed = new ArrayList<>(list.size());
            for (ConsumerRecord<byte[], byte[]> record : list) {
                if (!book.judge(tp, record.offset(), record.key(), record.headers(), record.value())) {
                    stats.skipped++;
                    continue;
                }
                try {
                    handed.add(identity ? (ConsumerRecord<K, V>) (ConsumerRecord<?, ?>) record : deserialize(record));
                    stats.handed++;
                } catch (RecordDeserializationException e) {
                    failure = failure == null ? e : failure;
                    book.serviceSeek(tp, record.offset());
                    raw.seek(tp, record.offset());
                    break;
                }
            }
            book.afterBatch(tp);
            if (!handed.isEmpty()) {
                out.put(tp, handed);
            }
        }
        return result(out, records, failure);
    }

    private ConsumerRecords<K, V> result(
            Map<TopicPartition, List<ConsumerRecord<K, V>>> out,
            ConsumerRecords<byte[], byte[]> records,
            RecordDeserializationException failure) {
        if (out.isEmpty() && failure != null) {
            throw failure; // the position stays at the record, as a consumer's own deserialization failure leaves it
        }
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>(records.nextOffsets());
        next.keySet().retainAll(out.keySet());
        return new ConsumerRecords<>(out, next);
    }

    private ConsumerRecord<K, V> deserialize(ConsumerRecord<byte[], byte[]> r) {
        K key;
        V value;
        try {
            key = keys.deserialize(r.topic(), r.headers(), r.key());
            value = values.deserialize(r.topic(), r.headers(), r.value());
        } catch (RuntimeException e) {
            throw new RecordDeserializationException(
                    new TopicPartition(r.topic(), r.partition()),
                    r.offset(),
                    "Error deserializing the record at offset " + r.offset() + " of " + r.topic() + "-" + r.partition()
                            + ". If needed, please seek past the record to continue consumption.",
                    e);
        }
        return new ConsumerRecord<>(
                r.topic(),
                r.partition(),
                r.offset(),
                r.timestamp(),
                r.timestampType(),
                r.serializedKeySize(),
                r.serializedValueSize(),
                key,
                value,
                r.headers(),
                r.leaderEpoch(),
                r.deliveryCount());
    }

    // -- committing on behalf of the service

    private Map<TopicPartition, OffsetAndMetadata> marked(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        offsets.forEach((tp, oam) -> {
            Store store = book.serviceStore(tp, oam.offset(), oam.metadata());
            String metadata = store.metadata();
            if (metadata == null) {
                metadata = "";
            } else if (!metadata.equals(oam.metadata())) {
                metadata = store.offsetAndMetadata().metadata(); // the guard's mark replaced the service's metadata
            }
            out.put(tp, new OffsetAndMetadata(store.offset(), oam.leaderEpoch(), metadata));
        });
        return out;
    }

    /**
     * What the service has been handed, with the marks, explicitly: while the guard re-reads after a handover, the
     * positions are below the committed offsets, and a held partition must keep its committed offset and mark.
     */
    private static Map<TopicPartition, OffsetAndMetadata> offsets(List<Store> stores) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (Store s : stores) {
            out.put(s.partition(), s.offsetAndMetadata());
        }
        return out;
    }

    @Override
    public void commitSync() {
        Map<TopicPartition, OffsetAndMetadata> offsets = offsets(book.storedOffsets());
        if (!offsets.isEmpty()) {
            raw.commitSync(offsets);
        }
    }

    @Override
    public void commitSync(Duration timeout) {
        Map<TopicPartition, OffsetAndMetadata> offsets = offsets(book.storedOffsets());
        if (!offsets.isEmpty()) {
            raw.commitSync(offsets, timeout);
        }
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
        raw.commitSync(marked(offsets));
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) {
        raw.commitSync(marked(offsets), timeout);
    }

    @Override
    public void commitAsync() {
        commitAsync((OffsetCommitCallback) null);
    }

    @Override
    public void commitAsync(OffsetCommitCallback callback) {
        raw.commitAsync(offsets(book.storedOffsets()), callback);
    }

    @Override
    public void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) {
        raw.commitAsync(marked(offsets), callback);
    }

    private void commitStored(Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> offsets = offsets(book.storedOffsets());
        offsets.keySet().retainAll(partitions);
        if (!offsets.isEmpty()) {
            try {
                raw.commitSync(offsets);
            } catch (RuntimeException e) {
                log.warn("the guard's automatic commit of {} failed: {}", offsets.keySet(), e.toString());
            }
        }
    }

    // -- progress: tail commits, guard records, the floor commit of quiet partitions, automatic commits

    private void progress() {
        List<Store> commits = book.takeGuardCommits();
        if (!commits.isEmpty()) {
            // The service believes these are committed once it commits; its own commits would not carry them.
            raw.commitAsync(offsets(commits), (offsets, error) -> {
                if (error != null) {
                    log.debug("the guard's own commit failed: {}", error.toString());
                }
            });
        }
        long now = System.nanoTime();
        if (settings.autoCommit()
                && now - lastAutoCommit >= settings.autoCommitInterval().toNanos()) {
            lastAutoCommit = now;
            Map<TopicPartition, OffsetAndMetadata> offsets = offsets(book.storedOffsets());
            if (!offsets.isEmpty()) {
                raw.commitAsync(offsets, (o, error) -> {
                    if (error != null) {
                        log.warn("automatic commit failed: {}", error.toString());
                    }
                });
            }
        }
        if (now - lastProgress < settings.progressInterval().toNanos()) {
            return;
        }
        lastProgress = now;
        for (SkipReport report : book.skipReports()) {
            publish(new HandoverRecord.Guard(
                    report.replayId(),
                    report.partition().topic(),
                    report.partition().partition(),
                    report.firstSkipped(),
                    report.seenUntil(),
                    settings.member(),
                    System.currentTimeMillis()));
        }
        for (GuardBook.ProblemReport problem : book.problemReports()) {
            // Once per partition and problem: the guard skips nothing here for this replay (at-least-once).
            log.warn(
                    "guard of group {} cannot follow replay {} on {} and skips nothing for it: {}",
                    groupId,
                    problem.replayId(),
                    problem.partition(),
                    problem.problem());
            if (!problem.replayId().isEmpty()) {
                publish(new HandoverRecord.Guard(
                        problem.replayId(),
                        problem.partition().topic(),
                        problem.partition().partition(),
                        problem.firstSkipped(),
                        problem.seenUntil(),
                        settings.member(),
                        System.currentTimeMillis(),
                        problem.problem()));
            }
        }
        for (Store store : book.floorCommits(tp -> raw.position(tp))) {
            Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(store.partition(), store.offsetAndMetadata());
            try {
                raw.commitSync(offsets);
            } catch (RuntimeException e) {
                log.warn(
                        "committing the handover offset of quiet partition {} failed: {}",
                        store.partition(),
                        e.toString());
                continue;
            }
            book.floorDone(store);
        }
        pendingAcks = book.pendingAcks();
        int active = 0;
        for (GuardBook.PartitionBook part : book.parts().values()) {
            if (part.rules.start() != null) {
                active++;
            }
        }
        stats.activePartitions = active;
    }

    private void publish(HandoverRecord record) {
        HandoverWire.Encoded encoded = HandoverWire.encode(record);
        producer()
                .send(
                        new ProducerRecord<>(settings.handoverTopic(), 0, encoded.key(), encoded.value()),
                        (metadata, error) -> {
                            if (error != null) {
                                log.warn("publishing {} failed: {}", record.key(), error.toString());
                            }
                        });
    }

    // -- acknowledgements (in the follower's thread)

    private void tick() {
        long now = System.nanoTime();
        if (now - lastAckCheck < settings.progressInterval().toNanos()) {
            return;
        }
        lastAckCheck = now;
        Map<TopicPartition, GuardBook.PendingAck> pending = pendingAcks;
        if (pending.isEmpty()) {
            return;
        }
        // Only while the replay still says this H: after a cleanup (tombstones) an ack would bring a key back.
        Map<TopicPartition, GuardBook.PendingAck> todo = follower.withView(view -> {
            Map<TopicPartition, GuardBook.PendingAck> due = new HashMap<>();
            pending.forEach((tp, ack) -> {
                PartitionHandover part = view.replay(ack.replayId()).partitions.get(tp);
                if (part != null
                        && part.handover != null
                        && part.handover.offset() == ack.handover()
                        && !(part.ack != null && part.ack.offset() == ack.handover())) {
                    due.put(tp, ack);
                }
            });
            return due;
        });
        if (todo.isEmpty()) {
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> committed;
        try {
            if (admin == null) {
                admin = Admin.create(KafkaConnection.adminConfig(settings.connection(), clientId + "-admin"));
            }
            committed = admin.listConsumerGroupOffsets(
                            Map.of(groupId, new ListConsumerGroupOffsetsSpec().topicPartitions(todo.keySet())))
                    .partitionsToOffsetAndMetadata(groupId)
                    .get(15, TimeUnit.SECONDS);
        } catch (Exception e) {
            log.warn("reading the live group's offsets for acknowledgements failed: {}", e.toString());
            return;
        }
        boolean sent = false;
        for (Map.Entry<TopicPartition, GuardBook.PendingAck> e : todo.entrySet()) {
            OffsetAndMetadata found = committed.get(e.getKey());
            Long offset = found == null || found.offset() < 0 ? null : found.offset();
            CommitMark mark = found == null ? null : CommitMetadata.read(found.metadata());
            if (CommitMark.ackDue(e.getValue().handover(), offset, mark)) {
                publish(new HandoverRecord.Ack(
                        e.getValue().replayId(),
                        e.getKey().topic(),
                        e.getKey().partition(),
                        e.getValue().handover(),
                        offset,
                        settings.member(),
                        System.currentTimeMillis()));
                stats.acks++;
                sent = true;
                log.info(
                        "handover of {} acknowledged (replay {}, handover offset {}, committed {})",
                        e.getKey(),
                        e.getValue().replayId(),
                        e.getValue().handover(),
                        offset);
            }
        }
        if (sent) {
            producer().flush();
        }
    }

    // -- pause, resume and seek: the service's and the guard's do not clobber each other

    @Override
    public void pause(Collection<TopicPartition> partitions) {
        userPaused.addAll(partitions);
        raw.pause(partitions);
    }

    @Override
    public void resume(Collection<TopicPartition> partitions) {
        userPaused.removeAll(partitions);
        List<TopicPartition> free = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            GuardBook.PartitionBook part = book.part(tp);
            if (part == null || !part.held()) {
                free.add(tp);
            }
        }
        raw.resume(free);
    }

    /** The partitions the service paused (the guard's holds are its own business). */
    @Override
    public Set<TopicPartition> paused() {
        Set<TopicPartition> out = new HashSet<>(userPaused);
        out.retainAll(raw.assignment());
        return out;
    }

    @Override
    public void seek(TopicPartition partition, long offset) {
        raw.seek(partition, offset);
        book.serviceSeek(partition, offset);
    }

    @Override
    public void seek(TopicPartition partition, OffsetAndMetadata offsetAndMetadata) {
        raw.seek(partition, offsetAndMetadata);
        book.serviceSeek(partition, offsetAndMetadata.offset());
    }

    @Override
    public void seekToBeginning(Collection<TopicPartition> partitions) {
        raw.seekToBeginning(partitions);
        resolved(partitions);
    }

    @Override
    public void seekToEnd(Collection<TopicPartition> partitions) {
        raw.seekToEnd(partitions);
        resolved(partitions);
    }

    private void resolved(Collection<TopicPartition> partitions) {
        Collection<TopicPartition> which = partitions.isEmpty() ? raw.assignment() : partitions;
        for (TopicPartition tp : which) {
            if (book.part(tp) != null) {
                book.serviceSeek(tp, raw.position(tp));
            }
        }
    }

    // -- the rest of the Consumer API, as the wrapped consumer has it

    @Override
    public long position(TopicPartition partition) {
        return raw.position(partition);
    }

    @Override
    public long position(TopicPartition partition, Duration timeout) {
        return raw.position(partition, timeout);
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions) {
        return raw.committed(partitions);
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions, Duration timeout) {
        return raw.committed(partitions, timeout);
    }

    @Override
    public Uuid clientInstanceId(Duration timeout) {
        return raw.clientInstanceId(timeout);
    }

    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        return raw.metrics();
    }

    @Override
    public void registerMetricForSubscription(KafkaMetric metric) {
        raw.registerMetricForSubscription(metric);
    }

    @Override
    public void unregisterMetricFromSubscription(KafkaMetric metric) {
        raw.unregisterMetricFromSubscription(metric);
    }

    @Override
    public List<PartitionInfo> partitionsFor(String topic) {
        return raw.partitionsFor(topic);
    }

    @Override
    public List<PartitionInfo> partitionsFor(String topic, Duration timeout) {
        return raw.partitionsFor(topic, timeout);
    }

    @Override
    public Map<String, List<PartitionInfo>> listTopics() {
        return raw.listTopics();
    }

    @Override
    public Map<String, List<PartitionInfo>> listTopics(Duration timeout) {
        return raw.listTopics(timeout);
    }

    @Override
    public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> timestampsToSearch) {
        return raw.offsetsForTimes(timestampsToSearch);
    }

    @Override
    public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(
            Map<TopicPartition, Long> timestampsToSearch, Duration timeout) {
        return raw.offsetsForTimes(timestampsToSearch, timeout);
    }

    @Override
    public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions) {
        return raw.beginningOffsets(partitions);
    }

    @Override
    public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions, Duration timeout) {
        return raw.beginningOffsets(partitions, timeout);
    }

    @Override
    public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) {
        return raw.endOffsets(partitions);
    }

    @Override
    public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions, Duration timeout) {
        return raw.endOffsets(partitions, timeout);
    }

    @Override
    public OptionalLong currentLag(TopicPartition topicPartition) {
        return raw.currentLag(topicPartition);
    }

    @Override
    public ConsumerGroupMetadata groupMetadata() {
        return raw.groupMetadata();
    }

    @Override
    public void enforceRebalance() {
        raw.enforceRebalance();
    }

    @Override
    public void enforceRebalance(String reason) {
        raw.enforceRebalance(reason);
    }

    @Override
    public void wakeup() {
        raw.wakeup();
    }

    @Override
    public void close() {
        close(CloseOptions.timeout(Duration.ofSeconds(30)));
    }

    @Override
    public void close(Duration timeout) {
        close(CloseOptions.timeout(timeout));
    }

    @Override
    public void close(CloseOptions options) {
        try {
            if (settings.autoCommit() && !closing) {
                commitStored(new ArrayList<>(book.parts().keySet()));
            }
            closing = true;
            raw.close(options); // leaving the group runs the revocation callbacks: the service commits through us
        } finally {
            closing = true;
            follower.close();
            synchronized (this) {
                if (producer != null) {
                    producer.close(Duration.ofSeconds(10));
                }
            }
            if (admin != null) {
                admin.close(Duration.ofSeconds(5));
            }
            if (ownsDeserializers) {
                keys.close();
                values.close();
            }
        }
    }
}
