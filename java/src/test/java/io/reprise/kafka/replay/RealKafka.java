package io.reprise.kafka.replay;

import io.reprise.kafka.conformance.TestKafka;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.HandoverWire;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The real broker of local_platform for the integration tests, at {@code REPRISE_TEST_BOOTSTRAP} (the pytest wrapper
 * {@code tests/integration/java/test_java_suite.py} starts it and runs Maven). A test fails, never skips, without it.
 */
final class RealKafka {

    private RealKafka() {}

    static String bootstrap() {
        String servers = System.getenv("REPRISE_TEST_BOOTSTRAP");
        if (servers == null || servers.isBlank()) {
            throw new IllegalStateException("REPRISE_TEST_BOOTSTRAP is not set: run the Java suite through "
                    + "tests/integration/java/test_java_suite.py (it starts the broker), or export the address of one");
        }
        return servers;
    }

    static String unique(String base) {
        return base + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Map<String, Object> admin() {
        return Map.of("bootstrap.servers", bootstrap());
    }

    /** Returns once every partition is served (see {@link TestKafka#createTopic}). */
    static void createTopic(String topic, int partitions) {
        TestKafka.createTopic(topic, partitions);
    }

    /** {@code perPartition} records in every partition, values {@code v-<partition>-<i>}, keys {@code k<i>}. */
    static void produce(String topic, int partitions, int perPartition) throws Exception {
        produce(topic, partitions, perPartition, (p, i) -> "v-" + p + "-" + i);
    }

    interface Values {
        String of(int partition, int index);
    }

    static void produce(String topic, int partitions, int perPartition, Values values) throws Exception {
        Map<String, Object> config = new HashMap<>(admin());
        config.put("key.serializer", StringSerializer.class.getName());
        config.put("value.serializer", StringSerializer.class.getName());
        config.put("linger.ms", 5);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < perPartition; i++) {
                for (int p = 0; p < partitions; p++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, p, "k" + i, values.of(p, i))));
                }
            }
            TestKafka.written(topic, sent);
        }
    }

    static Map<TopicPartition, OffsetAndMetadata> committed(String group) throws Exception {
        try (Admin admin = Admin.create(admin())) {
            Map<TopicPartition, OffsetAndMetadata> found = new HashMap<>();
            admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS)
                    .forEach((tp, om) -> {
                        if (om != null) {
                            found.put(tp, om);
                        }
                    });
            return found;
        }
    }

    /** Every message of the handover topic about {@code replayId}, in log order (tombstones as null records). */
    static List<HandoverRecord> handoverRecords(String handoverTopic, String replayId) throws Exception {
        List<HandoverRecord> result = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : readAll(handoverTopic)) {
            HandoverWire.Decoded decoded = HandoverWire.decode(r.key(), r.value());
            if (decoded.key().replayId().equals(replayId) && decoded.record() != null) {
                result.add(decoded.record());
            }
        }
        return result;
    }

    /** Every committed record of a topic (read_committed), from the beginning to the end at the call. */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String topic) {
        Map<String, Object> config = new HashMap<>(admin());
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        config.put("isolation.level", "read_committed");
        config.put("enable.auto.commit", false);
        List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            List<TopicPartition> partitions = new ArrayList<>();
            consumer.partitionsFor(topic, Duration.ofSeconds(30))
                    .forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("could not read " + topic + " to its end");
                }
                consumer.poll(Duration.ofMillis(200)).forEach(all::add);
            }
        }
        return all;
    }

    static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
}
