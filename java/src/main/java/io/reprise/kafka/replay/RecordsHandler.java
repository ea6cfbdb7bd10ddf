package io.reprise.kafka.replay;

import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The service's handler: what its own consumer loop does with a batch of records, given to the replay role so one
 * piece of code serves the live group and the replay group.
 *
 * <p>The replay role calls it with each batch of matching records of one poll, in offset order per partition, and
 * commits the batch's offsets only after it returned: returning means the records are processed (durable). When it
 * throws, the role retries each record of the batch on its own ({@code REPRISE_HANDLER_RETRIES} times); a record
 * that keeps failing is poison: it goes to the dead-letter topic, or is counted and skipped. So a handler must be
 * safe to call again with records it has seen (at-least-once), as any Kafka consumer's.
 *
 * @param <K> the key type (the service's key deserializer)
 * @param <V> the value type (the service's value deserializer)
 */
@FunctionalInterface
public interface RecordsHandler<K, V> {

    void handle(List<ConsumerRecord<K, V>> records) throws Exception;
}
