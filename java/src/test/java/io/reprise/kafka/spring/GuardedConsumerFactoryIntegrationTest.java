package io.reprise.kafka.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.conformance.TestKafka;
import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.CommitMetadata;
import io.reprise.kafka.protocol.CompactJson;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.topic.HandoverTopic;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.MessageListener;

/**
 * The guard installed in one line on a Spring Kafka consumer factory, driven by a real
 * {@link ConcurrentMessageListenerContainer} against the real broker through a handover.
 */
class GuardedConsumerFactoryIntegrationTest {

    static boolean paid(int n) {
        return n % 3 == 0;
    }

    static List<String> values(int from, int to) {
        List<String> out = new ArrayList<>();
        for (int n = from; n < to; n++) {
            out.add("{\"n\":" + n + ",\"paid\":" + paid(n) + "}");
        }
        return out;
    }

    private static Map<String, Object> config(String group) {
        Map<String, Object> config = TestKafka.connection();
        config.put("group.id", group);
        config.put("auto.offset.reset", "earliest");
        config.put("key.deserializer", StringDeserializer.class.getName());
        config.put("value.deserializer", StringDeserializer.class);
        return config;
    }

    private static OffsetAndMetadata committed(String group, TopicPartition tp) {
        try (Admin admin = Admin.create(TestKafka.connection())) {
            return admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS)
                    .get(tp);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void aListenerContainerThroughAHandover() throws Exception {
        String topic = TestKafka.unique("spring");
        String handoverTopic = TestKafka.unique("handover");
        String group = TestKafka.unique("spring-live");
        String rid = TestKafka.unique("shop/spring-fix");
        TestKafka.createTopic(topic, 2);
        TestKafka.produce(topic, 0, values(0, 10));
        TestKafka.produce(topic, 1, values(0, 10));
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (HandoverTopic handovers = new HandoverTopic(TestKafka.connection(), handoverTopic)) {
            handovers.ensure(true);
            // The replay is bootstrapped before the service starts: S = 10 on partition 0.
            handovers.publish(
                    new HandoverRecord.Replay(
                            rid,
                            "Handover",
                            "reprise-spring-fix",
                            group,
                            List.of(topic),
                            (ObjectNode) CompactJson.parse("{\"json\":[{\"path\":\"paid\",\"equals\":true}]}"),
                            1),
                    new HandoverRecord.Start(rid, topic, 0, 10, null, null, false, 1));

            DefaultKafkaConsumerFactory<String, String> factory = GuardPostProcessor.install(
                    new DefaultKafkaConsumerFactory<>(config(group)),
                    settings -> settings.withHandoverTopic(handoverTopic).withProgressInterval(Duration.ofMillis(200)));
            Map<Integer, List<Long>> processed = new ConcurrentHashMap<>();
            List<String> values = new CopyOnWriteArrayList<>();
            ContainerProperties properties = new ContainerProperties(topic);
            properties.setMessageListener((MessageListener<String, String>) record -> {
                processed
                        .computeIfAbsent(record.partition(), k -> new CopyOnWriteArrayList<>())
                        .add(record.offset());
                values.add(record.value());
            });
            ConcurrentMessageListenerContainer<String, String> container =
                    new ConcurrentMessageListenerContainer<>(factory, properties);
            container.setConcurrency(2);
            container.start();
            try {
                Runnable idle = () -> sleep(100);
                TestKafka.await(
                        "the first records",
                        90,
                        idle,
                        () -> processed.getOrDefault(0, List.of()).size() >= 10
                                && processed.getOrDefault(1, List.of()).size() >= 10);
                assertTrue(values.contains("{\"n\":0,\"paid\":true}"), "the listener gets deserialized values");
                TestKafka.produce(topic, 0, values(10, 20));
                TestKafka.produce(topic, 1, values(10, 20));
                TestKafka.await("the skipped tail committed with the guard's mark", 90, idle, () -> {
                    OffsetAndMetadata c = committed(group, p0);
                    return c != null
                            && c.offset() == 20
                            && processed.getOrDefault(1, List.of()).size() >= 20;
                });
                assertEquals(
                        CommitMark.skipFrom(rid, 12),
                        CommitMetadata.read(committed(group, p0).metadata()));
                List<Long> expected = new ArrayList<>();
                for (long o = 0; o < 20; o++) {
                    if (o < 10 || !paid((int) o)) {
                        expected.add(o);
                    }
                }
                assertEquals(
                        expected, processed.get(0), "the records the replay covers are not handed to the listener");

                handovers.publish(new HandoverRecord.Handover(rid, topic, 0, 15, "caught-up", "replay", 2));
                TestKafka.await(
                        "the acknowledgement",
                        90,
                        idle,
                        () -> handovers.readReplay(rid).partitions.get(p0).acknowledged());
                expected.add(15L);
                expected.add(18L);
                assertEquals(expected, processed.get(0), "matching records from H are re-read, the others not twice");
                assertEquals(20, committed(group, p0).offset());
                assertNull(CommitMetadata.read(committed(group, p0).metadata()));
                assertEquals(20, processed.get(1).size(), "partition 1 is the live side's alone");
            } finally {
                container.stop();
            }
        }
    }

    @Test
    void automaticCommitsAreRefused() {
        Map<String, Object> config = config(TestKafka.unique("auto"));
        config.put("enable.auto.commit", "true");
        IllegalStateException e = assertThrows(
                IllegalStateException.class,
                () -> GuardPostProcessor.install(new DefaultKafkaConsumerFactory<String, String>(config)));
        assertTrue(e.getMessage().contains("enable.auto.commit"), e.getMessage());
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
