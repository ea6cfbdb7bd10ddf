package io.reprise.kafka.guard;

import org.apache.kafka.common.TopicPartition;

/** What a {@code guard} record says: the guard is skipping a partition for a replay. */
public record SkipReport(String replayId, TopicPartition partition, long firstSkipped, long seenUntil) {}
