package io.reprise.kafka.topic;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.reprise.kafka.conformance.TestKafka;
import io.reprise.kafka.protocol.CompactJson;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.protocol.HandoverView;
import io.reprise.kafka.protocol.ReplayHandover;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** HandoverTopic and HandoverFollower against the real broker. */
class HandoverTopicIntegrationTest {
    private static final String RID = "shop/orders-fix/1";

    private static HandoverRecord.Replay replay(String rid) {
        return new HandoverRecord.Replay(
                rid,
                "Handover",
                "reprise-orders-fix",
                "orders-service",
                List.of("orders"),
                CompactJson.NODES.objectNode(),
                1);
    }

    @Test
    void createsPublishesReadsForcesAndTombstones() throws Exception {
        String name = TestKafka.unique("handover");
        try (HandoverTopic topic = new HandoverTopic(TestKafka.connection(), name)) {
            assertThrows(HandoverTopicException.class, () -> topic.ensure(false));
            assertTrue(topic.read().replays().isEmpty(), "a missing topic reads as no replay");
            topic.ensure(true);
            topic.ensure(true); // idempotent
            try (Admin admin = Admin.create(TestKafka.connection())) {
                TopicDescription found = admin.describeTopics(List.of(name))
                        .allTopicNames()
                        .get(30, TimeUnit.SECONDS)
                        .get(name);
                assertEquals(1, found.partitions().size());
                String policy = admin.describeConfigs(List.of(new org.apache.kafka.common.config.ConfigResource(
                                org.apache.kafka.common.config.ConfigResource.Type.TOPIC, name)))
                        .all()
                        .get(30, TimeUnit.SECONDS)
                        .values()
                        .iterator()
                        .next()
                        .get("cleanup.policy")
                        .value();
                assertEquals("compact,delete", policy); // compacted, with the size cap (HANDOVER.md section 2)
            }
            topic.publish(
                    replay(RID),
                    new HandoverRecord.Start(RID, "orders", 0, 10, null, null, false, 2),
                    new HandoverRecord.Start(RID, "orders", 1, 20, null, null, false, 2),
                    new HandoverRecord.Handover(RID, "orders", 1, 25, "caught-up", "replay", 3));
            ReplayHandover state = topic.readReplay(RID);
            assertTrue(state.bootstrapped());
            assertEquals(
                    10L, state.partitions.get(new TopicPartition("orders", 0)).startOffset());
            assertEquals(
                    "replaying",
                    state.partitions.get(new TopicPartition("orders", 0)).state());
            assertEquals(
                    "handed-over",
                    state.partitions.get(new TopicPartition("orders", 1)).state());
            assertFalse(state.allHandedOver());

            List<HandoverRecord.Handover> forced = topic.forceHandover(
                    RID,
                    Map.of(new TopicPartition("orders", 0), 7L, new TopicPartition("orders", 1), 30L),
                    "operator",
                    "forced");
            assertEquals(1, forced.size(), "only the partition without H");
            assertEquals(10, forced.get(0).offset(), "H is never below S");
            assertTrue(topic.readReplay(RID).allHandedOver());

            assertEquals(5, topic.tombstone(RID));
            assertNull(topic.read().replays().get(RID), "every key of the replay is gone");
        }
    }

    @Test
    void topicWithMorePartitionsIsRefused() {
        String name = TestKafka.unique("handover-wide");
        TestKafka.createTopic(name, 2);
        try (HandoverTopic topic = new HandoverTopic(TestKafka.connection(), name)) {
            HandoverTopicException e = assertThrows(HandoverTopicException.class, () -> topic.ensure(true));
            assertTrue(e.getMessage().contains("exactly 1"), e.getMessage());
        }
    }

    @Test
    void followerSyncsAndSkipsMalformedRecords() {
        String name = TestKafka.unique("handover-follow");
        try (HandoverTopic topic = new HandoverTopic(TestKafka.connection(), name);
                HandoverFollower<Integer> follower = new HandoverFollower<>(
                                TestKafka.connection(),
                                name,
                                view -> view.replays().size(),
                                Duration.ofMillis(50),
                                null,
                                "test-follower")
                        .start()) {
            long empty = follower.requestSync();
            assertTrue(follower.waitSynced(empty, Duration.ofSeconds(30)), "no topic: an empty view is current");
            topic.ensure(true);
            topic.publish(replay(RID));
            try (KafkaProducer<byte[], byte[]> producer = TestKafka.producer()) {
                producer.send(new ProducerRecord<>(
                        name, 0, "not a key".getBytes(StandardCharsets.UTF_8), "{}".getBytes(StandardCharsets.UTF_8)));
                producer.flush();
            }
            topic.publish(replay("shop/other/2"));
            long ticket = follower.requestSync();
            assertTrue(follower.waitSynced(ticket, Duration.ofSeconds(30)), "the follower reaches the readable end");
            assertEquals(2, follower.snapshot(), "both replays, the malformed record skipped");
            assertEquals(1L, follower.withView(HandoverView::malformed));
            assertNull(follower.error());
        }
    }

    @Test
    void followerCatchesUpInTheCallersThreadThenTailsOnFromThere() {
        String name = TestKafka.unique("handover-catchup");
        try (HandoverTopic topic = new HandoverTopic(TestKafka.connection(), name);
                HandoverFollower<Integer> follower = new HandoverFollower<>(
                        TestKafka.connection(),
                        name,
                        view -> view.replays().size(),
                        Duration.ofMillis(50),
                        null,
                        "test-catchup")) {
            assertTrue(follower.partitionsNow(Duration.ofSeconds(30)).isEmpty(), "no topic yet");
            topic.ensure(true, follower);
            assertEquals(1, follower.partitionsNow(Duration.ofSeconds(30)).size(), "created with one partition");
            assertEquals(0, (int) follower.<Integer>catchUp(
                    Duration.ofSeconds(30), view -> view.replays().size()));
            topic.publish(replay(RID));
            assertTrue(follower.<Boolean>catchUp(Duration.ofSeconds(30), view -> view.replay(RID).replay != null));
            topic.publish(replay("shop/other/2"));
            // Read on from where the previous catch-up stopped: the view holds both replays.
            assertEquals(2, (int) follower.<Integer>catchUp(
                    Duration.ofSeconds(30), view -> view.replays().size()));
            assertEquals(2, (int) follower.snapshot(), "the snapshot follows the catch-up");
            assertEquals(
                    topic.read().replays().keySet(),
                    follower.withView(view -> view.replays().keySet()),
                    "the same view as a read from the beginning");
            follower.start();
            assertThrows(
                    IllegalStateException.class,
                    () -> follower.<Integer>catchUp(Duration.ofSeconds(1), view -> 0),
                    "a catch-up is for before start()");
            topic.publish(replay("shop/third/3"));
            long ticket = follower.requestSync();
            assertTrue(follower.waitSynced(ticket, Duration.ofSeconds(30)), "the thread tails on from there");
            assertEquals(3, (int) follower.snapshot());
            assertNull(follower.error());
        }
    }
}
