package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

/** A dead letter is the record as it was plus where it came from and why (as the Python worker's). */
class DeadLettersTest {

    @Test
    void aDeadLetterKeepsTheRecordAndSaysWhereFrom() {
        RecordHeaders headers = new RecordHeaders();
        headers.add("trace", "t1".getBytes(StandardCharsets.UTF_8));
        headers.add("reprise.error", "old".getBytes(StandardCharsets.UTF_8));
        ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>(
                "orders",
                3,
                42L,
                1700000000000L,
                TimestampType.CREATE_TIME,
                1,
                3,
                "k".getBytes(StandardCharsets.UTF_8),
                "v!!".getBytes(StandardCharsets.UTF_8),
                headers,
                Optional.empty());
        ProducerRecord<byte[], byte[]> letter =
                DeadLetters.deadLetter(record, "orders.dlq", "ns/fix/1", "x".repeat(1200));
        assertEquals("orders.dlq", letter.topic());
        assertNull(letter.partition());
        assertEquals(1700000000000L, letter.timestamp());
        assertArrayEquals(record.key(), letter.key());
        assertArrayEquals(record.value(), letter.value());
        List<String> names = new ArrayList<>();
        for (Header h : letter.headers()) {
            names.add(h.key());
        }
        assertEquals(
                List.of(
                        "trace",
                        "reprise.error",
                        "reprise.replay",
                        "reprise.source.topic",
                        "reprise.source.partition",
                        "reprise.source.offset"),
                names);
        assertEquals(1000, letter.headers().lastHeader("reprise.error").value().length);
        assertEquals(
                "42",
                new String(letter.headers().lastHeader("reprise.source.offset").value(), StandardCharsets.UTF_8));
        assertEquals(
                "3",
                new String(
                        letter.headers().lastHeader("reprise.source.partition").value(), StandardCharsets.UTF_8));
    }
}
