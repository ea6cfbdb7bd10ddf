package io.reprise.kafka.protocol;

import org.apache.kafka.common.header.Headers;

/**
 * The guard's state for one assigned partition of the live group, and its rules (HANDOVER.md section 6).
 *
 * <p>Per record offset o, with an active Handover-mode replay covering the partition: o &lt; S: process (the
 * replay does not cover it); H unknown, o &gt;= S, the record matches the replay's filter: skip (F = first such
 * o); H known, S &lt;= o &lt; H, matching: skip (the replay processed it); otherwise process. When H becomes known
 * and matching records at or past H were skipped (U &gt; max(H, F)), seek back to max(H, F) and re-read up to U:
 * there, matching records are processed and non-matching ones skipped (they were processed the first time).
 *
 * <p>Pure: the guard feeds it the records, the replay's state and the committed offset; it answers verdicts,
 * seeks and commit marks.
 */
public final class GuardPartition {
    public final String topic;
    public final int partition;

    String replayId;
    Long start;
    Long handover;
    RecordFilter matcher;
    Long firstSkipped;
    Long seenUntil;
    Long rereadUntil;
    String rereadReplay;
    RecordFilter rereadMatcher;
    /** Set once the guard committed the handover offset itself (a quiet partition). */
    boolean floorCommitted;

    long skipped;
    /** The replay the handover view reports this partition's problem for, and the problem: the guard follows no
     * replay here. */
    Problem viewProblem;
    /** The commit mark found at assignment, when it could not be used. */
    Problem markProblem;
    /**
     * The committed mark could not be read: the previous owner may have skipped any covered record below the
     * committed offset, so the first replay adopted counts as skipped from its start (F := S).
     */
    boolean unknownSkips;

    /** A replay this guard cannot follow on a partition, and why ({@code <what>:<code>}). */
    public record Problem(String replayId, String problem) {}

    public GuardPartition(String topic, int partition) {
        this.topic = topic;
        this.partition = partition;
    }

    // -- what the guard and its tests read

    public String replayId() {
        return replayId;
    }

    public Long start() {
        return start;
    }

    public Long handover() {
        return handover;
    }

    public Long firstSkipped() {
        return firstSkipped;
    }

    public Long seenUntil() {
        return seenUntil;
    }

    public Long rereadUntil() {
        return rereadUntil;
    }

    public String rereadReplay() {
        return rereadReplay;
    }

    public boolean floorCommitted() {
        return floorCommitted;
    }

    public long skipped() {
        return skipped;
    }

    /** The replay and problem to report for this partition (it skips nothing for that replay), or null. */
    public Problem problem() {
        return viewProblem != null ? viewProblem : markProblem;
    }

    public void seenUntil(Long offset) {
        seenUntil = offset;
    }

    public void markFloorCommitted() {
        floorCommitted = true;
    }

    // -- assignment

    /** Resume from the live group's committed offset and the mark the previous owner left on it. */
    public void restore(Long committed, CommitMark mark) {
        if (committed != null && committed >= 0) {
            seenUntil = committed;
        }
        if (mark == null) {
            return;
        }
        if (!mark.usable()) {
            // A newer (or broken) guard wrote it: what it skipped below C is unknown. Assume the worst that the
            // replay can cover (everything from S), so that H brings a re-read instead of a loss.
            markProblem = new Problem(mark.replayId(), "unusable-commit-mark:" + mark.problem());
            unknownSkips = committed != null && committed > 0;
            return;
        }
        if (mark.skipFrom() != null && committed != null && committed > mark.skipFrom()) {
            replayId = mark.replayId();
            firstSkipped = mark.skipFrom();
        }
        if (mark.rereadUntil() != null && committed != null && committed < mark.rereadUntil()) {
            rereadUntil = mark.rereadUntil();
            rereadReplay = mark.replayId();
        }
    }

    // -- the replay's state changed (or was first learned)

    /** Applies what the handover topic now says; returns an offset to seek back to, or null. */
    public Long update(ActiveHandover active) {
        viewProblem =
                active != null && active.problem() != null ? new Problem(active.replayId(), active.problem()) : null;
        if (viewProblem != null) {
            // A replay the guard cannot follow covers nothing as far as it can prove: as if it were gone.
            active = null;
        }
        if (rereadUntil != null
                && rereadMatcher == null
                && active != null
                && active.replayId().equals(rereadReplay)) {
            rereadMatcher = active.filter();
        }
        if (active != null && replayId != null && !active.replayId().equals(replayId)) {
            // A different replay took over this partition: the old one is gone as far as this guard knows.
            Long seek = abandon();
            adopt(active);
            return seek;
        }
        if (active == null) {
            return abandon();
        }
        adopt(active);
        if (active.handover() != null && handover == null) {
            handover = active.handover();
            Long skippedFrom = firstSkipped;
            firstSkipped = null;
            if (skippedFrom != null) {
                long target = Math.max(active.handover(), skippedFrom);
                if (seenUntil != null && seenUntil > target) {
                    return reread(target, seenUntil, replayId, matcher);
                }
            }
        }
        return null;
    }

    private void adopt(ActiveHandover active) {
        replayId = active.replayId();
        start = active.start();
        matcher = active.filter();
        if (active.handover() == null) {
            handover = null;
        }
        if (unknownSkips) {
            unknownSkips = false;
            if (firstSkipped == null && seenUntil != null && seenUntil > active.start()) {
                firstSkipped = active.start();
            }
        }
    }

    /** The replay went away. If it went before publishing H, nobody covers what was skipped: re-read it. */
    private Long abandon() {
        Long seek = null;
        if (handover == null && firstSkipped != null && seenUntil != null && seenUntil > firstSkipped) {
            seek = reread(firstSkipped, seenUntil, replayId, matcher);
        }
        replayId = null;
        start = null;
        handover = null;
        matcher = null;
        firstSkipped = null;
        floorCommitted = false;
        return seek;
    }

    private long reread(long target, long until, String replay, RecordFilter filter) {
        rereadUntil = Math.max(until, rereadUntil == null ? until : rereadUntil);
        rereadReplay = replay;
        rereadMatcher = filter;
        seenUntil = target;
        return target;
    }

    // -- per record

    public Verdict verdict(long offset, byte[] key, Headers headers, byte[] value) {
        seenUntil = offset + 1;
        if (rereadUntil != null) {
            if (offset < rereadUntil) {
                Verdict verdict = Verdict.PROCESS;
                // Non-matching records here were processed the first time round. Without the replay's filter
                // (it vanished before this guard learned it) every record is processed again: at-least-once.
                if (rereadMatcher != null && !matches(rereadMatcher, key, headers, value)) {
                    verdict = Verdict.SKIP;
                } else if (start != null && handover != null && start <= offset && offset < handover) {
                    verdict = Verdict.SKIP;
                }
                if (offset + 1 >= rereadUntil) {
                    // The window is read to its end (a quiet partition may have nothing after it).
                    rereadUntil = null;
                    rereadReplay = null;
                    rereadMatcher = null;
                }
                return verdict == Verdict.SKIP ? skip() : verdict;
            }
            rereadUntil = null;
            rereadReplay = null;
            rereadMatcher = null;
        }
        if (start == null || offset < start) {
            return Verdict.PROCESS;
        }
        if (handover == null) {
            if (matches(matcher, key, headers, value)) {
                if (firstSkipped == null) {
                    firstSkipped = offset;
                }
                return skip();
            }
            return Verdict.PROCESS;
        }
        if (offset < handover && matches(matcher, key, headers, value)) {
            return skip();
        }
        return Verdict.PROCESS;
    }

    private Verdict skip() {
        skipped++;
        return Verdict.SKIP;
    }

    /** Does the replay cover this record? A record its filter cannot decode is the replay's (it dead-letters it). */
    static boolean matches(RecordFilter matcher, byte[] key, Headers headers, byte[] value) {
        if (matcher == null) {
            return true;
        }
        try {
            return matcher.matches(key, headers, value);
        } catch (UndecodableValueException e) {
            return true;
        }
    }

    // -- commits

    /** The mark a commit of {@code offset} for this partition must carry now (null: a plain commit). */
    public CommitMark commitMark(long offset) {
        if (rereadUntil != null && offset < rereadUntil && rereadReplay != null) {
            return CommitMark.rereadUntil(rereadReplay, rereadUntil);
        }
        if (handover == null && firstSkipped != null && offset > firstSkipped && replayId != null) {
            return CommitMark.skipFrom(replayId, firstSkipped);
        }
        return null;
    }

    /**
     * In a quiet partition no record past H may come for a long time, so the service never commits past H and the
     * handover is never acknowledged. Once everything below the guard's position is processed or covered, the guard
     * may commit that position itself; returns it, or null.
     */
    public Long floorCommit(Long position) {
        if (handover == null || floorCommitted || rereadUntil != null) {
            return null;
        }
        if (position == null || position < handover) {
            return null;
        }
        return position;
    }

    public boolean pendingAck() {
        return handover != null && replayId != null;
    }

    /** Some record of this partition needs a per-record decision. */
    public boolean guarded() {
        return start != null || rereadUntil != null;
    }
}
