package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.FinishRule;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.function.BooleanSupplier;
import org.apache.kafka.common.TopicPartition;

/**
 * The replay side's bookkeeping, pure: per partition one replica of the replay group holds, what it has read,
 * processed and committed, and from that what to commit with which mark, when a partition finishes and with which
 * H, when a finished mark is committed again, which {@code progress} records to publish, and what a revoke drops.
 * {@link ReplayConsumer} is the I/O around it; conformance/REPLAY_TRACES.md gives every step's rules and
 * {@code replay_traces.json} holds them (the reference is {@code replay_worker/replay/replay_book.py}).
 *
 * <p>The loop and the check thread both use a book (the check thread for live offsets, the handover topic's view
 * and progress records), so every method is synchronized; nothing in it blocks.
 */
final class ReplayBook {

    /** Batches a forward may run ahead of its commit while its producer still sends. */
    static final int MAX_UNCOMMITTED_BATCHES = 2;

    private static final Comparator<TopicPartition> BY_PARTITION =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    /** A partition of the replay's plan (its {@code start} record): where it starts, and its end bound. */
    record Planned(long start, Long endOffset, Long endTimestampMs) {}

    /** What the consumer returned: a record, or an end-of-partition event (offset: after the last readable one). */
    interface Item {
        TopicPartition partition();

        long offset();

        /** The record's timestamp, or null (none, or an event). */
        Long timestampMs();

        boolean endOfPartition();
    }

    /** An end-of-partition event. */
    record End(TopicPartition partition, long offset) implements Item {
        @Override
        public Long timestampMs() {
            return null;
        }

        @Override
        public boolean endOfPartition() {
            return true;
        }
    }

    /** An offset to commit, with the {@code finished} mark it carries (or null). */
    record Offset(TopicPartition partition, long offset, CommitMark mark) {}

    /** A commit the book asks for; ids run 1, 2, ... in the order the book made them. */
    record Commit(int id, List<Offset> offsets, boolean sync) {}

    /** A {@code handover} record to publish: H of a finished partition and why it finished. */
    record Handover(TopicPartition partition, long offset, String reason) {}

    /** A {@code progress} record to publish. */
    record Progress(TopicPartition partition, long committed, boolean atEnd) {}

    /** What an assignment of one partition asks for: a start commit (sync), H published again, a pause. */
    record Assigned(Commit startCommit, Handover handover, boolean pause) {}

    /** Partitions that finish together: make {@code commit} (sync), then tell {@link #finished}. */
    record Finishing(Commit commit, Map<TopicPartition, String> reasons) {}

    /** The records of a turn to process, and those read but dropped. */
    record Taken<T extends Item>(List<T> records, List<T> dropped) {}

    /** This replica's view of one assigned partition. */
    static final class Part {
        final TopicPartition tp;
        Long position;
        Long committed;
        Long endOffset;
        Long endTimestampMs;
        String finished;
        boolean atEnd;
        Long endEvent;
        Long endMet;

        Part(TopicPartition tp) {
            this.tp = tp;
        }

        boolean bounded() {
            return endOffset != null || endTimestampMs != null;
        }
    }

    private final String replayId;
    private final String mode;
    private final Map<TopicPartition, Planned> plan;
    private final boolean follow;
    private final boolean transactional;
    private final Map<TopicPartition, Part> parts = new LinkedHashMap<>();
    private Map<TopicPartition, Long> live = Map.of();
    private Map<TopicPartition, Long> guards = Map.of();
    private Set<TopicPartition> published = Set.of();
    private final List<Item> inHand = new ArrayList<>();
    private int uncommittedBatches;
    private boolean commitFailed;
    private int asyncSent;
    private int asyncAnswered;
    private final Map<TopicPartition, Offset> reseal = new LinkedHashMap<>();
    private int resealAfter;
    private final Map<TopicPartition, Progress> reported = new HashMap<>();
    private int commitsMade;

    ReplayBook(String replayId, String mode, Map<TopicPartition, Planned> plan, boolean follow, boolean transactional) {
        this.replayId = replayId;
        this.mode = mode;
        this.plan = Map.copyOf(plan);
        this.follow = follow;
        this.transactional = transactional;
    }

    private Commit commit(Collection<Offset> offsets, boolean sync) {
        List<Offset> ordered = new ArrayList<>(offsets);
        ordered.sort(Comparator.comparing(Offset::partition, BY_PARTITION));
        return new Commit(++commitsMade, List.copyOf(ordered), sync);
    }

    // ------------------------------------------------------------------------------------------- assignment

    /** A rebalance gave this partition, with the group's committed offset (null: none) and its metadata. */
    synchronized Assigned assign(TopicPartition tp, Long committed, CommitMark mark) {
        Planned start = plan.get(tp);
        Part part = new Part(tp);
        parts.put(tp, part);
        if (start == null) {
            // Not in the replay's plan (e.g. a partition added after the start was resolved): the live group owns
            // it entirely; the replay never reads it.
            part.finished = "not-in-plan";
            return new Assigned(null, null, true);
        }
        Commit startCommit = null;
        if (committed == null) {
            // Planned, but the group's offset is gone (offsets of a long-empty group expire): resume at the
            // published start, the offset the bootstrap committed. Duplicates, never a loss.
            committed = start.start();
            startCommit = commit(List.of(new Offset(tp, committed, null)), true);
        }
        part.position = committed;
        part.committed = committed;
        part.endOffset = start.endOffset();
        part.endTimestampMs = start.endTimestampMs();
        if (mark != null && mark.finished() != null && replayId.equals(mark.replayId())) {
            part.finished = mark.finished();
            // The previous owner may have died between its commit and its publish: publish again (the same H under
            // the same key: idempotent).
            return new Assigned(startCommit, new Handover(tp, committed, mark.finished()), true);
        }
        return new Assigned(startCommit, null, false);
    }

    /**
     * Partitions taken away in a rebalance: the commit of their positions (sync; null: nothing to commit). They
     * are forgotten whatever its result; {@link #lost} then says what of the batch in hand is dropped.
     */
    synchronized Commit revoking(Collection<TopicPartition> revoked) {
        List<Offset> pending = new ArrayList<>();
        for (TopicPartition tp : revoked) {
            Part part = parts.get(tp);
            if (part != null && part.finished == null && part.position != null) {
                pending.add(new Offset(tp, part.position, null));
            }
        }
        // A finished mark still to be re-sealed goes with the revoke's commit: an asynchronous commit may have
        // erased it, and once the partition is gone no re-seal would come (the next owner would read on past H).
        for (TopicPartition tp : revoked) {
            Offset mark = reseal.remove(tp);
            if (mark != null) {
                pending.add(mark);
            }
        }
        return pending.isEmpty() ? null : commit(pending, true);
    }

    /**
     * Partitions gone (revoked after {@link #revoking}, or lost): forgotten; the records of the batch in hand that
     * are dropped (their positions were committed without them, and the next owner reads them again).
     */
    @SuppressWarnings("unchecked")
    synchronized <T extends Item> List<T> lost(Collection<TopicPartition> gone) {
        Set<TopicPartition> keys = new HashSet<>(gone);
        for (TopicPartition tp : keys) {
            parts.remove(tp);
            reported.remove(tp);
            reseal.remove(tp); // someone else's now: never re-sealed from here
        }
        List<T> dropped = new ArrayList<>();
        inHand.removeIf(item -> {
            if (!keys.contains(item.partition())) {
                return false;
            }
            if (!item.endOfPartition()) {
                dropped.add((T) item);
            }
            return true;
        });
        return dropped;
    }

    // ------------------------------------------------------------------------------------------- a turn

    /** What the consumer returned: into the batch in hand, taken at the end of the turn. */
    synchronized void read(Collection<? extends Item> items) {
        inHand.addAll(items);
    }

    /**
     * A partition's records of this turn taken as they come, when {@link #take} would take every one of them: the
     * partition is held, not finished, unbounded, and nothing is in hand. Then its position moves past the last,
     * and true; else false, and its records go through {@link #read} (the common batch skips an item per record).
     */
    synchronized boolean takeWhole(TopicPartition tp, long lastOffset) {
        Part part = parts.get(tp);
        if (!inHand.isEmpty() || part == null || part.finished != null || part.endMet != null || part.bounded()) {
            return false;
        }
        part.atEnd = false;
        part.position = lastOffset + 1;
        return true;
    }

    /**
     * The batch in hand, taken (then empty): the records to process, and those of partitions not held, finished or
     * past their end bound. An end-of-partition event marks its partition at its end until a later record.
     */
    @SuppressWarnings("unchecked")
    synchronized <T extends Item> Taken<T> take() {
        List<T> records = new ArrayList<>(inHand.size());
        List<T> dropped = new ArrayList<>();
        // Items come in runs per partition: the partition's state is looked up once per run.
        TopicPartition lastTp = null;
        Part part = null;
        for (Item item : inHand) {
            if (item.partition() != lastTp) {
                lastTp = item.partition();
                part = parts.get(lastTp);
            }
            if (item.endOfPartition()) {
                if (part != null && part.finished == null) {
                    part.atEnd = true;
                    part.endEvent = item.offset();
                }
                continue;
            }
            if (part == null || part.finished != null || part.endMet != null) {
                dropped.add((T) item);
                continue;
            }
            part.atEnd = false;
            if (part.bounded()
                    && FinishRule.recordEndsPartition(
                            part.endOffset, part.endTimestampMs, item.offset(), item.timestampMs())) {
                part.endMet = item.offset();
                dropped.add((T) item);
                continue;
            }
            part.position = item.offset() + 1;
            records.add((T) item);
        }
        inHand.clear();
        return new Taken<>(records, dropped);
    }

    /** Whether the turn delivers and checkpoints: records taken, or a partition at its end or its bound. */
    synchronized boolean anythingToDeliver(List<?> taken) {
        if (!taken.isEmpty()) {
            return true;
        }
        for (Part part : parts.values()) {
            if (part.atEnd || part.endMet != null) {
                return true;
            }
        }
        return false;
    }

    /**
     * After the delivery: a partition at its end bound moves to it; one at its end moves to the end event (past
     * trailing transaction markers no record reaches: committing it makes the replay group's lag zero).
     */
    synchronized void endPositions() {
        for (Part part : parts.values()) {
            if (part.endMet != null && part.finished == null) {
                part.position = part.position == null ? part.endMet : Math.max(part.position, part.endMet);
            } else if (part.atEnd && part.endEvent != null && part.position != null) {
                part.position = Math.max(part.position, part.endEvent);
            }
        }
    }

    /**
     * What to commit after a delivery: a commit; empty with {@code flush} true: make the delivery durable, nothing
     * to commit; empty and false: nothing now (a forward's batch waits for the next commit). {@code inFlight}: a
     * forward's producer still sends (asked only when it matters). {@code stop}: every position, synchronously.
     */
    synchronized Checkpoint checkpoint(BooleanSupplier inFlight, boolean stop) {
        List<Offset> moving = new ArrayList<>();
        for (Part part : parts.values()) {
            if (part.finished == null && part.position != null && (stop || !part.position.equals(part.committed))) {
                moving.add(new Offset(part.tp, part.position, null));
            }
        }
        if (!stop && !moving.isEmpty() && uncommittedBatches + 1 < MAX_UNCOMMITTED_BATCHES && inFlight.getAsBoolean()) {
            uncommittedBatches++;
            return new Checkpoint(null, false);
        }
        if (moving.isEmpty()) {
            return new Checkpoint(null, true);
        }
        // At most one commit on its way: if the previous one has not come back (a broker going away, a coordinator
        // moving), this one waits. A transaction commits the offsets itself: no answer ever comes.
        boolean async = !stop && !transactional && asyncSent == asyncAnswered && !commitFailed;
        commitFailed = false;
        if (async) {
            asyncSent++;
        }
        return new Checkpoint(commit(moving, !async), false);
    }

    /** {@link #checkpoint}'s answer: a commit to make, or none and whether to flush. */
    record Checkpoint(Commit commit, boolean flush) {}

    /**
     * A commit was made (asynchronous: sent; its answer goes to {@link #answered}); not {@code ok}: the group refused
     * a synchronous one (no longer a member). Every commit but an assignment's start commit comes here.
     */
    synchronized void committed(Commit commit, boolean ok) {
        if (!ok) {
            return;
        }
        uncommittedBatches = 0;
        for (Offset offset : commit.offsets()) {
            Part part = parts.get(offset.partition());
            if (part != null) {
                part.committed = offset.offset();
            }
        }
    }

    /** The answer to an asynchronous commit; {@code failed}: its partitions that failed (empty: it landed). */
    synchronized void answered(Collection<TopicPartition> failed) {
        asyncAnswered++;
        if (failed.isEmpty()) {
            return;
        }
        commitFailed = true;
        for (TopicPartition tp : failed) {
            Part part = parts.get(tp);
            if (part != null && part.finished == null) {
                part.committed = null;
            }
        }
    }

    /**
     * The partitions that finish now, with their finishing commit (sync, with the {@code finished} mark), or null.
     * Decided on what the batch held (its end-of-partition event) and the live offsets last known, never on an end
     * offset read after the handler ran: that moves on under steady traffic (HANDOVER.md section 5).
     */
    synchronized Finishing decide() {
        if (follow) {
            return null; // a shadow hold: the operator stops the workers at the cutover; no partition finishes
        }
        Map<TopicPartition, String> reasons = new LinkedHashMap<>();
        List<Offset> offsets = new ArrayList<>();
        for (Part part : parts.values()) {
            if (part.finished != null || part.position == null) {
                continue;
            }
            String reason;
            if (part.endMet != null) {
                reason = FinishRule.END_BOUND;
            } else {
                Long liveAt = live.get(part.tp);
                Long guard = guards.get(part.tp);
                if (guard != null) {
                    liveAt = Math.max(liveAt == null ? 0 : liveAt, guard);
                }
                Optional<String> decided =
                        FinishRule.decide(mode, part.position, part.endOffset, part.endTimestampMs, part.atEnd, liveAt);
                if (decided.isEmpty()) {
                    continue;
                }
                reason = decided.get();
            }
            reasons.put(part.tp, reason);
            offsets.add(new Offset(part.tp, part.position, CommitMark.finished(replayId, reason)));
        }
        return reasons.isEmpty() ? null : new Finishing(commit(offsets, true), reasons);
    }

    /**
     * The finishing commit's result (after {@link #committed}): ok, the partitions are finished: the H to publish,
     * then pause them. Not ok (no longer a member): nothing; whoever gets the partitions decides again.
     */
    synchronized List<Handover> finished(Finishing finishing, boolean ok) {
        if (!ok) {
            return List.of();
        }
        if (asyncSent != asyncAnswered) {
            // An asynchronous commit of the same positions, without the mark, is still on its way; the client
            // retries it across a broker restart, so it may land after this commit and erase the mark.
            for (Offset offset : finishing.commit().offsets()) {
                reseal.put(offset.partition(), offset);
            }
            resealAfter = asyncSent;
        }
        List<Handover> handovers = new ArrayList<>();
        finishing.reasons().forEach((tp, reason) -> {
            Part part = parts.get(tp);
            part.finished = reason;
            handovers.add(new Handover(tp, part.position, reason));
        });
        handovers.sort(Comparator.comparing(Handover::partition, BY_PARTITION));
        return handovers;
    }

    /** The finished marks to commit again (sync), once every asynchronous commit sent before them is answered. */
    synchronized Commit resealing() {
        if (reseal.isEmpty() || asyncAnswered < resealAfter) {
            return null;
        }
        List<Offset> again = new ArrayList<>();
        reseal.forEach((tp, offset) -> {
            if (parts.containsKey(tp)) {
                again.add(offset);
            }
        });
        reseal.clear();
        return again.isEmpty() ? null : commit(again, true);
    }

    /** Every planned partition is finished: here, or as the handover topic says. */
    synchronized boolean done() {
        if (plan.isEmpty()) {
            return false;
        }
        for (TopicPartition tp : plan.keySet()) {
            Part part = parts.get(tp);
            if (!published.contains(tp) && (part == null || part.finished == null)) {
                return false;
            }
        }
        return true;
    }

    // ------------------------------------------------------------------------------------------- what others say

    /** The live group's committed offsets, as last read. */
    synchronized void live(Map<TopicPartition, Long> offsets) {
        live = Map.copyOf(offsets);
    }

    /** The handover topic's view of this replay: H published (by any replica) and the guards' seen-until. */
    synchronized void view(Set<TopicPartition> handedOver, Map<TopicPartition, Long> guardPositions) {
        published = Set.copyOf(handedOver);
        guards = Map.copyOf(guardPositions);
    }

    // ------------------------------------------------------------------------------------------- progress

    /** Partitions whose committed position (or being at the end) changed since the last report. */
    synchronized List<Progress> progress() {
        List<Progress> records = new ArrayList<>();
        for (Part part : parts.values()) {
            if (part.committed == null) {
                continue;
            }
            Progress now = new Progress(part.tp, part.committed, part.atEnd);
            if (!Objects.equals(reported.get(part.tp), now)) {
                records.add(now);
                reported.put(part.tp, now);
            }
        }
        records.sort(Comparator.comparing(Progress::partition, BY_PARTITION));
        return records;
    }

    /** Publishing them failed: the next report says everything again. */
    synchronized void progressFailed() {
        reported.clear();
    }

    // ------------------------------------------------------------------------------------------- for metrics

    /** A partition's position and committed offset, for metrics and logs (null: not held). */
    synchronized Long position(TopicPartition tp) {
        Part part = parts.get(tp);
        return part == null ? null : part.position;
    }

    /** A held partition's end offset bound (null: none, or not held). */
    synchronized Long endOffset(TopicPartition tp) {
        Part part = parts.get(tp);
        return part == null ? null : part.endOffset;
    }

    /** The partitions held, with their positions (null: unknown), for the lag metrics. */
    synchronized Map<TopicPartition, Long> positions() {
        Map<TopicPartition, Long> out = new LinkedHashMap<>();
        parts.forEach((tp, part) -> out.put(tp, part.position));
        return out;
    }

    synchronized int held() {
        return parts.size();
    }
}
