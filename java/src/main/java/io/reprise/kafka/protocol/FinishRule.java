package io.reprise.kafka.protocol;

import java.util.Optional;

/**
 * When the replay stops a partition, per mode (HANDOVER.md section 1), ported from {@code replay_finish} and
 * {@code record_ends_partition} of {@code replay_worker/protocol/finish_rules.py} and held to them by the conformance
 * vectors.
 *
 * <table>
 *   <caption>The replay stops p when</caption>
 *   <tr><th>mode</th><th>rule</th></tr>
 *   <tr><td>Drain</td><td>the end bound is reached, or (unbounded) it reaches the end of p</td></tr>
 *   <tr><td>Parallel</td><td>its position &gt;= the live group's C(p), or (unbounded) the end of p, or the end bound</td></tr>
 *   <tr><td>Handover</td><td>its position &gt;= the live side's position (C of L, or U of a guard record), or the end of p</td></tr>
 * </table>
 *
 * <p>The reason strings are the wire values of the {@code handover} record and of the {@code finished} commit mark.
 */
public final class FinishRule {

    public static final String END_BOUND = "end-bound";
    public static final String END_OF_PARTITION = "end-of-partition";
    public static final String LIVE_OFFSET = "live-offset";
    public static final String CAUGHT_UP = "caught-up";

    public static final String DRAIN = "Drain";
    public static final String PARALLEL = "Parallel";
    public static final String HANDOVER = "Handover";

    private FinishRule() {}

    /**
     * Whether the replay stops this partition now, at {@code position} (the next offset it would process; every
     * record below it is processed).
     *
     * @param mode {@code Drain}, {@code Parallel} or {@code Handover}
     * @param position the replay's position in the partition
     * @param endOffset the exclusive end offset of a bounded replay, or null
     * @param endTimestampMs the end time of a replay bounded by a future timestamp, or null
     * @param atEnd the consumer reached the end of the partition and processed everything before it
     * @param liveCommitted the live side's position (its committed offset, or a guard's seen-until), or null
     * @return the finish reason, or empty when the partition goes on
     */
    public static Optional<String> decide(
            String mode, long position, Long endOffset, Long endTimestampMs, boolean atEnd, Long liveCommitted) {
        if (endOffset != null && position >= endOffset) {
            return Optional.of(END_BOUND);
        }
        boolean bounded = endOffset != null || endTimestampMs != null;
        switch (mode) {
            case DRAIN:
                return atEnd && !bounded ? Optional.of(END_OF_PARTITION) : Optional.empty();
            case PARALLEL:
                if (liveCommitted != null && position >= liveCommitted) {
                    return Optional.of(LIVE_OFFSET);
                }
                return atEnd && !bounded ? Optional.of(END_OF_PARTITION) : Optional.empty();
            case HANDOVER:
                if (liveCommitted != null && position >= liveCommitted) {
                    return Optional.of(CAUGHT_UP);
                }
                return atEnd ? Optional.of(END_OF_PARTITION) : Optional.empty();
            default:
                throw new IllegalArgumentException("unknown mode '" + mode + "'");
        }
    }

    /** A bounded replay stops before this record: at the end offset, or at the first record at/after the end time. */
    public static boolean recordEndsPartition(Long endOffset, Long endTimestampMs, long offset, Long timestampMs) {
        if (endOffset != null && offset >= endOffset) {
            return true;
        }
        return endTimestampMs != null && timestampMs != null && timestampMs >= endTimestampMs;
    }
}
