package io.reprise.kafka.topic;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Where Kafka is and how to authenticate: the part of a service's client config that Reprise's own clients
 * (a reader of the handover topic, a producer for its records, an admin) reuse, and their configs.
 */
public final class KafkaConnection {

    private static final List<String> PREFIXES = List.of(
            "bootstrap.servers",
            "security.protocol",
            "sasl.",
            "ssl.",
            "client.dns.lookup",
            "socket.connection.setup.",
            "reconnect.backoff.",
            "retry.backoff.",
            "client.rack",
            "connections.max.idle.ms",
            "metadata.recovery.",
            "request.timeout.ms");

    private KafkaConnection() {}

    /** The connection part of a client config. */
    public static Map<String, Object> settings(Map<String, ?> config) {
        Map<String, Object> out = new HashMap<>();
        config.forEach((key, value) -> {
            if (value != null && PREFIXES.stream().anyMatch(key::startsWith)) {
                out.put(key, value);
            }
        });
        if (!out.containsKey("bootstrap.servers")) {
            throw new IllegalArgumentException("the client config has no bootstrap.servers: the guard's own clients "
                    + "need to know where Kafka is");
        }
        return out;
    }

    public static Map<String, Object> bootstrap(String servers) {
        Map<String, Object> out = new HashMap<>();
        out.put("bootstrap.servers", servers);
        return out;
    }

    /** A reader of the handover topic: no group, {@code read_committed}, never creates topics. */
    public static Map<String, Object> readerConfig(Map<String, Object> connection, String clientId) {
        Map<String, Object> config = new HashMap<>(connection);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        config.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 1000);
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return config;
    }

    /** A writer of handover records: idempotent, {@code acks=all}, no batching delay. */
    public static Map<String, Object> producerConfig(Map<String, Object> connection, String clientId) {
        Map<String, Object> config = new HashMap<>(connection);
        config.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return config;
    }

    public static Map<String, Object> adminConfig(Map<String, Object> connection, String clientId) {
        Map<String, Object> config = new HashMap<>(connection);
        config.put("client.id", clientId);
        return config;
    }
}
