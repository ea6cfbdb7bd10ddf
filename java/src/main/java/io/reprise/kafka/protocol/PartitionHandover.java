package io.reprise.kafka.protocol;

/** Everything the handover topic says about one partition of one replay. Fields are null until written. */
public final class PartitionHandover {
    public final String topic;
    public final int partition;
    public HandoverRecord.Start start;
    public HandoverRecord.Handover handover;
    public HandoverRecord.Guard guard;
    public HandoverRecord.Ack ack;
    public HandoverRecord.Progress progress;

    PartitionHandover(String topic, int partition) {
        this.topic = topic;
        this.partition = partition;
    }

    public Long startOffset() {
        return start == null ? null : start.offset();
    }

    public Long handoverOffset() {
        return handover == null ? null : handover.offset();
    }

    /** The live side confirmed it owns p from H on (the ack names the current H). */
    public boolean acknowledged() {
        return ack != null && handover != null && ack.offset() == handover.offset();
    }

    /** {@code pending}, {@code replaying}, {@code handed-over} or {@code acknowledged}. */
    public String state() {
        if (acknowledged()) {
            return "acknowledged";
        }
        if (handover != null) {
            return "handed-over";
        }
        return start != null ? "replaying" : "pending";
    }

    boolean empty() {
        return start == null && handover == null && guard == null && ack == null && progress == null;
    }
}
