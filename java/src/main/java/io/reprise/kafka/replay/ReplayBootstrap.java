package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.HandoverView;
import io.reprise.kafka.protocol.HandoverWire;
import io.reprise.kafka.protocol.ReplayHandover;
import io.reprise.kafka.protocol.StartDecision;
import io.reprise.kafka.topic.HandoverFollower;
import io.reprise.kafka.topic.HandoverTopic;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Resolves a replay's start once and records it (HANDOVER.md section 5.1, {@code replay_worker/replay/bootstrap.py}): the
 * {@code replay} and {@code start} records and the replay group's committed offsets, in one Kafka transaction.
 *
 * <p>Several replicas (Java or Python) start at once. Each looks first (a replica that finds the work done fences
 * nobody); otherwise it calls {@code initTransactions} with the shared transactional id
 * {@code reprise-bootstrap-<replay id>}, which fences every earlier bootstrapper, reads the topic again, and if the
 * replay is still not bootstrapped resolves S and commits, in one transaction, the records and S as the replay
 * group's offsets ({@code sendOffsetsToTransaction}). So exactly one resolution wins, and the published S(p) always
 * equals the offset the replay group starts from. A partition that already has a committed offset in the replay
 * group keeps it (a resumed or pre-seeded replay), and its published start says so.
 */
final class ReplayBootstrap {

    private static final Logger LOG = LoggerFactory.getLogger(ReplayBootstrap.class);
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    /** The start could not be resolved or recorded; the message says why. */
    static final class BootstrapException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BootstrapException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private ReplayBootstrap() {}

    static String transactionalId(String replayId) {
        return "reprise-bootstrap-" + replayId;
    }

    /**
     * Makes sure the replay is bootstrapped and returns its handover state. Safe from every replica at once and
     * after any crash. Throws {@link StartDecision.OlderThanRetention} / {@link StartDecision.SpecException} for a
     * start that cannot be honoured (not retried), {@link BootstrapException} when Kafka keeps failing.
     */
    static ReplayHandover run(
            ReplaySettings settings,
            KafkaClientConfig clients,
            HandoverTopic handover,
            HandoverFollower<?> reads,
            KafkaConsumer<byte[], byte[]> consumer,
            BooleanFlag stopping) {
        RuntimeException last = null;
        for (int attempt = 0; attempt < 20 && !stopping.get(); attempt++) {
            try {
                handover.ensure(true, reads);
                ReplayHandover state = readReplay(reads, settings.replayId());
                if (state.bootstrapped()) {
                    return state;
                }
                return once(settings, clients, reads, consumer);
            } catch (StartDecision.OlderThanRetention | StartDecision.SpecException notRetried) {
                throw notRetried;
            } catch (RuntimeException failed) {
                last = failed;
                // Fenced by a concurrent bootstrapper, a coordinator moving, a broker restarting: back off with
                // jitter (so two replicas do not keep fencing each other) and look again.
                double pause = Math.min(5.0, 0.2 * Math.pow(2, attempt))
                        * (0.5 + ThreadLocalRandom.current().nextDouble());
                LOG.warn(
                        "bootstrap attempt {} failed, retrying in {} s: {}",
                        attempt + 1,
                        String.format("%.2f", pause),
                        failed.toString());
                try {
                    Thread.sleep((long) (pause * 1000));
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        throw new BootstrapException("could not bootstrap replay " + settings.replayId() + ": " + last, last);
    }

    /**
     * The replay's state as the handover topic says now: the follower reads on from where it stopped, which gives
     * what a read from the beginning gives (one read of the topic for the whole start, not one per look).
     */
    private static ReplayHandover readReplay(HandoverFollower<?> reads, String replayId) {
        return reads.catchUp(TIMEOUT, view -> view.replay(replayId));
    }

    /**
     * One bootstrap transaction. {@code consumer} is the replay group's consumer, not subscribed yet: it answers the
     * questions (partitions, offsets, the group's committed offsets) and names the group in
     * {@code sendOffsetsToTransaction}, as a member that has not joined (generation -1), the same as a consumer
     * made for the purpose would.
     */
    private static ReplayHandover once(
            ReplaySettings settings,
            KafkaClientConfig clients,
            HandoverFollower<?> reads,
            KafkaConsumer<byte[], byte[]> consumer) {
        Map<String, Object> producerConfig = clients.producer("reprise-bootstrap-" + settings.memberName());
        producerConfig.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId(settings.replayId()));
        // A bootstrapper that dies mid-transaction holds back read_committed readers of the handover topic until
        // the transaction times out (or the next bootstrapper fences it): keep that short.
        producerConfig.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 15000);
        producerConfig.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerConfig)) {
            producer.initTransactions();
            // Every earlier bootstrapper of this replay is fenced: what the topic says now is final.
            ReplayHandover state = readReplay(reads, settings.replayId());
            if (state.bootstrapped()) {
                return state;
            }
            long now = System.currentTimeMillis();
            Long endTs = settings.end() != null && settings.end().kind() == StartDecision.EndKind.TIMESTAMP
                    ? settings.end().timestampMs()
                    : null;
            List<StartDecision.PartitionFacts> facts =
                    partitionFacts(consumer, settings.topics(), settings.start().lookupTimestamp(now), endTs);
            List<TopicPartition> partitions = new ArrayList<>();
            facts.forEach(f -> partitions.add(new TopicPartition(f.topic(), f.partition())));
            Map<TopicPartition, Long> committed = new HashMap<>();
            consumer.committed(new java.util.HashSet<>(partitions), TIMEOUT).forEach((tp, found) -> {
                if (found != null && found.offset() >= 0) {
                    committed.put(tp, found.offset());
                }
            });
            List<HandoverRecord> records = new ArrayList<>();
            records.add(new HandoverRecord.Replay(
                    settings.replayId(),
                    settings.mode(),
                    settings.replayGroup(),
                    settings.liveGroup(),
                    settings.topics(),
                    settings.filter(),
                    now));
            Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
            Map<String, Long> shown = new LinkedHashMap<>();
            List<String> clamped = new ArrayList<>();
            for (StartDecision.PartitionFacts f : facts) {
                TopicPartition tp = new TopicPartition(f.topic(), f.partition());
                StartDecision d = StartDecision.decide(
                        settings.start(), settings.end(), f, settings.allowClamp(), now, committed.get(tp));
                records.add(new HandoverRecord.Start(
                        settings.replayId(),
                        d.topic(),
                        d.partition(),
                        d.offset(),
                        d.endOffset(),
                        d.endTimestampMs(),
                        d.clamped(),
                        now));
                if (!committed.containsKey(tp)) {
                    offsets.put(tp, new OffsetAndMetadata(d.offset()));
                }
                shown.put(tp.toString(), d.offset());
                if (d.clamped()) {
                    clamped.add(tp.toString());
                }
            }
            producer.beginTransaction();
            try {
                for (HandoverRecord record : records) {
                    HandoverWire.Encoded encoded = HandoverWire.encode(record);
                    producer.send(new ProducerRecord<>(settings.handoverTopic(), 0, encoded.key(), encoded.value()));
                }
                if (!offsets.isEmpty()) {
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                }
                producer.commitTransaction();
            } catch (KafkaException failed) {
                try {
                    producer.abortTransaction();
                } catch (KafkaException fencedOrFatal) {
                    // fenced: the newer bootstrapper owns the transaction; nothing of ours remains to abort
                }
                throw failed;
            }
            LOG.info(
                    "replay {} bootstrapped: {} partitions, start offsets {}, clamped {}",
                    settings.replayId(),
                    facts.size(),
                    shown,
                    clamped);
            HandoverView view = new HandoverView();
            for (HandoverRecord record : records) {
                HandoverWire.Encoded encoded = HandoverWire.encode(record);
                view.apply(encoded.key(), encoded.value());
            }
            return view.replay(settings.replayId());
        }
    }

    /** Log start, end and time lookups of every partition of {@code topics}. */
    static List<StartDecision.PartitionFacts> partitionFacts(
            KafkaConsumer<byte[], byte[]> consumer, List<String> topics, Long startTs, Long endTs) {
        List<TopicPartition> partitions = new ArrayList<>();
        for (String topic : topics) {
            List<PartitionInfo> found = consumer.partitionsFor(topic, TIMEOUT);
            if (found == null || found.isEmpty()) {
                throw new BootstrapException("source topic " + topic + ": it does not exist", null);
            }
            found.stream()
                    .map(p -> new TopicPartition(topic, p.partition()))
                    .sorted(java.util.Comparator.comparingInt(TopicPartition::partition))
                    .forEach(partitions::add);
        }
        // Assigned for the lookups: a read_committed consumer keeps each answer as the partition's last stable
        // offset, and logs a WARN per partition it does not hold ("Not updating last stable offset ... no longer
        // assigned": 14 to 28 lines per replica at every start). The consumer has not subscribed yet, so the
        // assignment is its own, brief, and never reaches the group.
        consumer.assign(partitions);
        Map<TopicPartition, Long> low;
        Map<TopicPartition, Long> high;
        Map<TopicPartition, Long> starts;
        Map<TopicPartition, Long> ends;
        try {
            low = consumer.beginningOffsets(partitions, TIMEOUT);
            high = consumer.endOffsets(partitions, TIMEOUT);
            starts = times(consumer, partitions, startTs);
            ends = times(consumer, partitions, endTs);
        } finally {
            consumer.unsubscribe(); // KafkaConsumer's way to drop a manual assignment; it never joined the group
        }
        List<StartDecision.PartitionFacts> facts = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            facts.add(new StartDecision.PartitionFacts(
                    tp.topic(), tp.partition(), low.get(tp), high.get(tp), starts.get(tp), ends.get(tp)));
        }
        return facts;
    }

    private static Map<TopicPartition, Long> times(
            KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> partitions, Long ts) {
        Map<TopicPartition, Long> result = new HashMap<>();
        if (ts == null) {
            return result;
        }
        Map<TopicPartition, Long> query = new HashMap<>();
        partitions.forEach(tp -> query.put(tp, ts));
        Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(query, TIMEOUT);
        for (TopicPartition tp : partitions) {
            OffsetAndTimestamp at = found.get(tp);
            // null: no record is that new (the reference's -1).
            result.put(tp, at == null ? -1L : at.offset());
        }
        return result;
    }

    /** A stop flag the bootstrap's retries look at. */
    interface BooleanFlag {
        boolean get();
    }
}
