package io.reprise.kafka.guard;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.conformance.TestKafka;
import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.CompactJson;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.PartitionHandover;
import io.reprise.kafka.protocol.ReplayHandover;
import io.reprise.kafka.topic.HandoverTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The guard on the real broker: a Handover replay simulated with the handover-topic publisher (replay, start,
 * handover records) while a guarded live consumer runs; the guard skips the covered records in [S, H), seeks back,
 * commits its marks and acknowledges, and every record is processed by exactly one side.
 */
class GuardedConsumerIntegrationTest {
    private static final String PAID = "{\"json\":[{\"path\":\"paid\",\"equals\":true}]}";

    private String topic;
    private String handoverTopic;
    private String group;
    private HandoverTopic handovers;
    private final List<GuardedConsumer<?, ?>> consumers = new ArrayList<>();

    @BeforeEach
    void setUp() {
        topic = TestKafka.unique("guarded");
        handoverTopic = TestKafka.unique("handover");
        group = TestKafka.unique("live");
        TestKafka.createTopic(topic, 2);
        handovers = new HandoverTopic(TestKafka.connection(), handoverTopic);
        handovers.ensure(true);
    }

    @AfterEach
    void tearDown() {
        for (GuardedConsumer<?, ?> c : consumers) {
            try {
                c.close(Duration.ofSeconds(10));
            } catch (RuntimeException e) {
                // already closed by the test
            }
        }
        handovers.close();
    }

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

    private GuardedConsumer<String, String> guarded(Map<String, Object> extra) {
        Map<String, Object> config = TestKafka.connection();
        config.put("group.id", group);
        config.put("enable.auto.commit", false);
        config.put("auto.offset.reset", "earliest");
        config.putAll(extra);
        GuardSettings settings = GuardSettings.from(config).withHandoverTopic(handoverTopic).withMember("test-" + consumers.size())
                .withProgressInterval(Duration.ofMillis(200));
        Map<String, Object> inner = new HashMap<>(config);
        inner.put("key.deserializer", org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        inner.put("value.deserializer", org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        GuardedConsumer<String, String> consumer = new GuardedConsumer<>(new KafkaConsumer<>(inner),
                new StringDeserializer(), new StringDeserializer(), settings);
        consumers.add(consumer);
        return consumer;
    }

    private void publishReplay(String rid, String filter, Map<Integer, Long> starts) throws Exception {
        List<HandoverRecord> records = new ArrayList<>();
        records.add(new HandoverRecord.Replay(rid, "Handover", "reprise-" + rid, group, List.of(topic),
                (ObjectNode) CompactJson.parse(filter), System.currentTimeMillis()));
        starts.forEach((p, s) -> records.add(new HandoverRecord.Start(rid, topic, p, s, null, null, false, System.currentTimeMillis())));
        handovers.publish(records);
    }

    /** What the live service processed, per partition, in order (duplicates kept). */
    private static final class Service {
        final Map<Integer, List<Long>> processed = new HashMap<>();

        void take(Iterable<? extends ConsumerRecord<?, ?>> records) {
            for (ConsumerRecord<?, ?> r : records) {
                processed.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
            }
        }

        List<Long> of(int partition) {
            return processed.getOrDefault(partition, List.of());
        }
    }

    private static List<Long> range(long from, long to) {
        List<Long> out = new ArrayList<>();
        for (long o = from; o < to; o++) {
            out.add(o);
        }
        return out;
    }

    @Test
    void skipsWhatTheReplayCoversSeeksBackCommitsMarksAndAcknowledges() throws Exception {
        String rid = TestKafka.unique("shop/orders-fix");
        TestKafka.produce(topic, 0, values(0, 10));
        TestKafka.produce(topic, 1, values(0, 10));
        List<Collection<TopicPartition>> assigned = new CopyOnWriteArrayList<>();
        GuardedConsumer<String, String> live = guarded(Map.of());
        live.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                assigned.add(List.copyOf(partitions));
            }
        });
        Service service = new Service();
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        TestKafka.await("the first 20 records", 60, () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).size() + service.of(1).size() >= 20);
        live.commitSync();
        assertEquals(Set.of(p0, p1), Set.copyOf(assigned.get(0)), "the service's own listener is called");
        assertEquals(10, live.committed(Set.of(p0)).get(p0).offset());

        // The replay bootstraps with S = 10 on partition 0 only (partition 1 stays the live side's).
        publishReplay(rid, PAID, Map.of(0, 10L));
        TestKafka.await("the guard learns S", 30, () -> service.take(live.poll(Duration.ofMillis(100))),
                () -> live.book().part(p0) != null && live.book().part(p0).rules.start() != null);
        TestKafka.produce(topic, 0, values(10, 20));
        TestKafka.produce(topic, 1, values(10, 20));
        TestKafka.await("records up to 20 seen", 60, () -> {
            service.take(live.poll(Duration.ofMillis(200)));
            // The service commits what it processed, explicitly: the guard attaches its mark.
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            service.processed.forEach((p, list) -> offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(list.get(list.size() - 1) + 1)));
            live.commitSync(offsets);
        }, () -> live.position(p0) >= 20 && service.of(1).size() >= 20);
        long firstPaid = 12; // 12 is the first n >= 10 with n % 3 == 0
        List<Long> expectedSoFar = new ArrayList<>(range(0, 10));
        for (long o = 10; o < 20; o++) {
            if (!paid((int) o)) {
                expectedSoFar.add(o);
            }
        }
        assertEquals(expectedSoFar, service.of(0), "matching records from S on are skipped");
        assertEquals(range(0, 20), service.of(1), "a partition without a start is not guarded");
        TestKafka.await("the skipped tail committed with its mark", 30, () -> service.take(live.poll(Duration.ofMillis(100))),
                () -> live.committed(Set.of(p0)).get(p0).offset() == 20);
        CommitMark mark = CommitMark.decode(live.committed(Set.of(p0)).get(p0).metadata());
        assertEquals(CommitMark.skipFrom(rid, firstPaid), mark, "the commit says what was skipped");
        TestKafka.await("a guard record", 30, () -> service.take(live.poll(Duration.ofMillis(100))),
                () -> handovers.readReplay(rid).partitions.get(p0).guard != null);
        HandoverRecord.Guard guardRecord = handovers.readReplay(rid).partitions.get(p0).guard;
        assertEquals(firstPaid, guardRecord.firstSkipped());

        // The replay processed the matching records of [10, 15) and hands over at H = 15.
        handovers.publish(new HandoverRecord.Handover(rid, topic, 0, 15, "caught-up", "replay", System.currentTimeMillis()));
        TestKafka.await("the acknowledgement", 60, () -> {
            service.take(live.poll(Duration.ofMillis(200)));
            live.commitAsync();
        }, () -> {
            PartitionHandover part = handovers.readReplay(rid).partitions.get(p0);
            return part.acknowledged();
        });
        List<Long> expected = new ArrayList<>(expectedSoFar);
        expected.add(15L);
        expected.add(18L); // the matching records at or past H, re-read after the seek back to max(H, F) = 15
        assertEquals(expected, service.of(0), "re-read: matching records from H processed, the others not twice");
        assertEquals(1, live.stats().seeks());
        OffsetAndMetadata committed = live.committed(Set.of(p0)).get(p0);
        assertEquals(20, committed.offset());
        assertNull(CommitMark.decode(committed.metadata()), "past the window: no mark");

        // Every record of partition 0 by exactly one side: the replay has the matching ones in [S, H).
        Set<Long> byReplay = new TreeSet<>(List.of(12L));
        Set<Long> all = new TreeSet<>(service.of(0));
        all.addAll(byReplay);
        assertEquals(new TreeSet<>(range(0, 20)), all);
        assertEquals(service.of(0).size(), Set.copyOf(service.of(0)).size(), "nothing processed twice by the live side");
        assertFalse(service.of(0).contains(12L));

        // After the handover the live side processes everything.
        TestKafka.produce(topic, 0, values(20, 25));
        TestKafka.await("records after the handover", 30, () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).contains(24L));
        assertEquals(range(20, 25), service.of(0).subList(service.of(0).size() - 5, service.of(0).size()));
    }

    private static void assertNull(Object value, String message) {
        org.junit.jupiter.api.Assertions.assertNull(value, message);
    }
}
