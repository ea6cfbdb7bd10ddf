package io.reprise.kafka.guard;

import io.reprise.kafka.protocol.ActiveHandover;
import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.GuardPartition;
import io.reprise.kafka.protocol.Verdict;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Headers;

/**
 * The guard's bookkeeping, pure: per assigned partition, the protocol rules ({@link GuardPartition}) plus what
 * the service was handed and has committed, and from that what the guard commits, with which mark. The port of
 * the reference's {@code replay_worker/guard/guard_book.py}; {@link GuardedConsumer} is the thin I/O around it.
 *
 * <ul>
 * <li>A partition is held from its assignment until the handover view is current ({@code ticket}), then
 * released.</li>
 * <li>A Java consumer commits, without explicit offsets, the position after the last record returned by
 * {@code poll}: every handed record counts as stored ({@code autoStore}), and skipped ones too.</li>
 * <li>Skipped records at the tail of a batch are committed, with the mark that says they were skipped, by the
 * guard itself ({@link #takeGuardCommits}), because a service that commits the records it processed (Spring
 * Kafka's container does) would never commit them.</li>
 * <li>After a seek back, the re-read's progress is below what was committed; every commit is sent explicitly.</li>
 * <li>A quiet partition past H gets the floor commit ({@link #floorCommits}) so that it can be acknowledged.</li>
 * </ul>
 */
public final class GuardBook {

    /** One assigned partition. */
    public static final class PartitionBook {
        public final GuardPartition rules;
        /** Sync ticket the handover view must reach before the partition is released; null once released. */
        Long ticket;
        /** Offset after the last record handed to the service. */
        Long handedUntil;
        /** Highest offset stored or committed for this partition (by the service or the guard). */
        Long storedUntil;
        /** A store the guard commits itself (a skipped tail, or one below what was committed). */
        Store guardCommit;
        /** The highest offset committed or stored in this session (at first the committed one). */
        Long highWater;

        Long reportedSeen;
        GuardPartition.Problem reportedProblem;

        PartitionBook(GuardPartition rules) {
            this.rules = rules;
        }

        public boolean held() {
            return ticket != null;
        }

        public Long ticket() {
            return ticket;
        }

        public Long storedUntil() {
            return storedUntil;
        }

        public Long handedUntil() {
            return handedUntil;
        }
    }

    private final boolean autoStore;
    private final Map<TopicPartition, PartitionBook> parts = new LinkedHashMap<>();

    public GuardBook(boolean autoStore) {
        this.autoStore = autoStore;
    }

    public GuardBook() {
        this(true);
    }

    public Map<TopicPartition, PartitionBook> parts() {
        return parts;
    }

    public PartitionBook part(TopicPartition tp) {
        return parts.get(tp);
    }

    // -- assignment

    public void assign(TopicPartition tp, Long committed, CommitMark mark, long ticket) {
        GuardPartition rules = new GuardPartition(tp.topic(), tp.partition());
        rules.restore(committed, mark);
        PartitionBook part = new PartitionBook(rules);
        part.ticket = ticket;
        part.storedUntil = committed;
        part.highWater = committed;
        parts.put(tp, part);
    }

    public void drop(TopicPartition tp) {
        parts.remove(tp);
    }

    /** The view is current for this partition: apply it; returns an offset to seek to, or null. */
    public Long release(TopicPartition tp, ActiveHandover active) {
        PartitionBook part = parts.get(tp);
        part.ticket = null;
        return update(part, active);
    }

    /** The view changed: apply it to every released partition; returns the seeks to do. */
    public Map<TopicPartition, Long> apply(Map<TopicPartition, ActiveHandover> snapshot) {
        Map<TopicPartition, Long> seeks = new HashMap<>();
        for (Map.Entry<TopicPartition, PartitionBook> e : parts.entrySet()) {
            if (e.getValue().ticket == null) {
                Long target = update(e.getValue(), snapshot.get(e.getKey()));
                if (target != null) {
                    seeks.put(e.getKey(), target);
                }
            }
        }
        return seeks;
    }

    private static Long update(PartitionBook part, ActiveHandover active) {
        Long target = part.rules.update(active);
        if (target != null) {
            // Reading again from `target`: what is stored from now on starts there and carries the re-read mark.
            // (The offset committed so far stays valid: its skip mark leads a new owner to the same re-read.)
            part.storedUntil = target;
            part.handedUntil = null;
            part.guardCommit = null;
        }
        return target;
    }

    /** Some partition needs per-record decisions (else the batch is handed as it is). */
    public boolean guarded() {
        for (PartitionBook p : parts.values()) {
            if (p.ticket != null || p.rules.guarded()) {
                return true;
            }
        }
        return false;
    }

    // -- per batch

    /** True when the record goes to the service. */
    public boolean judge(TopicPartition tp, long offset, byte[] key, Headers headers, byte[] value) {
        PartitionBook part = parts.get(tp);
        if (part.rules.verdict(offset, key, headers, value) == Verdict.PROCESS) {
            part.handedUntil = offset + 1;
            return true;
        }
        return false;
    }

    /**
     * No replay active: every record was handed. {@code positions} are the offsets after the last record returned,
     * per partition; returns what is stored (with automatic storing, the positions that moved).
     */
    public List<Store> handedUnguarded(Map<TopicPartition, Long> positions) {
        List<Store> stores = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> e : positions.entrySet()) {
            PartitionBook part = parts.get(e.getKey());
            long position = e.getValue();
            if (part == null || position < 0 || Long.valueOf(position).equals(part.handedUntil)) {
                continue;
            }
            part.handedUntil = position;
            part.rules.seenUntil(position);
            if (autoStore) {
                part.storedUntil = position;
                stores.add(new Store(e.getKey(), position, null));
            }
        }
        return stores;
    }

    /** What to store for a partition the batch touched (null: nothing). */
    public Store afterBatch(TopicPartition tp) {
        PartitionBook part = parts.get(tp);
        GuardPartition rules = part.rules;
        Long seen = rules.seenUntil();
        if (autoStore && part.handedUntil != null) {
            part.storedUntil = Math.max(orZero(part.storedUntil), part.handedUntil);
        }
        boolean everythingStored = part.handedUntil == null || orZero(part.storedUntil) >= part.handedUntil;
        Long target = part.storedUntil;
        boolean tail = false;
        if (everythingStored && seen != null && (target == null || seen > target)) {
            target = seen;
            tail = true;
        }
        if (target == null || (!autoStore && !tail)) {
            return null;
        }
        CommitMark mark = rules.commitMark(target);
        Store store = new Store(tp, target, mark == null ? null : mark.encode());
        note(part, store, tail);
        part.storedUntil = target;
        return store;
    }

    /** Record a store; make it a guard commit when the service's commit would not carry it. */
    private static void note(PartitionBook part, Store store, boolean tail) {
        boolean below = part.highWater != null && store.offset() <= part.highWater;
        part.guardCommit = tail || below ? store : null;
        part.highWater = part.highWater == null ? store.offset() : Math.max(part.highWater, store.offset());
    }

    // -- the service commits

    /** An offset the service commits, with the guard's mark attached (its own metadata kept when no mark applies). */
    public Store serviceStore(TopicPartition tp, long offset, String metadata) {
        PartitionBook part = parts.get(tp);
        if (part == null || offset < 0) {
            return new Store(tp, offset, metadata);
        }
        CommitMark mark = part.rules.commitMark(offset);
        part.storedUntil = Math.max(orZero(part.storedUntil), offset);
        Store store = new Store(tp, offset, mark != null ? mark.encode() : metadata);
        note(part, store, false);
        return store;
    }

    /**
     * What a commit without explicit offsets commits: every released partition's stored offset with its mark,
     * explicitly (a held partition's committed offset and mark stay as they are).
     */
    public List<Store> storedOffsets() {
        List<Store> stores = new ArrayList<>();
        for (Map.Entry<TopicPartition, PartitionBook> e : parts.entrySet()) {
            PartitionBook part = e.getValue();
            if (part.storedUntil == null || part.ticket != null) {
                continue;
            }
            CommitMark mark = part.rules.commitMark(part.storedUntil);
            stores.add(new Store(e.getKey(), part.storedUntil, mark == null ? null : mark.encode()));
            part.guardCommit = null;
            part.highWater = Math.max(orZero(part.highWater), part.storedUntil);
        }
        return stores;
    }

    /**
     * The service moved a partition's position (a seek, e.g. an error handler delivering a record again): what
     * was handed from there on is not done, so nothing past it may be committed on the service's behalf.
     */
    public void serviceSeek(TopicPartition tp, long offset) {
        PartitionBook part = parts.get(tp);
        if (part == null || offset < 0) {
            return;
        }
        part.rules.seenUntil(offset);
        if (part.handedUntil != null && part.handedUntil > offset) {
            part.handedUntil = offset;
        }
        part.storedUntil = part.storedUntil == null ? offset : Math.min(part.storedUntil, offset);
        part.guardCommit = null;
    }

    // -- periodic

    /**
     * Stores the guard commits itself. By calling poll again the service is done with what it was handed before
     * (the assumption a consumer's commit of its position makes).
     */
    public List<Store> takeGuardCommits() {
        List<Store> commits = new ArrayList<>();
        for (PartitionBook part : parts.values()) {
            if (part.guardCommit != null) {
                commits.add(part.guardCommit);
                part.guardCommit = null;
            }
        }
        return commits;
    }

    /**
     * Partitions past H whose committed offset may still be below H (quiet ones): commit the position. Call
     * {@link #floorDone} for each once the commit succeeded.
     */
    public List<Store> floorCommits(Function<TopicPartition, Long> positionOf) {
        List<Store> result = new ArrayList<>();
        for (Map.Entry<TopicPartition, PartitionBook> e : parts.entrySet()) {
            PartitionBook part = e.getValue();
            if (part.ticket != null || part.rules.handover() == null || part.rules.floorCommitted()) {
                continue;
            }
            if (part.handedUntil != null && orZero(part.storedUntil) < part.handedUntil) {
                continue; // the service still works on records it was handed
            }
            Long position = part.rules.seenUntil();
            if (position == null) {
                position = positionOf.apply(e.getKey());
            }
            Long target = part.rules.floorCommit(position);
            if (target != null) {
                result.add(new Store(e.getKey(), target, null));
            }
        }
        return result;
    }

    public void floorDone(Store store) {
        PartitionBook part = parts.get(store.partition());
        if (part != null) {
            part.storedUntil = Math.max(orZero(part.storedUntil), store.offset());
            part.highWater = Math.max(orZero(part.highWater), store.offset());
            part.rules.markFloorCommitted();
        }
    }

    /** Partitions being skipped whose seen-until moved since the last report. */
    public List<SkipReport> skipReports() {
        List<SkipReport> reports = new ArrayList<>();
        for (Map.Entry<TopicPartition, PartitionBook> e : parts.entrySet()) {
            PartitionBook part = e.getValue();
            GuardPartition rules = part.rules;
            if (part.ticket == null
                    && rules.handover() == null
                    && rules.firstSkipped() != null
                    && rules.replayId() != null
                    && rules.seenUntil() != null
                    && !rules.seenUntil().equals(part.reportedSeen)) {
                reports.add(new SkipReport(rules.replayId(), e.getKey(), rules.firstSkipped(), rules.seenUntil()));
                part.reportedSeen = rules.seenUntil();
            }
        }
        return reports;
    }

    /** What a {@code guard} record with {@code problem} says: the guard cannot follow a replay on a partition and
     * skips nothing for it (HANDOVER.md section 6, Bad input). */
    public record ProblemReport(
            String replayId, TopicPartition partition, String problem, Long firstSkipped, Long seenUntil) {}

    /** Released partitions whose problem appeared or changed since the last report (each reported once). */
    public List<ProblemReport> problemReports() {
        List<ProblemReport> reports = new ArrayList<>();
        for (Map.Entry<TopicPartition, PartitionBook> e : parts.entrySet()) {
            PartitionBook part = e.getValue();
            GuardPartition.Problem problem = part.rules.problem();
            if (part.ticket != null || java.util.Objects.equals(problem, part.reportedProblem)) {
                continue;
            }
            part.reportedProblem = problem;
            if (problem != null) {
                reports.add(new ProblemReport(
                        problem.replayId(),
                        e.getKey(),
                        problem.problem(),
                        part.rules.firstSkipped(),
                        part.rules.seenUntil()));
            }
        }
        return reports;
    }

    /** A replay and its H, to acknowledge once the live group committed past H. */
    public record PendingAck(String replayId, long handover) {}

    /** Partitions whose handover offset is known: the replay and H to acknowledge. */
    public Map<TopicPartition, PendingAck> pendingAcks() {
        Map<TopicPartition, PendingAck> out = new HashMap<>();
        for (Map.Entry<TopicPartition, PartitionBook> e : parts.entrySet()) {
            PartitionBook part = e.getValue();
            if (part.ticket == null && part.rules.pendingAck()) {
                out.put(e.getKey(), new PendingAck(part.rules.replayId(), part.rules.handover()));
            }
        }
        return out;
    }

    private static long orZero(Long value) {
        return value == null ? 0 : value;
    }
}
