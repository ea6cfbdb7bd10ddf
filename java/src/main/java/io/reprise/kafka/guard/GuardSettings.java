package io.reprise.kafka.guard;

import io.reprise.kafka.topic.HandoverTopic;
import io.reprise.kafka.topic.KafkaConnection;
import java.net.InetAddress;
import java.time.Duration;
import java.util.Map;

/**
 * What a guard needs besides the consumer it wraps.
 *
 * @param groupId          the live group the guard acts for; null: read from the consumer's group metadata
 * @param connection       where Kafka is and how to authenticate, for the guard's own clients
 * @param handoverTopic    the handover topic (default {@code reprise.handover}, or {@code REPRISE_HANDOVER_TOPIC})
 * @param member           names this replica in {@code guard} and {@code ack} records (default: the host name)
 * @param progressInterval how often the guard publishes {@code guard} records, commits quiet partitions and
 *                         checks acknowledgements (default 1 s)
 * @param autoCommit       the service relies on automatic commits ({@code enable.auto.commit}, Kafka's default
 *                         true): the guard commits for it, every {@code autoCommitInterval}, with its marks
 */
public record GuardSettings(
        String groupId,
        Map<String, Object> connection,
        String handoverTopic,
        String member,
        Duration progressInterval,
        boolean autoCommit,
        Duration autoCommitInterval) {

    public GuardSettings {
        connection = Map.copyOf(connection);
        if (handoverTopic == null || handoverTopic.isEmpty()) {
            throw new IllegalArgumentException(
                    "handoverTopic: give the handover topic's name (default " + HandoverTopic.DEFAULT_TOPIC + ")");
        }
    }

    /** The settings of a consumer config: its group, its connection, and whether it commits automatically. */
    public static GuardSettings from(Map<String, ?> consumerConfig) {
        Object group = consumerConfig.get("group.id");
        Object auto = consumerConfig.get("enable.auto.commit");
        Object interval = consumerConfig.get("auto.commit.interval.ms");
        return new GuardSettings(
                group == null ? null : group.toString(),
                KafkaConnection.settings(consumerConfig),
                defaultTopic(),
                defaultMember(),
                Duration.ofSeconds(1),
                auto == null || Boolean.parseBoolean(auto.toString()),
                Duration.ofMillis(interval == null ? 5000 : Long.parseLong(interval.toString())));
    }

    public GuardSettings withGroupId(String value) {
        return new GuardSettings(
                value, connection, handoverTopic, member, progressInterval, autoCommit, autoCommitInterval);
    }

    public GuardSettings withHandoverTopic(String value) {
        return new GuardSettings(groupId, connection, value, member, progressInterval, autoCommit, autoCommitInterval);
    }

    public GuardSettings withMember(String value) {
        return new GuardSettings(
                groupId, connection, handoverTopic, value, progressInterval, autoCommit, autoCommitInterval);
    }

    public GuardSettings withProgressInterval(Duration value) {
        return new GuardSettings(groupId, connection, handoverTopic, member, value, autoCommit, autoCommitInterval);
    }

    public GuardSettings withAutoCommit(boolean value) {
        return new GuardSettings(
                groupId, connection, handoverTopic, member, progressInterval, value, autoCommitInterval);
    }

    static String defaultTopic() {
        String env = System.getenv("REPRISE_HANDOVER_TOPIC");
        return env == null || env.isEmpty() ? HandoverTopic.DEFAULT_TOPIC : env;
    }

    static String defaultMember() {
        String host = System.getenv("HOSTNAME");
        if (host != null && !host.isEmpty()) {
            return host;
        }
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            return "unknown";
        }
    }
}
