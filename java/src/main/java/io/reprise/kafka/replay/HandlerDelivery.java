package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.RecordFilter;
import io.reprise.kafka.protocol.UndecodableValueException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A batch's way from raw records to the service's handler ({@code replay_worker/replay/delivery.py}, HandlerDelivery):
 * the replay's filter on the raw bytes (a value a JSON condition cannot parse counts as matching, HANDOVER.md
 * section 4, and is poison here), then the service's deserializers (a record they refuse is poison), then the
 * handler with the whole batch. When the batch call throws, each record is retried on its own
 * ({@code retries} times, with a short backoff) to find the poison ones; the others are delivered.
 */
final class HandlerDelivery<K, V> {

    private static final Logger LOG = LoggerFactory.getLogger(HandlerDelivery.class);

    /** What happened to one batch. */
    static final class Outcome {
        int matched;
        int filteredOut;
        int delivered;
        int deadLettered;
        int poisonSkipped;
    }

    private final RecordFilter filter;
    private final Deserializer<K> keys;
    private final Deserializer<V> values;
    private final RecordsHandler<K, V> handler;
    private final DeadLetters deadLetters;
    private final int retries;
    private final long backoffMillis;
    /** Both deserializers hand bytes through: the raw record is the typed one (no copy per record). */
    private final boolean identity;

    HandlerDelivery(
            RecordFilter filter,
            Deserializer<K> keys,
            Deserializer<V> values,
            RecordsHandler<K, V> handler,
            DeadLetters deadLetters,
            int retries,
            long backoffMillis) {
        this.filter = filter;
        this.keys = keys;
        this.values = values;
        this.handler = handler;
        this.deadLetters = deadLetters;
        this.retries = retries;
        this.backoffMillis = backoffMillis;
        this.identity =
                keys.getClass() == ByteArrayDeserializer.class && values.getClass() == ByteArrayDeserializer.class;
    }

    Outcome deliver(List<ConsumerRecord<byte[], byte[]>> batch) {
        Outcome outcome = new Outcome();
        List<ConsumerRecord<byte[], byte[]>> raw = new ArrayList<>(batch.size());
        List<ConsumerRecord<K, V>> typed = new ArrayList<>(batch.size());
        boolean all = filter.matchesEverything();
        for (ConsumerRecord<byte[], byte[]> record : batch) {
            if (!all) {
                try {
                    if (!filter.matches(record.key(), record.headers(), record.value())) {
                        outcome.filteredOut++;
                        continue;
                    }
                } catch (UndecodableValueException undecodable) {
                    outcome.matched++;
                    poison(record, "undecodable: " + undecodable.getMessage(), outcome);
                    continue;
                }
            }
            outcome.matched++;
            ConsumerRecord<K, V> decoded;
            try {
                decoded = decode(record);
            } catch (RuntimeException undecodable) {
                poison(record, "undecodable: " + describe(undecodable), outcome);
                continue;
            }
            raw.add(record);
            typed.add(decoded);
        }
        if (typed.isEmpty()) {
            return outcome;
        }
        try {
            handler.handle(typed);
            outcome.delivered += typed.size();
            return outcome;
        } catch (Exception batchFailed) {
            // The handler is the service's code: any failure is possible. Find the poison record(s) one by one.
            LOG.info(
                    "handler threw on a batch of {} records, retrying record by record: {}",
                    typed.size(),
                    describe(batchFailed));
        }
        for (int i = 0; i < typed.size(); i++) {
            Exception error = null;
            for (int attempt = 0; attempt <= retries; attempt++) {
                try {
                    handler.handle(List.of(typed.get(i)));
                    error = null;
                    break;
                } catch (Exception failed) {
                    error = failed;
                    if (attempt < retries) {
                        pause(backoffMillis * (attempt + 1));
                    }
                }
            }
            if (error == null) {
                outcome.delivered++;
            } else {
                poison(raw.get(i), "handler threw " + describe(error), outcome);
            }
        }
        return outcome;
    }

    @SuppressWarnings("unchecked")
    private ConsumerRecord<K, V> decode(ConsumerRecord<byte[], byte[]> record) {
        if (identity) {
            return (ConsumerRecord<K, V>) (ConsumerRecord<?, ?>) record;
        }
        K key = keys.deserialize(record.topic(), record.headers(), record.key());
        V value = values.deserialize(record.topic(), record.headers(), record.value());
        return new ConsumerRecord<>(
                record.topic(),
                record.partition(),
                record.offset(),
                record.timestamp(),
                record.timestampType(),
                record.serializedKeySize(),
                record.serializedValueSize(),
                key,
                value,
                record.headers(),
                record.leaderEpoch(),
                Optional.empty());
    }

    private void poison(ConsumerRecord<byte[], byte[]> record, String reason, Outcome outcome) {
        if (deadLetters.handle(record, reason)) {
            outcome.deadLettered++;
        } else {
            outcome.poisonSkipped++;
        }
    }

    private static String describe(Exception error) {
        return error.getClass().getSimpleName() + ": " + error.getMessage();
    }

    private static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
