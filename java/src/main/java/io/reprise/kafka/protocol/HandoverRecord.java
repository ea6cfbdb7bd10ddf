package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;

/**
 * The records of the handover topic (HANDOVER.md section 2), one Java record per kind. {@link HandoverWire}
 * turns them into key and value bytes and back.
 */
public sealed interface HandoverRecord {

    String replayId();

    /** The writer's clock when written, informational. */
    long atMs();

    String kind();

    /** Key of this record in the compacted topic. */
    HandoverKey key();

    /** Records about one partition of a replay. */
    sealed interface PerPartition extends HandoverRecord {
        String topic();

        int partition();

        @Override
        default HandoverKey key() {
            return HandoverKey.of(replayId(), kind(), topic(), partition());
        }
    }

    /** {@code replay}: what the replay is. Written once, in the bootstrap transaction. */
    record Replay(
            String replayId,
            String mode,
            String replayGroup,
            String liveGroup,
            List<String> topics,
            ObjectNode filter,
            long atMs)
            implements HandoverRecord {
        public Replay {
            topics = List.copyOf(topics);
            filter = filter == null ? CompactJson.NODES.objectNode() : filter.deepCopy();
        }

        @Override
        public String kind() {
            return "replay";
        }

        @Override
        public HandoverKey key() {
            return HandoverKey.of(replayId, "replay");
        }
    }

    /** {@code start}: S(p), and the end bound when there is one. Written in the bootstrap transaction. */
    record Start(
            String replayId,
            String topic,
            int partition,
            long offset,
            Long endOffset,
            Long endTimestampMs,
            boolean clamped,
            long atMs)
            implements PerPartition {
        @Override
        public String kind() {
            return "start";
        }
    }

    /** {@code handover}: H(p). The replay processed every matching record below it and none from it on. */
    record Handover(String replayId, String topic, int partition, long offset, String reason, String by, long atMs)
            implements PerPartition {
        @Override
        public String kind() {
            return "handover";
        }
    }

    /**
     * {@code guard}: the live side is skipping p (advisory), or, with {@code problem}, cannot follow the replay on
     * p and skips nothing for it (a reason code such as {@code unevaluable-filter:unknown-field}).
     */
    record Guard(
            String replayId,
            String topic,
            int partition,
            Long firstSkipped,
            Long seenUntil,
            String member,
            long atMs,
            String problem)
            implements PerPartition {
        public Guard(
                String replayId,
                String topic,
                int partition,
                long firstSkipped,
                long seenUntil,
                String member,
                long atMs) {
            this(replayId, topic, partition, firstSkipped, seenUntil, member, atMs, null);
        }

        @Override
        public String kind() {
            return "guard";
        }
    }

    /** {@code ack}: the live group's committed offset of p is at or past H with no mark: p is handed over. */
    record Ack(String replayId, String topic, int partition, long offset, long committed, String member, long atMs)
            implements PerPartition {
        @Override
        public String kind() {
            return "ack";
        }
    }

    /** {@code progress}: the replay group's committed position of p (advisory, for the operator's status). */
    record Progress(
            String replayId, String topic, int partition, long position, boolean atEnd, String member, long atMs)
            implements PerPartition {
        @Override
        public String kind() {
            return "progress";
        }
    }

    /** {@code result}: the outcome of a run-to-completion worker (a Backfill Job). */
    record Result(String replayId, JsonNode result, long atMs) implements HandoverRecord {
        public Result {
            result = result == null ? CompactJson.NODES.objectNode() : result.deepCopy();
        }

        @Override
        public String kind() {
            return "result";
        }

        @Override
        public HandoverKey key() {
            return HandoverKey.of(replayId, "result");
        }
    }
}
