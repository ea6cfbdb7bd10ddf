package io.reprise.kafka.protocol;

import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;

/** Everything the handover topic says about one replay id: what the operator reads. */
public final class ReplayHandover {
    public final String replayId;
    public HandoverRecord.Replay replay;
    public HandoverRecord.Result result;
    public final Map<TopicPartition, PartitionHandover> partitions = new LinkedHashMap<>();
    /** Every key that currently has a value (what a cleanup must tombstone). */
    public final Set<ByteBuffer> liveKeys = new LinkedHashSet<>();
    /**
     * Keys of governing kinds ({@code replay}, {@code start}, {@code handover}) whose latest value could not be read,
     * with the reason (a wire error code). Such a key hides what it held before: nobody may act on a value a reader
     * cannot see.
     */
    public final Map<KeySlot, String> unreadable = new LinkedHashMap<>();
    /** Position of the {@code replay} record in the log; the earliest replay wins when two target one partition. */
    long order;

    public ReplayHandover(String replayId) {
        this.replayId = replayId;
    }

    /** The start is resolved and recorded: the {@code replay} and {@code start} records come in one transaction. */
    public boolean bootstrapped() {
        return replay != null && partitions.values().stream().anyMatch(p -> p.start != null);
    }

    public PartitionHandover partition(String topic, int partition) {
        return partitions.computeIfAbsent(
                new TopicPartition(topic, partition), k -> new PartitionHandover(topic, partition));
    }

    public List<PartitionHandover> planned() {
        return partitions.values().stream().filter(p -> p.start != null).toList();
    }

    /** Every planned partition has H: the replay group has nothing left to do. */
    public boolean allHandedOver() {
        List<PartitionHandover> planned = planned();
        return !planned.isEmpty() && planned.stream().allMatch(p -> p.handover != null);
    }

    /** Done from the protocol's view: all handed over, and in Handover mode all acknowledged. */
    public boolean complete() {
        if (!allHandedOver()) {
            return false;
        }
        if (replay != null && "Handover".equals(replay.mode())) {
            return planned().stream().allMatch(PartitionHandover::acknowledged);
        }
        return true;
    }

    /** The kind, topic and partition of a record key; topic and partition are null for replay-wide kinds. */
    public record KeySlot(String kind, String topic, Integer partition) {}

    void apply(HandoverKey key, byte[] rawKey, HandoverRecord record) {
        unreadable.remove(new KeySlot(key.kind(), key.topic(), key.partition()));
        ByteBuffer k = ByteBuffer.wrap(rawKey == null ? new byte[0] : rawKey);
        if (record == null) {
            liveKeys.remove(k);
        } else {
            liveKeys.add(k);
        }
        switch (key.kind()) {
            case "replay" -> {
                replay = (HandoverRecord.Replay) record;
                return;
            }
            case "result" -> {
                result = (HandoverRecord.Result) record;
                return;
            }
            default -> {}
        }
        if (key.topic() == null || key.partition() == null) {
            return;
        }
        PartitionHandover part = partition(key.topic(), key.partition());
        switch (key.kind()) {
            case "start" -> part.start = (HandoverRecord.Start) record;
            case "handover" -> part.handover = (HandoverRecord.Handover) record;
            case "guard" -> part.guard = (HandoverRecord.Guard) record;
            case "ack" -> part.ack = (HandoverRecord.Ack) record;
            case "progress" -> part.progress = (HandoverRecord.Progress) record;
            default -> {}
        }
        if (part.empty()) {
            partitions.remove(new TopicPartition(key.topic(), key.partition()));
        }
    }
}
