package io.reprise.kafka.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.conformance.TestKafka;
import io.reprise.kafka.protocol.CompactJson;
import io.reprise.kafka.protocol.HandoverKey;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.HandoverWire;
import io.reprise.kafka.protocol.PartitionHandover;
import io.reprise.kafka.topic.HandoverTopic;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * Records no reader can be broken by (finding H3; HANDOVER.md section 2 "Limits", section 4 steps 5 and 8): the
 * same records as the Python reference's {@code tests/integration/replay_worker/test_poison_json.py} and the Go
 * guard's {@code TestPoisonRecords}, so the three guards are seen to agree on which records the replay covers. A
 * key and a value nested 5000 deep and a 10 MB value sit between the replay's {@code start} and its {@code
 * handover} record, and a 5000-deep and a 10 MB value in the live topic. The guard learns H, hands exactly the
 * records the replay does not cover, acknowledges H, and counts the three records it could not read.
 */
class PoisonRecordsIntegrationTest {
    private static final int RECORDS = 30;
    private static final int DEEP_AT = 20;
    private static final int BIG_AT = 21;
    private static final int H = 22;
    private static final int TEN_MB = 10_000_000;
    /** max.message.bytes of the test's topics, and the producer's max.request.size: room for a 10 MB record. */
    private static final String BIG = "12000000";
    /** Two values, so the single-field prefix rule does not apply and a value holding "even" is parsed. */
    private static final String FILTER = "{\"json\":[{\"path\":\"kind\",\"in\":[\"even\",\"none\"]}]}";

    static String liveValue(int n) {
        if (n == DEEP_AT) { // holds the wanted bytes, so it reaches the parser: 5000 levels
            return "{\"kind\":\"odd\",\"note\":\"even\",\"deep\":" + "[".repeat(5000) + "]".repeat(5000) + "}";
        }
        if (n == BIG_AT) { // valid JSON whose kind is odd, but above the size limit: undecodable, so covered
            String head = "{\"kind\":\"odd\",\"note\":\"even\",\"pad\":\"";
            return head + "x".repeat(TEN_MB - head.length() - 2) + "\"}";
        }
        return "{\"n\":" + n + ",\"kind\":\"" + (n % 2 == 0 ? "even" : "odd") + "\"}";
    }

    private static void produce(String topic, List<byte[][]> records) {
        Map<String, Object> config = TestKafka.connection();
        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());
        config.put("acks", "all");
        config.put("max.request.size", Integer.parseInt(BIG));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (byte[][] r : records) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, r[0], r[1])));
            }
            TestKafka.written(topic, sent);
        }
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void aGuardReadsPastPoisonRecordsOnBothTopics() throws Exception {
        String topic = TestKafka.unique("poison");
        String handoverTopic = TestKafka.unique("handover");
        String group = TestKafka.unique("live");
        String rid = TestKafka.unique("shop/poison");
        TestKafka.createTopic(topic, 1, Map.of("max.message.bytes", BIG));
        TestKafka.createTopic(handoverTopic, 1, Map.of("cleanup.policy", "compact", "max.message.bytes", BIG));
        List<byte[][]> live = new ArrayList<>();
        for (int n = 0; n < RECORDS; n++) {
            live.add(new byte[][] {utf8(Integer.toString(n)), utf8(liveValue(n))});
        }
        produce(topic, live);

        try (HandoverTopic handovers = new HandoverTopic(TestKafka.connection(), handoverTopic)) {
            handovers.ensure(false);
            long now = System.currentTimeMillis();
            handovers.publish(List.of(
                    new HandoverRecord.Replay(
                            rid,
                            "Handover",
                            "replay-" + group,
                            group,
                            List.of(topic),
                            (ObjectNode) CompactJson.parse(FILTER),
                            now),
                    new HandoverRecord.Start(rid, topic, 0, 0, null, null, false, now)));
            HandoverWire.Encoded h =
                    HandoverWire.encode(new HandoverRecord.Handover(rid, topic, 0, H, "caught-up", "test", now));
            // The 10 MB record comes alone in its fetch; the 5000-deep key (the review's A3) and H in the next one.
            produce(
                    handoverTopic,
                    List.of(
                            new byte[][] {
                                HandoverKey.of(rid, "progress", topic, 0).encode(),
                                utf8("{\"v\":1,\"kind\":\"progress\",\"deep\":" + "[".repeat(5000) + "]".repeat(5000)
                                        + "}")
                            },
                            new byte[][] {
                                HandoverKey.of(rid, "guard", topic, 0).encode(),
                                utf8("{\"v\":1,\"kind\":\"guard\",\"pad\":\"" + "x".repeat(TEN_MB) + "\"}")
                            },
                            new byte[][] {utf8("[".repeat(5000)), utf8("{}")},
                            new byte[][] {h.key(), h.value()}));

            Map<String, Object> config = TestKafka.connection();
            config.put("group.id", group);
            config.put("enable.auto.commit", false);
            config.put("auto.offset.reset", "earliest");
            GuardSettings settings = GuardSettings.from(config)
                    .withHandoverTopic(handoverTopic)
                    .withMember("live-poison")
                    .withProgressInterval(Duration.ofMillis(200));
            Map<String, Object> inner = new HashMap<>(config);
            inner.put("key.deserializer", ByteArrayDeserializer.class.getName());
            inner.put("value.deserializer", ByteArrayDeserializer.class.getName());
            Map<Long, Integer> handed = new TreeMap<>();
            List<Long> expected = new ArrayList<>();
            for (long n = 0; n < RECORDS; n++) {
                if (n >= H || (n % 2 == 1 && n != DEEP_AT && n != BIG_AT)) {
                    expected.add(n);
                }
            }
            try (GuardedConsumer<String, String> guard = new GuardedConsumer<>(
                    new KafkaConsumer<>(inner), new StringDeserializer(), new StringDeserializer(), settings)) {
                guard.subscribe(List.of(topic));
                Runnable step = () -> {
                    for (ConsumerRecord<String, String> r : guard.poll(Duration.ofMillis(200))) {
                        handed.merge(r.offset(), 1, Integer::sum);
                    }
                    guard.commitSync();
                };
                TestKafka.await(
                        "the records the replay does not cover", 120, step, () -> handed.size() >= expected.size());
                assertEquals(
                        expected,
                        new ArrayList<>(handed.keySet()),
                        "the guard handed other records than the replay does not cover");
                assertEquals(
                        List.of(), handed.values().stream().filter(c -> c != 1).toList(), "a record handed twice");
                TestKafka.await("the guard acknowledges H (it learned H after the poison records)", 60, step, () -> {
                    PartitionHandover part = handovers
                            .readReplay(rid)
                            .partitions
                            .get(new org.apache.kafka.common.TopicPartition(topic, 0));
                    return part != null && part.acknowledged() && part.ack.offset() == H;
                });
                assertEquals(3, guard.stats().handoverRecordsFailed(), "the records the follower could not apply");
            }
        }
    }
}
