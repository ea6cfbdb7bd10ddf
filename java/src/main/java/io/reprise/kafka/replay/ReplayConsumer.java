package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.FinishRule;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.HandoverView;
import io.reprise.kafka.protocol.PartitionHandover;
import io.reprise.kafka.protocol.ReplayHandover;
import io.reprise.kafka.topic.HandoverFollower;
import io.reprise.kafka.topic.HandoverTopic;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.record.TimestampType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One replica of the replay group: read a batch, filter, hand it to the service's handler, commit, decide which
 * partitions are finished (HANDOVER.md section 5, {@code replay_worker/consumer.py}).
 *
 * <ul>
 *   <li>The start was recorded as the replay group's committed offsets by the bootstrap, so an assignment never
 *       seeks: every replica and every restart resumes from committed offsets, and a rebalance cannot replay
 *       anything twice (seed 003's trap).</li>
 *   <li>Auto commit is off. A batch's offsets are committed after the handler returned (asynchronously: the next
 *       batch is read meanwhile; at most one such commit in flight, else the next commit waits), synchronously on
 *       revoke, on finishing a partition and on stop; nothing on lost (someone else owns the partitions).</li>
 *   <li>A partition is finished when {@link FinishRule} says so. Its final offset is committed with a
 *       {@code finished} mark <em>before</em> H is published, so a replica that gets the partition later sees from
 *       the offset alone that it is finished, and publishes H again (idempotent).</li>
 *   <li>The end of a partition is where the consumer's lag (to the last stable offset) is zero after a batch is
 *       processed; the position there is past any trailing transaction markers, so committing it makes the replay
 *       group's lag really zero.</li>
 *   <li>The slow checks (the live group's offsets, the handover topic's guard records, end offsets, progress
 *       records) run in a thread of their own with clients of their own: the consumer is only touched by the loop.</li>
 * </ul>
 */
final class ReplayConsumer<K, V> implements ConsumerRebalanceListener {

    private static final Logger LOG = LoggerFactory.getLogger(ReplayConsumer.class);

    /** How long a poll waits when nothing is there. */
    static final Duration POLL_WAIT = Duration.ofMillis(200);
    /** How long a stop waits for the consumer to leave the group (inside Kubernetes' 30 s grace period). */
    static final Duration CLOSE_WAIT = Duration.ofSeconds(15);
    /** Seconds between two {@code progress} records of one replica. */
    static final double PROGRESS_INTERVAL = 2.0;

    /** This replica's view of one assigned partition (the loop's; the check thread only reads). */
    static final class PartitionProgress {
        final TopicPartition tp;
        volatile Long position;
        volatile Long committed;
        Long endOffset;
        Long endTimestampMs;
        volatile String finished;
        volatile boolean atEnd;
        Long endMet;

        PartitionProgress(TopicPartition tp) {
            this.tp = tp;
        }
    }

    private final ReplaySettings settings;
    private final KafkaClientConfig clients;
    private final HandlerDelivery<K, V> delivery;
    private final DeadLetters deadLetters;
    private final ReplayMetrics metrics;
    private final Map<TopicPartition, HandoverRecord.Start> plan = new HashMap<>();
    private final HandoverTopic handover;
    private final Throttle throttle;
    private final Map<TopicPartition, PartitionProgress> parts = new ConcurrentHashMap<>();
    private final Supplier<Boolean> stopRequested;

    private final KafkaConsumer<byte[], byte[]> consumer;
    private volatile boolean ready;
    private boolean reading;
    private int asyncSent;
    private volatile int asyncAnswered;
    private volatile boolean commitFailed;
    private final Map<TopicPartition, OffsetAndMetadata> reseal = new HashMap<>();
    private int resealAfter;

    // Written by the check thread, read by the loop: swapped whole.
    private volatile Map<TopicPartition, Long> live = Map.of();
    private volatile Map<TopicPartition, Long> ends = Map.of();
    /** Tails the handover topic: the guards' seen-until offsets and the H already published. */
    private final HandoverFollower<ReplayFacts> follower;

    /** What the loop needs of the handover topic, as a snapshot the follower makes. */
    record ReplayFacts(Map<TopicPartition, Long> guardPositions, Set<TopicPartition> handedOver) {
        static java.util.function.Function<HandoverView, ReplayFacts> of(String replayId) {
            return view -> {
                Map<TopicPartition, Long> seen = new HashMap<>();
                Set<TopicPartition> done = new HashSet<>();
                view.replay(replayId).partitions.forEach((tp, p) -> {
                    if (p.guard != null) {
                        seen.put(tp, p.guard.seenUntil());
                    }
                    if (p.handover != null) {
                        done.add(tp);
                    }
                });
                return new ReplayFacts(Map.copyOf(seen), Set.copyOf(done));
            };
        }
    }

    /**
     * {@code consumer} (made by {@link #newConsumer}, not subscribed) and {@code follower} (not started) are the
     * ones the bootstrap used; {@link #run} takes them over and closes them. The plan is copied from {@code state}
     * here, before the follower's thread goes on applying records to the view {@code state} belongs to.
     */
    ReplayConsumer(ReplaySettings settings, KafkaClientConfig clients, HandlerDelivery<K, V> delivery,
                   DeadLetters deadLetters, ReplayMetrics metrics, ReplayHandover state, HandoverTopic handover,
                   KafkaConsumer<byte[], byte[]> consumer, HandoverFollower<ReplayFacts> follower,
                   Supplier<Boolean> stopRequested) {
        this.consumer = consumer;
        this.follower = follower;
        this.settings = settings;
        this.clients = clients;
        this.delivery = delivery;
        this.deadLetters = deadLetters;
        this.metrics = metrics;
        this.handover = handover;
        this.stopRequested = stopRequested;
        this.throttle = new Throttle(settings.maxRecordsPerSecond(), settings.maxBytesPerSecond());
        for (PartitionHandover p : state.planned()) {
            plan.put(new TopicPartition(p.topic, p.partition), p.start);
        }
    }

    /** The replay group's consumer of a replica: the bootstrap asks it its questions before it subscribes. */
    static KafkaConsumer<byte[], byte[]> newConsumer(ReplaySettings settings, KafkaClientConfig clients) {
        return new KafkaConsumer<>(clients.replayConsumer(settings.replayGroup(), "reprise-" + settings.memberName(),
                settings.batchSize()));
    }

    /** The tail of the handover topic a replica keeps; the bootstrap reads with it before it is started. */
    static HandoverFollower<ReplayFacts> newFollower(ReplaySettings settings, KafkaClientConfig clients) {
        return new HandoverFollower<>(clients.connection(), settings.handoverTopic(), ReplayFacts.of(settings.replayId()),
                Duration.ofMillis(200), () -> { }, "reprise-" + settings.memberName() + "-follower");
    }

    boolean ready() {
        return ready;
    }

    /** Runs until a stop is requested or, with {@code exitWhenDone}, every partition of the replay is finished. */
    void run() {
        follower.start();
        Checks checks = new Checks();
        Thread checker = new Thread(checks, "reprise-replay-checks");
        checker.setDaemon(true);
        try {
            consumer.subscribe(settings.topics(), this);
            checker.start();
            ready = true;
            LOG.info("replay consumer started: mode {}, topics {}, replay group {}, {} partitions planned",
                    settings.mode(), settings.topics(), settings.replayGroup(), plan.size());
            while (!stopRequested.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL_WAIT);
                metrics.beat();
                process(records);
                decide();
                resealFinished();
                if (settings.exitWhenDone() && allDone()) {
                    LOG.info("every partition of the replay is finished; exiting");
                    break;
                }
            }
            // A stop: the positions are committed before the consumer leaves.
            commit(positions(true), false);
        } finally {
            ready = false;
            checks.stop();
            try {
                checker.join(TimeUnit.SECONDS.toMillis(5));
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
            follower.close();
            try {
                consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(CLOSE_WAIT));
            } catch (RuntimeException closing) {
                LOG.warn("closing the consumer failed (its positions are committed): {}", closing.toString());
            }
            LOG.info("replay consumer stopped");
        }
    }

    // ------------------------------------------------------------------------------------------- the batch

    private void process(ConsumerRecords<byte[], byte[]> records) {
        List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(records.count());
        long size = 0;
        for (TopicPartition tp : records.partitions()) {
            PartitionProgress part = parts.get(tp);
            // Not ours (any more), or finished: never processed past the stop offset.
            if (part == null || part.finished != null || part.endMet != null) {
                continue;
            }
            boolean bounded = part.endOffset != null || part.endTimestampMs != null;
            long position = -1; // set once per partition and batch: a boxed Long per record costs an allocation
            for (ConsumerRecord<byte[], byte[]> record : records.records(tp)) {
                if (bounded) {
                    Long ts = record.timestampType() == TimestampType.NO_TIMESTAMP_TYPE ? null : record.timestamp();
                    if (FinishRule.recordEndsPartition(part.endOffset, part.endTimestampMs, record.offset(), ts)) {
                        part.endMet = record.offset();
                        break;
                    }
                }
                position = record.offset() + 1;
                batch.add(record);
                size += Math.max(0, record.serializedValueSize()) + Math.max(0, record.serializedKeySize());
            }
            if (position >= 0) {
                part.position = position;
            }
        }
        if (!batch.isEmpty()) {
            if (!reading) {
                reading = true;
                LOG.info("first records read: {}", batch.size());
            }
            metrics.consumed.inc(batch.size());
            metrics.bytes.inc(size);
            if (!throttle.unlimited()) {
                waitFor(throttle.delaySeconds(batch.size(), size, System.nanoTime() / 1e9));
            }
            HandlerDelivery.Outcome outcome = delivery.deliver(batch);
            metrics.matched.inc(outcome.matched);
            metrics.skipped.inc(outcome.filteredOut);
            metrics.delivered.inc(outcome.delivered);
            metrics.deadLettered.inc(outcome.deadLettered);
            metrics.poisonSkipped.inc(outcome.poisonSkipped);
        }
        // The end of a partition: everything up to the last stable offset was handed out and is processed now.
        for (PartitionProgress part : parts.values()) {
            if (part.finished != null || part.position == null) {
                continue;
            }
            if (part.endMet != null) {
                part.position = Math.max(part.position, part.endMet);
                continue;
            }
            OptionalLong lag = consumer.currentLag(part.tp);
            boolean atEnd = lag.isPresent() && lag.getAsLong() == 0;
            part.atEnd = atEnd;
            if (atEnd) {
                part.position = Math.max(part.position, consumer.position(part.tp));
            }
        }
        deadLetters.makeDurable();
        Map<TopicPartition, OffsetAndMetadata> offsets = positions(false);
        if (!offsets.isEmpty()) {
            // At most one asynchronous commit on its way: if the last one has not come back (a coordinator moving,
            // a broker away), this one waits, so the uncommitted batches never pile up.
            boolean async = asyncSent == asyncAnswered && !commitFailed;
            commitFailed = false;
            commit(offsets, async);
        }
    }

    private Map<TopicPartition, OffsetAndMetadata> positions(boolean all) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (PartitionProgress part : parts.values()) {
            if (part.finished == null && part.position != null && (all || !part.position.equals(part.committed))) {
                offsets.put(part.tp, new OffsetAndMetadata(part.position));
            }
        }
        return offsets;
    }

    /**
     * Commits; retries while Kafka is briefly unavailable. False when this replica is no longer a member (the
     * rebalance that follows takes the partitions away).
     */
    private boolean commit(Map<TopicPartition, OffsetAndMetadata> offsets, boolean async) {
        if (offsets.isEmpty()) {
            return true;
        }
        if (async) {
            asyncSent++;
            consumer.commitAsync(offsets, (committed, error) -> {
                asyncAnswered++;
                if (error != null) {
                    commitFailed = true;
                    metrics.errors.inc(1);
                    LOG.warn("a commit failed; it is made again with the next batch: {}", error.toString());
                    for (TopicPartition tp : offsets.keySet()) {
                        PartitionProgress part = parts.get(tp);
                        if (part != null && part.finished == null) {
                            part.committed = null;
                        }
                    }
                }
            });
        } else {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                try {
                    consumer.commitSync(offsets, Duration.ofSeconds(15));
                    break;
                } catch (RebalanceInProgressException rebalancing) {
                    // Cooperative rebalancing: the commit can only go through after the next poll completes the
                    // rebalance. Not committed now; the positions are committed again after that poll.
                    LOG.info("commit deferred until the rebalance under way completes");
                    return false;
                } catch (CommitFailedException | FencedInstanceIdException notMember) {
                    LOG.warn("commit refused: no longer a member; the partitions move to another replica: {}",
                            notMember.toString());
                    metrics.errors.inc(1);
                    return false;
                } catch (RetriableException retriable) {
                    if (System.nanoTime() > deadline) {
                        throw retriable;
                    }
                    metrics.errors.inc(1);
                    LOG.warn("commit failed, retrying: {}", retriable.toString());
                    sleep(500);
                }
            }
        }
        metrics.commits.inc(1);
        offsets.forEach((tp, om) -> {
            PartitionProgress part = parts.get(tp);
            if (part != null) {
                part.committed = om.offset();
                metrics.partition(tp.topic(), tp.partition(), om.offset(), null, null);
            }
        });
        return true;
    }

    // ------------------------------------------------------------------------------------------- finishing

    private void decide() {
        Map<TopicPartition, Long> liveNow = live;
        Map<TopicPartition, Long> guardNow = follower.snapshot().guardPositions();
        List<Map.Entry<PartitionProgress, String>> finishing = new ArrayList<>();
        for (PartitionProgress part : parts.values()) {
            if (part.finished != null || part.position == null) {
                continue;
            }
            if (part.endMet != null) {
                finishing.add(Map.entry(part, FinishRule.END_BOUND));
                continue;
            }
            Long liveAt = liveNow.get(part.tp);
            Long guard = guardNow.get(part.tp);
            if (guard != null) {
                liveAt = Math.max(liveAt == null ? 0 : liveAt, guard);
            }
            Optional<String> reason = FinishRule.decide(settings.mode(), part.position, part.endOffset,
                    part.endTimestampMs, part.atEnd, liveAt);
            reason.ifPresent(r -> finishing.add(Map.entry(part, r)));
        }
        finishing.removeIf(f -> FinishRule.END_OF_PARTITION.equals(f.getValue()) && !endIsCurrent(f.getKey()));
        if (!finishing.isEmpty()) {
            finish(finishing);
        }
    }

    /**
     * Whether {@code part}'s position is the end of the partition now. The consumer's lag comes from its last fetch
     * response for the partition, and it fetches a partition again only once the records it holds are handed out:
     * a throttled or slow replay drains a fetch taken seconds ago and would see a lag of 0 at an end long passed
     * (and hand over short of it). So the end is asked for before a partition finishes on it (HANDOVER.md section
     * 1: it reaches the end of p, nothing new arriving; the reference's {@code at_end} is an end reported since the
     * last decision); the answer also refreshes the consumer's cached lag.
     */
    private boolean endIsCurrent(PartitionProgress part) {
        try {
            Long end = consumer.endOffsets(List.of(part.tp), Duration.ofSeconds(10)).get(part.tp);
            boolean current = end != null && part.position >= end;
            if (!current) {
                part.atEnd = false;
            }
            return current;
        } catch (KafkaException unanswered) {
            LOG.debug("the end of {} could not be confirmed now; asked again next turn: {}", part.tp,
                    unanswered.toString());
            return false;
        }
    }

    /**
     * Commits the stop offsets with {@code finished} marks, then publishes them as H, then stops reading those
     * partitions. Partitions that finish together share one commit and one publish.
     */
    private void finish(List<Map.Entry<PartitionProgress, String>> finishing) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (Map.Entry<PartitionProgress, String> f : finishing) {
            offsets.put(f.getKey().tp, new OffsetAndMetadata(f.getKey().position,
                    FinishMark.metadata(settings.replayId(), f.getValue())));
        }
        if (!commit(offsets, false)) {
            return; // not a member any more: whoever gets the partitions decides again
        }
        if (asyncSent != asyncAnswered) {
            // An asynchronous commit of the same positions without the mark may still be on its way and land after
            // this one: the marks are committed again once it is answered.
            reseal.putAll(offsets);
            resealAfter = asyncSent;
        }
        List<HandoverRecord> records = new ArrayList<>();
        for (Map.Entry<PartitionProgress, String> f : finishing) {
            PartitionProgress part = f.getKey();
            part.finished = f.getValue();
            records.add(new HandoverRecord.Handover(settings.replayId(), part.tp.topic(), part.tp.partition(),
                    part.position, f.getValue(), settings.memberName(), System.currentTimeMillis()));
        }
        publishHandover(records);
        for (Map.Entry<PartitionProgress, String> f : finishing) {
            PartitionProgress part = f.getKey();
            consumer.pause(List.of(part.tp));
            metrics.partition(part.tp.topic(), part.tp.partition(), part.position, null, "finished");
            metrics.finishedPartitions.incrementAndGet();
            LOG.info("partition {} finished: handover offset {}, reason {}", part.tp, part.position, f.getValue());
        }
    }

    private void resealFinished() {
        if (reseal.isEmpty() || asyncAnswered < resealAfter) {
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> again = new LinkedHashMap<>();
        reseal.forEach((tp, om) -> {
            if (parts.containsKey(tp)) {
                again.put(tp, om);
            }
        });
        reseal.clear();
        commit(again, false);
    }

    /** H must be durable before anyone acts on it: retried until acknowledged (a restart would publish it again). */
    private void publishHandover(List<HandoverRecord> records) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (true) {
            try {
                handover.publish(records);
                return;
            } catch (RuntimeException failed) {
                if (System.nanoTime() > deadline) {
                    throw failed;
                }
                metrics.errors.inc(1);
                LOG.warn("publishing the handover offset failed, retrying: {}", failed.toString());
                sleep(1000);
            }
        }
    }

    /** Every planned partition is finished: here, or as the handover topic says. */
    private boolean allDone() {
        if (plan.isEmpty()) {
            return false;
        }
        Set<TopicPartition> known = follower.snapshot().handedOver();
        for (TopicPartition tp : plan.keySet()) {
            PartitionProgress part = parts.get(tp);
            if (!known.contains(tp) && (part == null || part.finished == null)) {
                return false;
            }
        }
        return true;
    }

    // ------------------------------------------------------------------------------------------- rebalances

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        if (partitions.isEmpty()) {
            return;
        }
        metrics.rebalances.inc(1);
        if (stopRequested.get()) {
            // Served by close() while a rebalance was under way: taken to complete the protocol, not read.
            LOG.info("partitions assigned while stopping; left to the next owner: {}", partitions);
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> committed = readCommitted(new HashSet<>(partitions));
        List<TopicPartition> toPause = new ArrayList<>();
        List<TopicPartition> finishedHere = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            HandoverRecord.Start start = plan.get(tp);
            PartitionProgress part = new PartitionProgress(tp);
            if (start == null) {
                // Not in the replay's plan (e.g. added after the start was resolved): the live group owns it.
                part.finished = "not-in-plan";
                toPause.add(tp);
            } else {
                OffsetAndMetadata found = committed.get(tp);
                if (found == null) {
                    // Planned, but the group's offset is gone (offsets of a long-empty group expire): resume at the
                    // published start, the offset the bootstrap committed. Duplicates, never a loss.
                    found = new OffsetAndMetadata(start.offset());
                    consumer.commitSync(Map.of(tp, found));
                    consumer.seek(tp, start.offset());
                    LOG.warn("planned partition {} had no committed offset; committed its published start {}", tp,
                            start.offset());
                }
                part.position = found.offset();
                part.committed = found.offset();
                part.endOffset = start.endOffset();
                part.endTimestampMs = start.endTimestampMs();
                CommitMark mark = FinishMark.decode(found.metadata());
                if (mark != null && mark.finished() != null && settings.replayId().equals(mark.replayId())) {
                    part.finished = mark.finished();
                    toPause.add(tp);
                    finishedHere.add(tp);
                    // The previous owner may have died between its commit and its publish: publish again (the same
                    // H under the same key: idempotent).
                    publishHandover(List.of(new HandoverRecord.Handover(settings.replayId(), tp.topic(),
                            tp.partition(), found.offset(), mark.finished(), settings.memberName(),
                            System.currentTimeMillis())));
                    metrics.partition(tp.topic(), tp.partition(), found.offset(), null, "finished");
                } else {
                    metrics.partition(tp.topic(), tp.partition(), found.offset(), null, "replaying");
                }
            }
            parts.put(tp, part);
        }
        if (!toPause.isEmpty()) {
            consumer.pause(toPause);
        }
        metrics.assignedPartitions.set(parts.size());
        LOG.info("partitions assigned: {} (finished: {})", partitions, finishedHere);
    }

    /**
     * The group's committed offsets, read in a rebalance callback. Failures are retried for a minute: a coordinator
     * that moves or is still loading refuses for a while, and an unreadable offset must never be taken for "none".
     */
    private Map<TopicPartition, OffsetAndMetadata> readCommitted(Set<TopicPartition> partitions) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                Map<TopicPartition, OffsetAndMetadata> found = consumer.committed(partitions, Duration.ofSeconds(15));
                Map<TopicPartition, OffsetAndMetadata> result = new HashMap<>();
                found.forEach((tp, om) -> {
                    if (om != null && om.offset() >= 0) {
                        result.put(tp, om);
                    }
                });
                return result;
            } catch (RetriableException failed) {
                if (System.nanoTime() > deadline) {
                    throw failed;
                }
                LOG.warn("reading committed offsets failed, retrying: {}", failed.toString());
                sleep(500);
            }
        }
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        if (partitions.isEmpty()) {
            return;
        }
        metrics.rebalances.inc(1);
        Map<TopicPartition, OffsetAndMetadata> pending = new LinkedHashMap<>();
        for (TopicPartition tp : partitions) {
            PartitionProgress part = parts.get(tp);
            if (part != null && part.finished == null && part.position != null) {
                pending.put(tp, new OffsetAndMetadata(part.position));
            }
        }
        try {
            commit(pending, false);
        } catch (KafkaException failed) {
            LOG.warn("commit on revoke failed: {}", failed.toString());
        }
        drop(partitions);
        LOG.info("partitions revoked: {}", partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        metrics.rebalances.inc(1);
        drop(partitions);
        LOG.warn("partitions lost (not committed; the new owner resumes from the last commit): {}", partitions);
    }

    private void drop(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            parts.remove(tp);
            reseal.remove(tp);
            metrics.forget(tp.topic(), tp.partition());
        }
        metrics.assignedPartitions.set(parts.size());
    }

    // ------------------------------------------------------------------------------------------- slow checks

    /**
     * The check thread: every check interval the live group's committed offsets (Parallel, Handover), the handover
     * topic's guard positions and published H, end offsets (for lag), and progress records. Results are swapped in
     * whole; the loop only reads them.
     */
    private final class Checks implements Runnable {
        private volatile boolean stopped;
        private final Map<TopicPartition, String> reported = new HashMap<>();
        private long lastReport;

        void stop() {
            stopped = true;
        }

        @Override
        public void run() {
            try (Admin admin = Admin.create(clients.admin("reprise-" + settings.memberName() + "-checks"))) {
                while (!stopped) {
                    long began = System.nanoTime();
                    try {
                        once(admin);
                    } catch (RuntimeException failed) {
                        metrics.errors.inc(1);
                        LOG.warn("a slow check failed: {}", failed.toString());
                    }
                    long left = (long) (settings.checkIntervalSeconds() * 1000) - (System.nanoTime() - began) / 1_000_000;
                    long until = System.nanoTime() + Math.max(0, left) * 1_000_000;
                    while (!stopped && System.nanoTime() < until) {
                        sleep(Math.min(100, Math.max(1, (until - System.nanoTime()) / 1_000_000)));
                    }
                }
            }
        }

        private void once(Admin admin) {
            List<PartitionProgress> current = new ArrayList<>(parts.values());
            report(current);
            if (settings.liveGroup() != null && !settings.mode().equals(FinishRule.DRAIN)) {
                try {
                    Map<TopicPartition, Long> found = new HashMap<>();
                    admin.listConsumerGroupOffsets(settings.liveGroup()).partitionsToOffsetAndMetadata()
                            .get(15, TimeUnit.SECONDS).forEach((tp, om) -> {
                                if (om != null && om.offset() >= 0) {
                                    found.put(tp, om.offset());
                                }
                            });
                    live = found;
                } catch (Exception failed) {
                    metrics.errors.inc(1);
                    LOG.warn("reading the live group's offsets failed: {}", failed.toString());
                }
            }
            if (!current.isEmpty()) {
                Map<TopicPartition, OffsetSpec> query = new HashMap<>();
                current.forEach(p -> query.put(p.tp, OffsetSpec.latest()));
                try {
                    Map<TopicPartition, Long> found = new HashMap<>();
                    admin.listOffsets(query, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all()
                            .get(15, TimeUnit.SECONDS).forEach((tp, info) -> found.put(tp, info.offset()));
                    ends = found;
                    for (PartitionProgress p : current) {
                        Long high = found.get(p.tp);
                        if (high != null && p.position != null) {
                            metrics.partition(p.tp.topic(), p.tp.partition(), p.position,
                                    p.endOffset == null ? high : Math.min(high, p.endOffset), null);
                        }
                    }
                } catch (Exception failed) {
                    LOG.debug("reading end offsets failed: {}", failed.toString());
                }
            }
        }

        /** The committed position of partitions that moved (at most every PROGRESS_INTERVAL s): advisory. */
        private void report(List<PartitionProgress> current) {
            if ((System.nanoTime() - lastReport) / 1e9 < PROGRESS_INTERVAL) {
                return;
            }
            lastReport = System.nanoTime();
            List<HandoverRecord> records = new ArrayList<>();
            for (PartitionProgress p : current) {
                Long committed = p.committed;
                if (committed == null) {
                    continue;
                }
                String now = committed + "/" + p.atEnd;
                if (!now.equals(reported.get(p.tp))) {
                    records.add(new HandoverRecord.Progress(settings.replayId(), p.tp.topic(), p.tp.partition(),
                            committed, p.atEnd, settings.memberName(), System.currentTimeMillis()));
                    reported.put(p.tp, now);
                }
            }
            if (records.isEmpty()) {
                return;
            }
            try {
                handover.publish(records);
            } catch (RuntimeException failed) {
                reported.clear(); // advisory: the next report says it again
                LOG.warn("publishing progress failed: {}", failed.toString());
            }
        }
    }

    // ------------------------------------------------------------------------------------------- waiting

    private void waitFor(double seconds) {
        long until = System.nanoTime() + (long) (seconds * 1e9);
        while (!stopRequested.get() && System.nanoTime() < until) {
            sleep(Math.min(200, Math.max(1, (until - System.nanoTime()) / 1_000_000)));
            metrics.beat();
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
