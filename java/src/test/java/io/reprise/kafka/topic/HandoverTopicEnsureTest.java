package io.reprise.kafka.topic;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The check of a new handover topic (issue 32 item 9): CreateTopics returns when the controller has recorded the
 * topic, and a client's metadata can show it a moment later (under load, seconds later). {@code ensure} returns only
 * once the metadata it reads shows the topic, so what the caller does next (the replay role's catch-up, a check of
 * its own) does not find no topic, or refuse the topic it has just made.
 */
class HandoverTopicEnsureTest {

    /** The answers of a metadata that shows the topic only after {@code lateLooks} looks once it was created. */
    private static final class LateMetadata implements HandoverTopic.PartitionCount {
        final List<Integer> answers = new ArrayList<>();
        final AtomicInteger afterCreate = new AtomicInteger(-1);
        final int lateLooks;

        LateMetadata(int lateLooks) {
            this.lateLooks = lateLooks;
        }

        @Override
        public int get() {
            int answer = afterCreate.get() < 0 ? 0 : (afterCreate.getAndIncrement() < lateLooks ? 0 : 1);
            answers.add(answer);
            return answer;
        }

        void created() {
            afterCreate.compareAndSet(-1, 0);
        }
    }

    @Test
    void aCreatedTopicIsSeenInTheMetadataBeforeEnsureReturns() {
        LateMetadata metadata = new LateMetadata(3);
        HandoverTopic.ensure("reprise.handover", true, metadata, metadata::created, Duration.ofSeconds(30));
        assertEquals(
                1,
                metadata.answers.get(metadata.answers.size() - 1),
                "ensure returned before the metadata showed the topic it created: " + metadata.answers);
        assertEquals(List.of(0, 0, 0, 0, 1), metadata.answers);
    }

    @Test
    void aTopicTheMetadataNeverShowsIsNamedAfterTheTimeout() {
        LateMetadata metadata = new LateMetadata(Integer.MAX_VALUE);
        HandoverTopicException e = assertThrows(
                HandoverTopicException.class,
                () -> HandoverTopic.ensure(
                        "reprise.handover", true, metadata, metadata::created, Duration.ofMillis(300)));
        assertTrue(
                e.getMessage()
                        .contains("handover topic reprise.handover was created but the metadata does not show it"),
                e.getMessage());
    }

    @Test
    void aMissingTopicIsRefusedWhenNotToBeCreatedAndATopicOfTwoPartitionsAlways() {
        assertThrows(
                HandoverTopicException.class,
                () -> HandoverTopic.ensure("t", false, () -> 0, () -> {}, Duration.ofSeconds(1)));
        HandoverTopicException two = assertThrows(
                HandoverTopicException.class,
                () -> HandoverTopic.ensure("t", true, () -> 2, () -> {}, Duration.ofSeconds(1)));
        assertTrue(two.getMessage().contains("has 2 partitions"), two.getMessage());
    }
}
