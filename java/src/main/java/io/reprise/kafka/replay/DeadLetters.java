package io.reprise.kafka.replay;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Poison records (undecodable, or the handler keeps throwing): to the dead-letter topic when there is one, else
 * counted and skipped; never a crash loop. A dead letter is the record as it was (key, value, headers, timestamp)
 * plus headers saying where it came from and why, the same as the Python worker's ({@code dead_letter_args}). It is
 * made durable ({@link #makeDurable}) before the batch's offsets are committed, so none is lost.
 */
final class DeadLetters implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(DeadLetters.class);

    /** Headers a dead letter carries besides the record's own. */
    static final List<String> DLQ_HEADERS = List.of(
            "reprise.error",
            "reprise.replay",
            "reprise.source.topic",
            "reprise.source.partition",
            "reprise.source.offset");

    private final String replayId;
    private final String topic;
    private final KafkaProducer<byte[], byte[]> producer;
    private final List<String> failures = new CopyOnWriteArrayList<>();

    DeadLetters(String replayId, String topic, Map<String, Object> producerConfig) {
        this.replayId = replayId;
        this.topic = topic;
        this.producer = topic == null ? null : new KafkaProducer<>(producerConfig);
    }

    /** Whether poison records go to a topic (else they are counted and skipped). */
    boolean toTopic() {
        return producer != null;
    }

    /** Hands a poison record on; true when it was dead-lettered, false when it was skipped. */
    boolean handle(ConsumerRecord<byte[], byte[]> record, String reason) {
        String where = record.topic() + "[" + record.partition() + "]@" + record.offset();
        String shown = reason.length() > 300 ? reason.substring(0, 300) : reason;
        if (producer == null) {
            LOG.warn("poison record skipped: {} ({})", where, shown);
            return false;
        }
        producer.send(deadLetter(record, topic, replayId, reason), (metadata, error) -> {
            if (error != null) {
                failures.add(error.toString());
            }
        });
        LOG.warn("poison record dead-lettered to {}: {} ({})", topic, where, shown);
        return true;
    }

    /** The dead letter of {@code record}: as it was, plus {@code reprise.*} headers saying where from and why. */
    static ProducerRecord<byte[], byte[]> deadLetter(
            ConsumerRecord<byte[], byte[]> record, String dlqTopic, String replayId, String reason) {
        RecordHeaders headers = new RecordHeaders();
        for (Header h : record.headers()) {
            if (!DLQ_HEADERS.contains(h.key())) {
                headers.add(h.key(), h.value());
            }
        }
        String error = reason.length() > 1000 ? reason.substring(0, 1000) : reason;
        headers.add("reprise.error", error.getBytes(StandardCharsets.UTF_8));
        headers.add("reprise.replay", replayId.getBytes(StandardCharsets.UTF_8));
        headers.add("reprise.source.topic", record.topic().getBytes(StandardCharsets.UTF_8));
        headers.add(
                "reprise.source.partition", String.valueOf(record.partition()).getBytes(StandardCharsets.UTF_8));
        headers.add("reprise.source.offset", String.valueOf(record.offset()).getBytes(StandardCharsets.UTF_8));
        Long timestamp = record.timestampType() != TimestampType.NO_TIMESTAMP_TYPE && record.timestamp() >= 0
                ? record.timestamp()
                : null;
        // No partition: the key decides (Java's murmur2), as the reference's dead letters.
        return new ProducerRecord<>(dlqTopic, null, timestamp, record.key(), record.value(), headers);
    }

    /** Waits until every dead letter sent is acknowledged; throws when one failed (the batch is not committed). */
    void makeDurable() {
        if (producer == null) {
            return;
        }
        producer.flush();
        if (!failures.isEmpty()) {
            String first = failures.get(0);
            failures.clear();
            throw new DeliveryException("producing dead-letter records failed: " + first);
        }
    }

    @Override
    public void close() {
        if (producer != null) {
            producer.close(java.time.Duration.ofSeconds(TimeUnit.MINUTES.toSeconds(1)));
        }
    }

    /** Records could not be made durable: the batch must not be committed. */
    static final class DeliveryException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        DeliveryException(String message) {
            super(message);
        }
    }
}
