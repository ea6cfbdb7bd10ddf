package io.reprise.kafka.guard;

/** Counts for the service's own metrics. */
public final class GuardStats {
    volatile long skipped;
    volatile long handed;
    volatile long seeks;
    volatile long acks;
    volatile int activePartitions;
    volatile long handoverRecordsFailed;

    /** Records the guard did not hand to the service (the replay covers them). */
    public long skipped() {
        return skipped;
    }

    public long handed() {
        return handed;
    }

    /** Seeks back to the handover offset (or to the first skipped offset, when a replay vanished). */
    public long seeks() {
        return seeks;
    }

    public long acks() {
        return acks;
    }

    /** Assigned partitions that an active replay covers. */
    public int activePartitions() {
        return activePartitions;
    }

    /**
     * Handover-topic records the guard's follower could not apply (malformed, or an error applying them); the
     * records after them were applied.
     */
    public long handoverRecordsFailed() {
        return handoverRecordsFailed;
    }

    @Override
    public String toString() {
        return "GuardStats[skipped=" + skipped + ", handed=" + handed + ", seeks=" + seeks + ", acks=" + acks
                + ", activePartitions=" + activePartitions + ", handoverRecordsFailed=" + handoverRecordsFailed + "]";
    }
}
