package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.HandoverRecord;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/** The replay role on the real broker: S once, Drain and Handover finishes with their marks, poison records. */
class ReplayRoleBrokerTest {

    /** Records processed, per "partition/offset", counted. */
    static final class Ledger implements RecordsHandler<String, String> {
        final Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();

        @Override
        public void handle(List<ConsumerRecord<String, String>> records) {
            for (ConsumerRecord<String, String> r : records) {
                seen.computeIfAbsent(r.partition() + "/" + r.offset(), k -> new AtomicInteger())
                        .incrementAndGet();
            }
        }

        int total() {
            return seen.values().stream().mapToInt(AtomicInteger::get).sum();
        }
    }

    static Map<String, String> env(String replayId, String topic, String group, String handoverTopic, String... more) {
        Map<String, String> env = new HashMap<>(Map.of(
                "REPRISE_BOOTSTRAP_SERVERS",
                RealKafka.bootstrap(),
                "REPRISE_REPLAY_ID",
                replayId,
                "REPRISE_TOPICS",
                topic,
                "REPRISE_REPLAY_GROUP",
                group,
                "REPRISE_HANDOVER_TOPIC",
                handoverTopic,
                "REPRISE_METRICS_PORT",
                "0",
                "REPRISE_CHECK_INTERVAL",
                "0.2",
                "REPRISE_EXIT_WHEN_DONE",
                "true"));
        for (int i = 0; i < more.length; i += 2) {
            env.put(more[i], more[i + 1]);
        }
        return env;
    }

    static <K, V> ReplayRole<K, V> role(
            Map<String, String> env, Deserializer<K> k, Deserializer<V> v, RecordsHandler<K, V> handler) {
        return ReplayRole.create(env, Map.of(), k, v, handler);
    }

    static ReplayRole<String, String> role(Map<String, String> env, RecordsHandler<String, String> handler) {
        return role(env, new StringDeserializer(), new StringDeserializer(), handler);
    }

    @Test
    void replicasStartingTogetherResolveTheStartOnceAndProcessEveryRecordOnce() throws Exception {
        String topic = RealKafka.unique("orders");
        String handover = RealKafka.unique("handover");
        RealKafka.createTopic(topic, 4);
        RealKafka.produce(topic, 4, 200);
        String replayId = "ns/" + topic + "/uid";
        Ledger ledger = new Ledger();
        ExecutorService pool = Executors.newFixedThreadPool(3);
        List<Future<Integer>> runs = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                ReplayRole<String, String> replica = role(
                        env(
                                replayId,
                                topic,
                                topic + "-replay",
                                handover,
                                "REPRISE_MEMBER_NAME",
                                "replica-" + i,
                                "REPRISE_BATCH_SIZE",
                                "50"),
                        ledger);
                runs.add(pool.submit(replica::run));
            }
            for (Future<Integer> run : runs) {
                assertEquals(ReplayRole.EXIT_OK, run.get(120, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
        List<HandoverRecord> records = RealKafka.handoverRecords(handover, replayId);
        // One bootstrap transaction won: one replay record and one start record per partition were ever written.
        assertEquals(
                1,
                records.stream().filter(r -> r instanceof HandoverRecord.Replay).count());
        assertEquals(
                4,
                records.stream().filter(r -> r instanceof HandoverRecord.Start).count());
        for (HandoverRecord r : records) {
            if (r instanceof HandoverRecord.Start start) {
                assertEquals(0, start.offset());
            }
        }
        assertEquals(800, ledger.seen.size());
        assertEquals(800, ledger.total(), "a record was processed twice: " + ledger.seen);
        Map<TopicPartition, OffsetAndMetadata> committed = RealKafka.committed(topic + "-replay");
        for (int p = 0; p < 4; p++) {
            OffsetAndMetadata om = committed.get(new TopicPartition(topic, p));
            assertEquals(200, om.offset());
            assertEquals("end-of-partition", FinishMark.decode(om.metadata()).finished());
        }
    }

    @Test
    void drainFinishesEachPartitionAtItsEndWithTheMarkThenPublishesH() throws Exception {
        String topic = RealKafka.unique("drain");
        String handover = RealKafka.unique("handover");
        RealKafka.createTopic(topic, 2);
        RealKafka.produce(topic, 2, 30);
        String replayId = "ns/" + topic + "/uid";
        Ledger ledger = new Ledger();
        // A start 10 records in: S comes from the spec, and nothing before it is processed. Throttled to last a
        // few seconds, so progress records are published on the way.
        ReplayRole<String, String> replay = role(
                env(
                        replayId,
                        topic,
                        topic + "-replay",
                        handover,
                        "REPRISE_START",
                        "{\"offsets\":{\"" + topic + "\":{\"0\":10,\"1\":10}}}",
                        "REPRISE_BATCH_SIZE",
                        "5",
                        "REPRISE_MAX_RECORDS_PER_SECOND",
                        "10"),
                ledger);
        assertEquals(ReplayRole.EXIT_OK, replay.run());
        assertEquals(40, ledger.total());
        assertTrue(ledger.seen.keySet().stream().allMatch(k -> Integer.parseInt(k.split("/")[1]) >= 10));
        Map<TopicPartition, OffsetAndMetadata> committed = RealKafka.committed(topic + "-replay");
        List<HandoverRecord> records = RealKafka.handoverRecords(handover, replayId);
        for (int p = 0; p < 2; p++) {
            OffsetAndMetadata om = committed.get(new TopicPartition(topic, p));
            CommitMark mark = FinishMark.decode(om.metadata());
            assertEquals(30, om.offset());
            assertEquals(replayId, mark.replayId());
            assertEquals("end-of-partition", mark.finished());
            int partition = p;
            HandoverRecord.Handover h = records.stream()
                    .filter(r -> r instanceof HandoverRecord.Handover)
                    .map(r -> (HandoverRecord.Handover) r)
                    .filter(r -> r.partition() == partition)
                    .findFirst()
                    .orElse(null);
            assertNotNull(h, "no handover record for partition " + p);
            assertEquals(30, h.offset());
            assertEquals("end-of-partition", h.reason());
        }
        // Progress records were published while it ran (advisory, for the operator's status).
        assertTrue(records.stream().anyMatch(r -> r instanceof HandoverRecord.Progress));
    }

    @Test
    void underSteadyTrafficAPartitionFinishesAtTheEndItsBatchHeld() throws Exception {
        String topic = RealKafka.unique("steady");
        String handover = RealKafka.unique("handover");
        RealKafka.createTopic(topic, 1);
        RealKafka.produce(topic, 1, 100);
        String replayId = "ns/" + topic + "/uid";
        Ledger ledger = new Ledger();
        AtomicInteger calls = new AtomicInteger();
        int trafficCalls = 60;
        // Steady traffic (issue 32 item 6): while the handler runs, 5 more records arrive, for its first 60 calls
        // (300 records in all). The end of the partition moves on during every handler call; the replay must still
        // finish at the end-of-partition its batch held (HANDOVER.md section 5.5), while the records still arrive.
        // A replay that compares its position with an end offset read after the handler finishes only once the
        // traffic has stopped, after 60 calls, at offset 400.
        RecordsHandler<String, String> handler = records -> {
            if (calls.incrementAndGet() <= trafficCalls) {
                try {
                    RealKafka.produce(topic, 1, 5, (p, i) -> "late-" + i);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }
            ledger.handle(records);
        };
        ReplayRole<String, String> replay =
                role(env(replayId, topic, topic + "-replay", handover, "REPRISE_BATCH_SIZE", "5"), handler);
        assertEquals(ReplayRole.EXIT_OK, replay.run());
        HandoverRecord.Handover h = RealKafka.handoverRecords(handover, replayId).stream()
                .filter(r -> r instanceof HandoverRecord.Handover)
                .map(r -> (HandoverRecord.Handover) r)
                .findFirst()
                .orElseThrow();
        assertEquals("end-of-partition", h.reason());
        assertTrue(
                calls.get() < trafficCalls,
                "the replay finished only after the traffic stopped: " + calls.get() + " handler calls, H "
                        + h.offset());
        // Everything below H processed once, nothing at or above it (it belongs to the live side).
        assertEquals(h.offset(), ledger.seen.size());
        assertEquals(h.offset(), ledger.total());
        for (long offset = 0; offset < h.offset(); offset++) {
            assertNotNull(ledger.seen.get("0/" + offset), "offset " + offset + " below H was not processed");
        }
        OffsetAndMetadata om = RealKafka.committed(topic + "-replay").get(new TopicPartition(topic, 0));
        assertEquals(h.offset(), om.offset());
        assertEquals("end-of-partition", FinishMark.decode(om.metadata()).finished());
    }

    @Test
    void aRestartedReplicaSeesTheFinishedMarkAndPublishesHAgainWithoutReading() throws Exception {
        String topic = RealKafka.unique("again");
        String handover = RealKafka.unique("handover");
        RealKafka.createTopic(topic, 1);
        RealKafka.produce(topic, 1, 20);
        String replayId = "ns/" + topic + "/uid";
        Ledger first = new Ledger();
        assertEquals(
                0,
                role(env(replayId, topic, topic + "-replay", handover), first).run());
        assertEquals(20, first.total());
        RealKafka.produce(topic, 1, 5); // records after H are the live side's
        Ledger second = new Ledger();
        assertEquals(
                0,
                role(env(replayId, topic, topic + "-replay", handover), second).run());
        assertEquals(0, second.total());
        long handovers = RealKafka.handoverRecords(handover, replayId).stream()
                .filter(r -> r instanceof HandoverRecord.Handover h && h.offset() == 20)
                .count();
        assertEquals(2, handovers, "the second replica publishes the same H again");
    }

    @Test
    void handoverStopsWhereTheLiveGroupIsAndPublishesHWithTheFinishedMark() throws Exception {
        stopsAtTheLiveGroup("Handover", "caught-up");
    }

    @Test
    void parallelStopsAtTheLiveGroupsCommittedOffsets() throws Exception {
        stopsAtTheLiveGroup("Parallel", "live-offset");
    }

    private void stopsAtTheLiveGroup(String mode, String reason) throws Exception {
        String topic = RealKafka.unique(mode.toLowerCase());
        String handover = RealKafka.unique("handover-topic");
        String live = topic + "-live";
        RealKafka.createTopic(topic, 2);
        RealKafka.produce(topic, 2, 400);
        // The live group has processed up to 100 in partition 0 and 300 in partition 1.
        commit(live, Map.of(new TopicPartition(topic, 0), 100L, new TopicPartition(topic, 1), 300L));
        String replayId = "ns/" + topic + "/uid";
        Ledger ledger = new Ledger();
        // Slow enough that the live group's offsets are read long before the end of either partition.
        ReplayRole<String, String> replay = role(
                env(
                        replayId,
                        topic,
                        topic + "-replay",
                        handover,
                        "REPRISE_MODE",
                        mode,
                        "REPRISE_LIVE_GROUP",
                        live,
                        "REPRISE_BATCH_SIZE",
                        "10",
                        "REPRISE_MAX_RECORDS_PER_SECOND",
                        "100"),
                ledger);
        assertEquals(0, replay.run());
        Map<TopicPartition, OffsetAndMetadata> committed = RealKafka.committed(topic + "-replay");
        List<HandoverRecord> records = RealKafka.handoverRecords(handover, replayId);
        Map<Integer, Long> expectedLive = Map.of(0, 100L, 1, 300L);
        for (int p = 0; p < 2; p++) {
            OffsetAndMetadata om = committed.get(new TopicPartition(topic, p));
            CommitMark mark = FinishMark.decode(om.metadata());
            assertEquals(reason, mark.finished());
            assertTrue(
                    om.offset() >= expectedLive.get(p) && om.offset() < expectedLive.get(p) + 20, "H " + om.offset());
            int partition = p;
            HandoverRecord.Handover h = records.stream()
                    .filter(r -> r instanceof HandoverRecord.Handover)
                    .map(r -> (HandoverRecord.Handover) r)
                    .filter(r -> r.partition() == partition)
                    .findFirst()
                    .orElseThrow();
            assertEquals(om.offset(), h.offset());
            assertEquals(reason, h.reason());
            // R processed exactly [S, H): nothing at or above H.
            for (long o = 0; o < 400; o++) {
                AtomicInteger count = ledger.seen.get(p + "/" + o);
                assertEquals(
                        o < h.offset() ? 1 : 0, count == null ? 0 : count.get(), "partition " + p + " offset " + o);
            }
        }
        assertTrue(records.stream()
                .anyMatch(r -> r instanceof HandoverRecord.Replay rr
                        && rr.mode().equals(mode)
                        && live.equals(rr.liveGroup())));
    }

    @Test
    void poisonRecordsGoToTheDeadLetterTopicAndTheRestIsDelivered() throws Exception {
        String topic = RealKafka.unique("poison");
        String handover = RealKafka.unique("handover");
        String dlq = topic + "-dlq";
        RealKafka.createTopic(topic, 1);
        RealKafka.createTopic(dlq, 1);
        RealKafka.produce(topic, 1, 50, (p, i) -> i == 7 ? "throws" : i == 23 ? "undecodable" : "fine-" + i);
        String replayId = "ns/" + topic + "/uid";
        List<String> delivered = new ArrayList<>();
        Deserializer<String> strict = (t, data) -> {
            String text = new String(data, StandardCharsets.UTF_8);
            if (text.equals("undecodable")) {
                throw new IllegalArgumentException("not a value of ours");
            }
            return text;
        };
        RecordsHandler<String, String> handler = records -> {
            for (ConsumerRecord<String, String> r : records) {
                if (r.value().equals("throws")) {
                    throw new IllegalStateException("cannot apply " + r.offset());
                }
            }
            records.forEach(r -> delivered.add(r.value()));
        };
        ReplayRole<String, String> replay = role(
                env(
                        replayId,
                        topic,
                        topic + "-replay",
                        handover,
                        "REPRISE_DLQ_TOPIC",
                        dlq,
                        "REPRISE_HANDLER_RETRIES",
                        "1"),
                new StringDeserializer(),
                strict,
                handler);
        assertEquals(0, replay.run());
        assertEquals(48, delivered.stream().distinct().count());
        assertTrue(delivered.stream().allMatch(v -> v.startsWith("fine-")));
        List<ConsumerRecord<byte[], byte[]>> letters = RealKafka.readAll(dlq);
        assertEquals(2, letters.size());
        Map<String, String> reasons = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> letter : letters) {
            assertEquals(
                    topic,
                    RealKafka.text(
                            letter.headers().lastHeader("reprise.source.topic").value()));
            assertEquals(
                    replayId,
                    RealKafka.text(letter.headers().lastHeader("reprise.replay").value()));
            reasons.put(
                    RealKafka.text(
                            letter.headers().lastHeader("reprise.source.offset").value()),
                    RealKafka.text(letter.headers().lastHeader("reprise.error").value()));
        }
        assertTrue(reasons.get("7").startsWith("handler threw IllegalStateException"), reasons.toString());
        assertTrue(reasons.get("23").startsWith("undecodable: IllegalArgumentException"), reasons.toString());
        assertEquals(
                50,
                RealKafka.committed(topic + "-replay")
                        .get(new TopicPartition(topic, 0))
                        .offset());
    }

    @Test
    void withoutADeadLetterTopicPoisonIsCountedAndSkipped() throws Exception {
        String topic = RealKafka.unique("skip");
        String handover = RealKafka.unique("handover");
        RealKafka.createTopic(topic, 1);
        RealKafka.produce(topic, 1, 10, (p, i) -> i == 4 ? "throws" : "fine-" + i);
        List<String> delivered = new ArrayList<>();
        RecordsHandler<String, String> handler = records -> {
            if (records.stream().anyMatch(r -> r.value().equals("throws"))) {
                throw new IllegalStateException("no");
            }
            records.forEach(r -> delivered.add(r.value()));
        };
        ReplayRole<String, String> replay =
                role(env("ns/" + topic, topic, topic + "-replay", handover, "REPRISE_HANDLER_RETRIES", "0"), handler);
        assertEquals(0, replay.run());
        assertEquals(9, delivered.size());
        assertEquals(
                10,
                RealKafka.committed(topic + "-replay")
                        .get(new TopicPartition(topic, 0))
                        .offset());
    }

    static void commit(String group, Map<TopicPartition, Long> offsets) {
        Map<String, Object> config = new HashMap<>(RealKafka.admin());
        config.put("group.id", group);
        config.put("key.deserializer", StringDeserializer.class.getName());
        config.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
            offsets.forEach((tp, o) -> commit.put(tp, new OffsetAndMetadata(o)));
            consumer.commitSync(commit);
        }
    }
}
