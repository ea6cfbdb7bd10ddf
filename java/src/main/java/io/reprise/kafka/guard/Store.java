package io.reprise.kafka.guard;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/** An offset to commit for one partition, with its commit metadata (the guard's mark, or none). */
public record Store(TopicPartition partition, long offset, String metadata) {

    public OffsetAndMetadata offsetAndMetadata() {
        return new OffsetAndMetadata(offset, metadata == null ? "" : metadata);
    }
}
