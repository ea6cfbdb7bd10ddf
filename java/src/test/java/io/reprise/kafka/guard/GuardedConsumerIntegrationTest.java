package io.reprise.kafka.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.conformance.TestKafka;
import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.CommitMetadata;
import io.reprise.kafka.protocol.CompactJson;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.PartitionHandover;
import io.reprise.kafka.protocol.ReplayHandover;
import io.reprise.kafka.topic.HandoverTopic;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

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
        GuardSettings settings = GuardSettings.from(config)
                .withHandoverTopic(handoverTopic)
                .withMember("test-" + consumers.size())
                .withProgressInterval(Duration.ofMillis(200));
        Map<String, Object> inner = new HashMap<>(config);
        inner.put("key.deserializer", org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        inner.put("value.deserializer", org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        GuardedConsumer<String, String> consumer = new GuardedConsumer<>(
                new KafkaConsumer<>(inner), new StringDeserializer(), new StringDeserializer(), settings);
        consumers.add(consumer);
        return consumer;
    }

    private void publishReplay(String rid, String filter, Map<Integer, Long> starts) throws Exception {
        List<HandoverRecord> records = new ArrayList<>();
        records.add(new HandoverRecord.Replay(
                rid,
                "Handover",
                "reprise-" + rid,
                group,
                List.of(topic),
                (ObjectNode) CompactJson.parse(filter),
                System.currentTimeMillis()));
        starts.forEach((p, s) ->
                records.add(new HandoverRecord.Start(rid, topic, p, s, null, null, false, System.currentTimeMillis())));
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
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                assigned.add(List.copyOf(partitions));
            }
        });
        Service service = new Service();
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        TestKafka.await(
                "the first 20 records",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).size() + service.of(1).size() >= 20);
        live.commitSync();
        assertEquals(Set.of(p0, p1), Set.copyOf(assigned.get(0)), "the service's own listener is called");
        assertEquals(10, live.committed(Set.of(p0)).get(p0).offset());

        // The replay bootstraps with S = 10 on partition 0 only (partition 1 stays the live side's).
        publishReplay(rid, PAID, Map.of(0, 10L));
        TestKafka.await(
                "the guard learns S",
                30,
                () -> service.take(live.poll(Duration.ofMillis(100))),
                () -> live.book().part(p0) != null && live.book().part(p0).rules.start() != null);
        TestKafka.produce(topic, 0, values(10, 20));
        TestKafka.produce(topic, 1, values(10, 20));
        TestKafka.await(
                "records up to 20 seen",
                60,
                () -> {
                    service.take(live.poll(Duration.ofMillis(200)));
                    // The service commits what it processed, explicitly: the guard attaches its mark.
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    service.processed.forEach((p, list) -> offsets.put(
                            new TopicPartition(topic, p), new OffsetAndMetadata(list.get(list.size() - 1) + 1)));
                    live.commitSync(offsets);
                },
                () -> live.position(p0) >= 20 && service.of(1).size() >= 20);
        long firstPaid = 12; // 12 is the first n >= 10 with n % 3 == 0
        List<Long> expectedSoFar = new ArrayList<>(range(0, 10));
        for (long o = 10; o < 20; o++) {
            if (!paid((int) o)) {
                expectedSoFar.add(o);
            }
        }
        assertEquals(expectedSoFar, service.of(0), "matching records from S on are skipped");
        assertEquals(range(0, 20), service.of(1), "a partition without a start is not guarded");
        TestKafka.await(
                "the skipped tail committed with its mark",
                30,
                () -> service.take(live.poll(Duration.ofMillis(100))),
                () -> live.committed(Set.of(p0)).get(p0).offset() == 20);
        CommitMark mark = CommitMetadata.read(live.committed(Set.of(p0)).get(p0).metadata());
        assertEquals(CommitMark.skipFrom(rid, firstPaid), mark, "the commit says what was skipped");
        assertEquals(
                CommitMetadata.store(mark),
                live.committed(Set.of(p0)).get(p0).metadata(),
                "stored as confluent-kafka stores it (JSON and one NUL), so Python readers read it too");
        TestKafka.await(
                "a guard record",
                30,
                () -> service.take(live.poll(Duration.ofMillis(100))),
                () -> handovers.readReplay(rid).partitions.get(p0).guard != null);
        HandoverRecord.Guard guardRecord = handovers.readReplay(rid).partitions.get(p0).guard;
        assertEquals(firstPaid, guardRecord.firstSkipped());

        // The replay processed the matching records of [10, 15) and hands over at H = 15.
        handovers.publish(
                new HandoverRecord.Handover(rid, topic, 0, 15, "caught-up", "replay", System.currentTimeMillis()));
        TestKafka.await(
                "the acknowledgement",
                60,
                () -> {
                    service.take(live.poll(Duration.ofMillis(200)));
                    live.commitAsync();
                },
                () -> {
                    PartitionHandover part =
                            handovers.readReplay(rid).partitions.get(p0);
                    return part.acknowledged();
                });
        List<Long> expected = new ArrayList<>(expectedSoFar);
        expected.add(15L);
        expected.add(18L); // the matching records at or past H, re-read after the seek back to max(H, F) = 15
        assertEquals(expected, service.of(0), "re-read: matching records from H processed, the others not twice");
        assertEquals(1, live.stats().seeks());
        OffsetAndMetadata committed = live.committed(Set.of(p0)).get(p0);
        assertEquals(20, committed.offset());
        assertNull(CommitMetadata.read(committed.metadata()), "past the window: no mark");

        // Every record of partition 0 by exactly one side: the replay has the matching ones in [S, H).
        Set<Long> byReplay = new TreeSet<>(List.of(12L));
        Set<Long> all = new TreeSet<>(service.of(0));
        all.addAll(byReplay);
        assertEquals(new TreeSet<>(range(0, 20)), all);
        assertEquals(
                service.of(0).size(), Set.copyOf(service.of(0)).size(), "nothing processed twice by the live side");
        assertFalse(service.of(0).contains(12L));

        // After the handover the live side processes everything.
        TestKafka.produce(topic, 0, values(20, 25));
        TestKafka.await(
                "records after the handover",
                30,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).contains(24L));
        assertEquals(
                range(20, 25),
                service.of(0).subList(service.of(0).size() - 5, service.of(0).size()));
    }

    @Test
    void aNewOwnerContinuesFromTheMarkAfterARebalance() throws Exception {
        String rid = TestKafka.unique("shop/rebalance");
        TestKafka.produce(topic, 0, values(0, 10));
        TestKafka.produce(topic, 1, values(0, 10));
        publishReplay(rid, PAID, Map.of(0, 0L, 1, 0L));
        Service first = new Service();
        Service second = new Service();
        GuardedConsumer<String, String> one = guarded(Map.of());
        one.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                one.commitSync(); // the service commits on revoke, through the guard
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
        });
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        TestKafka.await(
                "the first owner reads both partitions",
                60,
                () -> {
                    first.take(one.poll(Duration.ofMillis(200)));
                    one.commitSync();
                },
                () -> one.assignment().size() == 2
                        && one.position(p0) >= 10
                        && one.position(p1) >= 10
                        && one.committed(Set.of(p0)).get(p0) != null
                        && one.committed(Set.of(p0)).get(p0).offset() == 10
                        && one.committed(Set.of(p1)).get(p1) != null
                        && one.committed(Set.of(p1)).get(p1).offset() == 10);
        assertEquals(
                CommitMark.skipFrom(rid, 0),
                CommitMetadata.read(one.committed(Set.of(p0)).get(p0).metadata()));

        GuardedConsumer<String, String> two = guarded(Map.of());
        two.subscribe(List.of(topic));
        TestKafka.await(
                "the rebalance gives each consumer one partition",
                90,
                () -> {
                    first.take(one.poll(Duration.ofMillis(100)));
                    second.take(two.poll(Duration.ofMillis(100)));
                },
                () -> one.assignment().size() == 1
                        && two.assignment().size() == 1
                        && two.book().part(two.assignment().iterator().next()) != null
                        && !two.book().part(two.assignment().iterator().next()).held());
        TopicPartition moved = two.assignment().iterator().next();
        assertEquals(0L, two.book().part(moved).rules.firstSkipped(), "the new owner restored F from the mark");

        handovers.publish(
                new HandoverRecord.Handover(rid, topic, 0, 6, "caught-up", "replay", System.currentTimeMillis()),
                new HandoverRecord.Handover(rid, topic, 1, 6, "caught-up", "replay", System.currentTimeMillis()));
        TestKafka.await(
                "both partitions acknowledged",
                90,
                () -> {
                    first.take(one.poll(Duration.ofMillis(100)));
                    one.commitSync();
                    second.take(two.poll(Duration.ofMillis(100)));
                    two.commitSync();
                },
                () -> {
                    ReplayHandover state = handovers.readReplay(rid);
                    return state.partitions.get(p0).acknowledged()
                            && state.partitions.get(p1).acknowledged();
                });
        for (int p = 0; p < 2; p++) {
            List<Long> all = new ArrayList<>(first.of(p));
            all.addAll(second.of(p));
            List<Long> expected = new ArrayList<>();
            for (long o = 0; o < 10; o++) {
                if (!paid((int) o) || o >= 6) {
                    expected.add(o);
                }
            }
            assertEquals(expected, new ArrayList<>(new TreeSet<>(all)), "partition " + p + ": the live side's records");
            assertEquals(expected.size(), all.size(), "partition " + p + ": none processed twice");
        }
    }

    @Test
    void theServicesPausesSurviveTheGuardsHolds() throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        TestKafka.produce(topic, 0, values(0, 5));
        TestKafka.produce(topic, 1, values(0, 5));
        GuardedConsumer<String, String> live = guarded(Map.of());
        live.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                live.pause(List.of(p1)); // the service pauses a partition while the guard holds all of them
            }
        });
        Service service = new Service();
        TestKafka.await(
                "partition 0 read, the guard released everything",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).size() >= 5
                        && live.book().part(p1) != null
                        && !live.book().part(p1).held());
        for (int i = 0; i < 5; i++) {
            service.take(live.poll(Duration.ofMillis(100)));
        }
        assertTrue(service.of(1).isEmpty(), "the guard's release does not resume what the service paused");
        assertEquals(Set.of(p1), live.paused());
        live.resume(List.of(p1));
        TestKafka.await(
                "partition 1 after the service resumed it",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(1).size() >= 5);
        assertEquals(range(0, 5), service.of(1));
        assertEquals(Set.of(), live.paused());
    }

    @Test
    void automaticCommitsAreTheGuardsWithItsMarks() throws Exception {
        String rid = TestKafka.unique("shop/auto-commit");
        TopicPartition p0 = new TopicPartition(topic, 0);
        publishReplay(rid, PAID, Map.of(0, 0L));
        TestKafka.produce(topic, 0, values(0, 10));
        Map<String, Object> config = TestKafka.connection();
        config.put("group.id", group);
        config.put("auto.offset.reset", "earliest");
        config.put("auto.commit.interval.ms", 100); // enable.auto.commit left at Kafka's default: true
        GuardedConsumer<String, String> live = GuardedConsumer.create(
                config,
                new StringDeserializer(),
                new StringDeserializer(),
                settings -> settings.withHandoverTopic(handoverTopic));
        consumers.add(live);
        live.subscribe(List.of(topic));
        Service service = new Service();
        TestKafka.await(
                "an automatic commit past every record",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> {
                    OffsetAndMetadata c = live.committed(Set.of(p0)).get(p0);
                    return c != null && c.offset() == 10;
                });
        assertEquals(List.of(1L, 2L, 4L, 5L, 7L, 8L), service.of(0));
        assertEquals(
                CommitMark.skipFrom(rid, 0),
                CommitMetadata.read(live.committed(Set.of(p0)).get(p0).metadata()),
                "the guard's automatic commit carries the mark");
    }

    @Test
    void theServicesSeekDeliversAgainWithTheSameVerdictsAndAsyncCommitsCarryTheMark() throws Exception {
        String rid = TestKafka.unique("shop/seek");
        TopicPartition p0 = new TopicPartition(topic, 0);
        publishReplay(rid, PAID, Map.of(0, 0L));
        TestKafka.produce(topic, 0, values(0, 10));
        GuardedConsumer<String, String> live = guarded(Map.of());
        live.subscribe(List.of(topic));
        Service service = new Service();
        TestKafka.await(
                "every record seen",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> live.assignment().contains(p0) && live.position(p0) >= 10);
        assertEquals(List.of(1L, 2L, 4L, 5L, 7L, 8L), service.of(0));
        // An error handler delivers from 4 again (the service failed there): the guard neither skips those records
        // nor commits past them on the service's behalf.
        live.seek(p0, 4);
        TestKafka.await(
                "delivered again from 4",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).size() >= 10);
        assertEquals(
                List.of(1L, 2L, 4L, 5L, 7L, 8L, 4L, 5L, 7L, 8L), service.of(0), "the same verdicts the second time");
        Map<TopicPartition, OffsetAndMetadata> sent = new HashMap<>();
        boolean[] answered = {false};
        live.commitAsync(Map.of(p0, new OffsetAndMetadata(9, "the service's own")), (offsets, error) -> {
            sent.putAll(offsets);
            answered[0] = error == null;
        });
        TestKafka.await("the async commit answered", 30, () -> live.poll(Duration.ofMillis(100)), () -> answered[0]);
        assertEquals(
                CommitMark.skipFrom(rid, 0),
                CommitMetadata.read(sent.get(p0).metadata()),
                "the guard's mark replaced it");
        assertEquals(
                CommitMark.skipFrom(rid, 0),
                CommitMetadata.read(live.committed(Set.of(p0)).get(p0).metadata()));
    }

    // -- bad input (HANDOVER.md section 6): a clear log line, a guard record naming the problem, nothing lost

    private HandoverRecord.Guard awaitProblem(
            GuardedConsumer<String, String> live, Service service, String rid, TopicPartition tp) {
        HandoverRecord.Guard[] found = new HandoverRecord.Guard[1];
        TestKafka.await(
                "a guard record naming the problem", 60, () -> service.take(live.poll(Duration.ofMillis(200))), () -> {
                    PartitionHandover part =
                            handovers.readReplay(rid).partitions.get(tp);
                    found[0] = part == null ? null : part.guard;
                    return found[0] != null && found[0].problem() != null;
                });
        return found[0];
    }

    @Test
    void malformedHandoverRecord() throws Exception {
        String rid = TestKafka.unique("shop/bad-record");
        TopicPartition p0 = new TopicPartition(topic, 0);
        publishReplay(rid, PAID, Map.of(0, 0L));
        GuardedConsumer<String, String> live = guarded(Map.of());
        live.subscribe(List.of(topic));
        Service service = new Service();
        TestKafka.await(
                "the guard learns S",
                60,
                () -> service.take(live.poll(Duration.ofMillis(100))),
                () -> live.book().part(p0) != null && live.book().part(p0).rules.start() != null);
        // H written by a broken writer: an offset as a string.
        try (var producer = TestKafka.producer()) {
            producer.send(new org.apache.kafka.clients.producer.ProducerRecord<>(
                            handoverTopic,
                            0,
                            io.reprise.kafka.protocol.HandoverKey.of(rid, "handover", topic, 0)
                                    .encode(),
                            "{\"v\":1,\"kind\":\"handover\",\"offset\":\"4\"}"
                                    .getBytes(java.nio.charset.StandardCharsets.UTF_8)))
                    .get();
        }
        HandoverRecord.Guard report = awaitProblem(live, service, rid, p0);
        assertEquals("unreadable-handover-record:bad-field", report.problem());
        TestKafka.produce(topic, 0, values(0, 10));
        TestKafka.await(
                "every record",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).size() >= 10);
        assertEquals(range(0, 10), service.of(0), "nothing is skipped for a replay the guard cannot read");
        assertEquals(0, live.stats().skipped());
    }

    @Test
    void commitMarkOfANewerFormatVersion() throws Exception {
        String rid = TestKafka.unique("shop/newer-mark");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TestKafka.produce(topic, 0, values(0, 10));
        // A newer guard owned p0 and committed 5 with a mark this one cannot read.
        Map<String, Object> config = TestKafka.connection();
        config.put("group.id", group);
        config.put("key.deserializer", org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> previous = new KafkaConsumer<>(config)) {
            previous.assign(List.of(p0));
            previous.commitSync(Map.of(
                    p0, new OffsetAndMetadata(5, "{\"reprise\":2,\"replay\":\"" + rid + "\",\"skipped\":[[0,5]]}")));
        }
        publishReplay(rid, PAID, Map.of(0, 0L));
        GuardedConsumer<String, String> live = guarded(Map.of());
        live.subscribe(List.of(topic));
        Service service = new Service();
        HandoverRecord.Guard report = awaitProblem(live, service, rid, p0);
        assertEquals("unusable-commit-mark:newer-version", report.problem());
        TestKafka.await(
                "records up to 10 seen",
                60,
                () -> {
                    service.take(live.poll(Duration.ofMillis(200)));
                    live.commitSync();
                },
                () -> live.position(p0) >= 10);
        assertEquals(List.of(5L, 7L, 8L), service.of(0), "from the committed offset: the matching records skipped");
        // What the previous owner skipped below 5 is unknown, so the guard counts everything from S as skipped:
        // H = 3 brings a re-read of [3, 10) for the matching records, instead of a loss.
        handovers.publish(
                new HandoverRecord.Handover(rid, topic, 0, 3, "caught-up", "replay", System.currentTimeMillis()));
        TestKafka.await(
                "the re-read and the acknowledgement",
                60,
                () -> {
                    service.take(live.poll(Duration.ofMillis(200)));
                    live.commitSync();
                },
                () -> handovers.readReplay(rid).partitions.get(p0).acknowledged());
        assertEquals(List.of(5L, 7L, 8L, 3L, 6L, 9L), service.of(0));
    }

    @Test
    void filterTheGuardCannotEvaluate() throws Exception {
        String rid = TestKafka.unique("shop/new-filter");
        TopicPartition p0 = new TopicPartition(topic, 0);
        publishReplay(rid, "{\"json\":[{\"path\":\"paid\",\"regex\":\"t.*\"}]}", Map.of(0, 0L));
        TestKafka.produce(topic, 0, values(0, 10));
        GuardedConsumer<String, String> live = guarded(Map.of());
        live.subscribe(List.of(topic));
        Service service = new Service();
        HandoverRecord.Guard report = awaitProblem(live, service, rid, p0);
        assertEquals("unevaluable-filter:bad-operator", report.problem());
        TestKafka.await(
                "every record",
                60,
                () -> service.take(live.poll(Duration.ofMillis(200))),
                () -> service.of(0).size() >= 10);
        assertEquals(range(0, 10), service.of(0), "a filter the guard cannot evaluate: it skips nothing");
    }

    private static void assertNull(Object value, String message) {
        org.junit.jupiter.api.Assertions.assertNull(value, message);
    }
}
