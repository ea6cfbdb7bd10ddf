package io.reprise.kafka.conformance;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * The real broker of the integration tests: {@code REPRISE_TEST_BOOTSTRAP} (make test starts the local platform's
 * broker and sets it). Not set means the tests fail: an integration test never passes without its broker.
 */
public final class TestKafka {
    private TestKafka() {
    }

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

    public static void createTopic(String name, int partitions) {
        try (Admin admin = Admin.create(connection())) {
            admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
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
            int i = 0;
            for (String value : values) {
                producer.send(new ProducerRecord<>(topic, partition, ("k" + i++).getBytes(StandardCharsets.UTF_8),
                        value == null ? null : value.getBytes(StandardCharsets.UTF_8)));
            }
            producer.flush();
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
