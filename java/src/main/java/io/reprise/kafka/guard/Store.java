package io.reprise.kafka.guard;

import io.reprise.kafka.protocol.CommitMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/** An offset to commit for one partition, with its commit metadata (the guard's mark as JSON, or none). */
public record Store(TopicPartition partition, long offset, String metadata) {

    /** As committed: a mark's JSON is stored as a C string (see {@link CommitMetadata}). */
    public OffsetAndMetadata offsetAndMetadata() {
        return new OffsetAndMetadata(offset, metadata == null ? "" : metadata + '\u0000');
    }
}
