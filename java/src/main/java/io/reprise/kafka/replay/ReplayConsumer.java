package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.CommitMetadata;
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
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.record.TimestampType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One replica of the replay group: the I/O around its {@link ReplayBook}, which decides what to commit with which
 * mark, when a partition finishes, what to commit again and which progress records to publish (HANDOVER.md section
 * 5, conformance/REPLAY_TRACES.md). This loop polls, hands the batch to the service's handler, commits, publishes H
 * and pauses as the book says, and tells the book what happened.
 *
 * <ul>
 *   <li>The start was recorded as the replay group's committed offsets by the bootstrap, so an assignment never
 *       seeks: every replica and every restart resumes from committed offsets, and a rebalance cannot replay
 *       anything twice (seed 003's trap).</li>
 *   <li>Auto commit is off; the handler is synchronous, so a batch is durable once it returned (and the dead
 *       letters are flushed).</li>
 *   <li>The end of a partition is the end its last fetch reached, as the poll left it (lag 0 to the last stable
 *       offset): the Java client's end-of-partition event. Nothing read after the handler decides a finish, so a
 *       slow handler under steady traffic still finishes {@code end-of-partition} (issue 32).</li>
 *   <li>The slow checks (the live group's offsets, end offsets for metrics, progress records) run in a thread of
 *       their own with clients of their own: the consumer is only touched by the loop.</li>
 * </ul>
 */
final class ReplayConsumer<K, V> implements ConsumerRebalanceListener {

    private static final Logger LOG = LoggerFactory.getLogger(ReplayConsumer.class);

    /** How long a poll waits when nothing is there. */
    static final Duration POLL_WAIT = Duration.ofMillis(200);
    /** How long a stop waits for the consumer to leave the group (inside Kubernetes' 30 s grace period). */
    static final Duration CLOSE_WAIT = Duration.ofSeconds(15);

    private final ReplaySettings settings;
    private final KafkaClientConfig clients;
    private final HandlerDelivery<K, V> delivery;
    private final DeadLetters deadLetters;
    private final ReplayMetrics metrics;
    private final ReplayBook book;
    private final int planned;
    private final HandoverTopic handover;
    private final Throttle throttle;
    private final Supplier<Boolean> stopRequested;

    private final KafkaConsumer<byte[], byte[]> consumer;
    private volatile boolean ready;
    private boolean reading;
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
    ReplayConsumer(
            ReplaySettings settings,
            KafkaClientConfig clients,
            HandlerDelivery<K, V> delivery,
            DeadLetters deadLetters,
            ReplayMetrics metrics,
            ReplayHandover state,
            HandoverTopic handover,
            KafkaConsumer<byte[], byte[]> consumer,
            HandoverFollower<ReplayFacts> follower,
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
        Map<TopicPartition, ReplayBook.Planned> plan = new HashMap<>();
        for (PartitionHandover p : state.planned()) {
            plan.put(
                    new TopicPartition(p.topic, p.partition),
                    new ReplayBook.Planned(p.start.offset(), p.start.endOffset(), p.start.endTimestampMs()));
        }
        this.planned = plan.size();
        // The Java role hands records to a synchronous handler: no forward in flight, no transaction.
        this.book = new ReplayBook(settings.replayId(), settings.mode(), plan, false, false);
    }

    /** The replay group's consumer of a replica: the bootstrap asks it its questions before it subscribes. */
    static KafkaConsumer<byte[], byte[]> newConsumer(ReplaySettings settings, KafkaClientConfig clients) {
        return new KafkaConsumer<>(clients.replayConsumer(
                settings.replayGroup(), "reprise-" + settings.memberName(), settings.batchSize()));
    }

    /** The tail of the handover topic a replica keeps; the bootstrap reads with it before it is started. */
    static HandoverFollower<ReplayFacts> newFollower(ReplaySettings settings, KafkaClientConfig clients) {
        return new HandoverFollower<>(
                clients.connection(),
                settings.handoverTopic(),
                ReplayFacts.of(settings.replayId()),
                Duration.ofMillis(200),
                () -> {},
                "reprise-" + settings.memberName() + "-follower");
    }

    boolean ready() {
        return ready;
    }

    /** Runs until a stop is requested or, with {@code exitWhenDone}, every partition of the replay is finished. */
    void run() {
        follower.start();
        ReplayChecks checks = new ReplayChecks(settings, clients, metrics, book, handover);
        Thread checker = new Thread(checks, "reprise-replay-checks");
        checker.setDaemon(true);
        try {
            consumer.subscribe(settings.topics(), this);
            checker.start();
            ready = true;
            LOG.info(
                    "replay consumer started: mode {}, topics {}, replay group {}, {} partitions planned",
                    settings.mode(),
                    settings.topics(),
                    settings.replayGroup(),
                    planned);
            while (!stopRequested.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL_WAIT);
                metrics.beat();
                process(records);
                decide();
                if (settings.exitWhenDone() && book.done()) {
                    LOG.info("every partition of the replay is finished; exiting");
                    break;
                }
            }
            // A stop: the positions are committed before the consumer leaves.
            ReplayBook.Checkpoint last = book.checkpoint(() -> false, true);
            deadLetters.makeDurable();
            if (last.commit() != null) {
                commit(last.commit());
            }
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

    // ------------------------------------------------------------------------------------------- a turn

    /** A record as the book sees it. */
    record Read(TopicPartition partition, ConsumerRecord<byte[], byte[]> record) implements ReplayBook.Item {
        @Override
        public long offset() {
            return record.offset();
        }

        @Override
        public Long timestampMs() {
            return record.timestampType() == TimestampType.NO_TIMESTAMP_TYPE ? null : record.timestamp();
        }

        @Override
        public boolean endOfPartition() {
            return false;
        }
    }

    /**
     * One turn: the poll's records into the book (a partition taken whole when the book takes all of its records,
     * else record by record), then an end-of-partition event for each partition whose last fetch reached its end
     * (lag 0 to the last stable offset, as the poll left it; the position is past any trailing transaction
     * markers). That is the end as the batch held it (HANDOVER.md section 5.5): records appended while the handler
     * runs are after it and belong to the live group, so nothing read after the handler decides a finish. Then
     * the handler, and the commit the book asks for.
     */
    private void process(ConsumerRecords<byte[], byte[]> records) {
        List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(records.count());
        List<ReplayBook.Item> items = new ArrayList<>();
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<byte[], byte[]>> run = records.records(tp);
            if (book.takeWhole(tp, run.get(run.size() - 1).offset())) {
                batch.addAll(run);
            } else {
                for (ConsumerRecord<byte[], byte[]> record : run) {
                    items.add(new Read(tp, record));
                }
            }
        }
        for (TopicPartition tp : consumer.assignment()) {
            OptionalLong lag = consumer.currentLag(tp);
            if (lag.isPresent() && lag.getAsLong() == 0) {
                items.add(new ReplayBook.End(tp, consumer.position(tp)));
            }
        }
        book.read(items);
        ReplayBook.Taken<Read> taken = book.take();
        for (Read read : taken.records()) {
            batch.add(read.record());
        }
        if (!book.anythingToDeliver(batch)) {
            return;
        }
        long size = 0;
        for (ConsumerRecord<byte[], byte[]> record : batch) {
            size += Math.max(0, record.serializedValueSize()) + Math.max(0, record.serializedKeySize());
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
        book.endPositions();
        // The handler has returned (it is synchronous): a dead letter is the one thing still on its way.
        ReplayBook.Checkpoint checkpoint = book.checkpoint(() -> false, false);
        deadLetters.makeDurable();
        if (checkpoint.commit() != null) {
            commit(checkpoint.commit());
        }
    }

    /**
     * Makes a commit the book asked for and tells it the result; a synchronous one is retried while Kafka is briefly
     * unavailable. False when this replica is no longer a member (the rebalance that follows takes the partitions
     * away).
     */
    private boolean commit(ReplayBook.Commit commit) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (ReplayBook.Offset o : commit.offsets()) {
            offsets.put(
                    o.partition(),
                    o.mark() == null
                            ? new OffsetAndMetadata(o.offset())
                            : new OffsetAndMetadata(o.offset(), CommitMetadata.store(o.mark())));
        }
        if (!commit.sync()) {
            consumer.commitAsync(offsets, (committed, error) -> {
                // Called on the loop's thread (inside a later poll or commit).
                if (error != null) {
                    metrics.errors.inc(1);
                    LOG.warn("a commit failed; it is made again with the next batch: {}", error.toString());
                }
                book.answered(error == null ? List.of() : offsets.keySet());
            });
        } else if (!commitSync(offsets)) {
            book.committed(commit, false);
            return false;
        }
        book.committed(commit, true);
        metrics.commits.inc(1);
        offsets.forEach((tp, om) -> metrics.partition(tp.topic(), tp.partition(), om.offset(), null, null));
        return true;
    }

    private boolean commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                consumer.commitSync(offsets, Duration.ofSeconds(15));
                return true;
            } catch (RebalanceInProgressException rebalancing) {
                // Cooperative rebalancing: the commit can only go through after the next poll completes the
                // rebalance. Not committed now; the positions are committed again after that poll.
                LOG.info("commit deferred until the rebalance under way completes");
                return false;
            } catch (CommitFailedException | FencedInstanceIdException notMember) {
                LOG.warn(
                        "commit refused: no longer a member; the partitions move to another replica: {}",
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

    // ------------------------------------------------------------------------------------------- finishing

    /**
     * Commits the stop offsets of the partitions that finish with {@code finished} marks, then publishes them as H,
     * then stops reading them; partitions that finish together share one commit and one publish. Then the marks an
     * asynchronous commit may have erased are committed again.
     */
    private void decide() {
        ReplayFacts facts = follower.snapshot();
        book.view(facts.handedOver(), facts.guardPositions());
        ReplayBook.Finishing finishing = book.decide();
        if (finishing != null) {
            boolean ok = commit(finishing.commit());
            List<ReplayBook.Handover> handovers = book.finished(finishing, ok);
            if (!handovers.isEmpty()) {
                List<HandoverRecord> records = new ArrayList<>();
                for (ReplayBook.Handover h : handovers) {
                    records.add(new HandoverRecord.Handover(
                            settings.replayId(),
                            h.partition().topic(),
                            h.partition().partition(),
                            h.offset(),
                            h.reason(),
                            settings.memberName(),
                            System.currentTimeMillis()));
                }
                publishHandover(records);
                for (ReplayBook.Handover h : handovers) {
                    consumer.pause(List.of(h.partition()));
                    metrics.partition(h.partition().topic(), h.partition().partition(), h.offset(), null, "finished");
                    metrics.finishedPartitions.incrementAndGet();
                    LOG.info(
                            "partition {} finished: handover offset {}, reason {}",
                            h.partition(),
                            h.offset(),
                            h.reason());
                }
            }
        }
        ReplayBook.Commit reseal = book.resealing();
        if (reseal != null) {
            commit(reseal);
        }
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
            OffsetAndMetadata found = committed.get(tp);
            ReplayBook.Assigned assigned = book.assign(
                    tp,
                    found == null ? null : found.offset(),
                    found == null ? null : FinishMark.decode(found.metadata()));
            if (assigned.startCommit() != null) {
                // The group's offset is gone (offsets of a long-empty group expire): the published start again.
                long start = assigned.startCommit().offsets().get(0).offset();
                consumer.commitSync(Map.of(tp, new OffsetAndMetadata(start)));
                consumer.seek(tp, start);
                LOG.warn("planned partition {} had no committed offset; committed its published start {}", tp, start);
            }
            if (assigned.pause()) {
                toPause.add(tp);
            }
            ReplayBook.Handover h = assigned.handover();
            if (h != null) {
                finishedHere.add(tp);
                publishHandover(List.of(new HandoverRecord.Handover(
                        settings.replayId(),
                        tp.topic(),
                        tp.partition(),
                        h.offset(),
                        h.reason(),
                        settings.memberName(),
                        System.currentTimeMillis())));
                metrics.partition(tp.topic(), tp.partition(), h.offset(), null, "finished");
            } else if (!assigned.pause()) {
                metrics.partition(tp.topic(), tp.partition(), book.position(tp), null, "replaying");
            }
        }
        if (!toPause.isEmpty()) {
            consumer.pause(toPause);
        }
        metrics.assignedPartitions.set(book.held());
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
        ReplayBook.Commit pending = book.revoking(partitions);
        if (pending != null) {
            try {
                commit(pending);
            } catch (KafkaException failed) {
                LOG.warn("commit on revoke failed: {}", failed.toString());
            }
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
        // The batch in hand is empty between turns here: a poll's batch is processed in the turn it was read.
        book.lost(partitions);
        for (TopicPartition tp : partitions) {
            metrics.forget(tp.topic(), tp.partition());
        }
        metrics.assignedPartitions.set(book.held());
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
