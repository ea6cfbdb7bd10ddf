package io.reprise.kafka.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The real broker of the integration tests: {@code REPRISE_TEST_BOOTSTRAP} (make test starts the local platform's
 * broker and sets it). Not set means the tests fail: an integration test never passes without its broker.
 */
public final class TestKafka {
    private TestKafka() {}

    public static String bootstrap() {
        String servers = System.getenv("REPRISE_TEST_BOOTSTRAP");
        if (servers == null || servers.isBlank()) {
            fail("REPRISE_TEST_BOOTSTRAP is not set: the integration tests need the real broker "
                    + "(make test starts one; by hand, start local_platform's broker and export its address)");
        }
        return servers;
    }

    public static Map<String, Object> connection() {
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", bootstrap());
        return config;
    }

    /** A name no other test uses. */
    public static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    /**
     * Creates the topic and returns once every partition answers at its leader. CreateTopics returns when the
     * controller has recorded the topic, before the broker serves it: a producer that writes at once gets
     * NOT_LEADER_OR_FOLLOWER, and an idempotent producer can then be refused with OUT_OF_ORDER_SEQUENCE_NUMBER
     * until its delivery timeout, leaving the partition short of what the test wrote.
     */
    public static void createTopic(String name, int partitions) {
        createTopic(name, partitions, Map.of());
    }

    /** {@link #createTopic(String, int)} with topic settings (e.g. {@code max.message.bytes}). */
    public static void createTopic(String name, int partitions, Map<String, String> config) {
        try (Admin admin = Admin.create(connection())) {
            admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(config)))
                    .all()
                    .get(30, TimeUnit.SECONDS);
            Map<TopicPartition, OffsetSpec> ends = new HashMap<>();
            for (int p = 0; p < partitions; p++) {
                ends.put(new TopicPartition(name, p), OffsetSpec.latest());
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                try {
                    admin.listOffsets(ends).all().get(10, TimeUnit.SECONDS);
                    return;
                } catch (ExecutionException notServedYet) {
                    if (System.nanoTime() > deadline) {
                        throw notServedYet;
                    }
                    Thread.sleep(50);
                }
            }
        } catch (Exception e) {
            throw new AssertionError("cannot create topic " + name + ": " + e, e);
        }
    }

    public static KafkaProducer<byte[], byte[]> producer() {
        Map<String, Object> config = connection();
        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());
        config.put("acks", "all");
        config.put("linger.ms", 0);
        return new KafkaProducer<>(config);
    }

    /** Records {@code {"n":i,"paid":...}} at the given offsets' values; waits until they are written. */
    public static void produce(String topic, int partition, List<String> values) {
        try (KafkaProducer<byte[], byte[]> producer = producer()) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            int i = 0;
            for (String value : values) {
                sent.add(producer.send(new ProducerRecord<>(
                        topic,
                        partition,
                        ("k" + i++).getBytes(StandardCharsets.UTF_8),
                        value == null ? null : value.getBytes(StandardCharsets.UTF_8))));
            }
            written(topic, sent);
        }
    }

    /**
     * Waits for every send: a test's records that were not written fail the test here, naming the topic, instead of
     * showing later as records the code under test seems to have lost.
     */
    public static void written(String topic, List<? extends Future<RecordMetadata>> sent) {
        for (Future<RecordMetadata> one : sent) {
            try {
                one.get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new AssertionError("a test record was not written to " + topic + ": " + e, e);
            }
        }
    }

    /** Waits (bounded) until {@code condition} holds, doing {@code step} in between; fails with {@code what}. */
    public static void await(String what, long seconds, Runnable step, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("gave up after " + seconds + " s waiting for: " + what);
            }
            step.run();
        }
    }
}
