package io.reprise.kafka.replay;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka client settings of every client the replay role makes, from one place (as
 * {@code replay_worker/connection/kafka_clients.py}).
 *
 * <p>Three layers, later ones winning: the service's own consumer settings (its security settings serve the replay
 * too), the files of {@code REPRISE_KAFKA_CONFIG_DIR} (one setting per file, file name = key, mounted from the
 * user's Secret; the same folder the Python worker reads, so librdkafka names such as {@code sasl.mechanisms},
 * {@code sasl.username}/{@code sasl.password} and {@code ssl.ca.location} are translated), and
 * {@code REPRISE_BOOTSTRAP_SERVERS}. On top go the role's own settings, because its correctness depends on them
 * (manual commits, {@code read_committed}, idempotent producers): neither a Secret nor the service can switch them
 * off. Values are credentials: they are handed to the clients and never logged; only key names are.
 */
final class KafkaClientConfig {

    /** The folder cannot be read; the message names the folder or file, never a value. */
    static final class KafkaConfigException extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        KafkaConfigException(String message) {
            super(message);
        }
    }

    private final Map<String, Object> base;
    /** Keys of the folder that no Java client knows (logged by name, then left out). */
    private final List<String> unknownKeys;

    private KafkaClientConfig(Map<String, Object> base, List<String> unknownKeys) {
        this.base = base;
        this.unknownKeys = unknownKeys;
    }

    static KafkaClientConfig of(String bootstrapServers, Map<String, ?> serviceConfig, Map<String, String> folder) {
        Map<String, Object> base = new HashMap<>();
        if (serviceConfig != null) {
            serviceConfig.forEach((k, v) -> {
                if (v != null && !SERVICE_ONLY.contains(k)) {
                    base.put(k, v);
                }
            });
        }
        List<String> unknown = new ArrayList<>();
        base.putAll(translate(folder, unknown));
        base.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        return new KafkaClientConfig(base, unknown);
    }

    List<String> unknownKeys() {
        return unknownKeys;
    }

    /** Settings of the service's consumer that belong to its own group membership or types, not the replay's. */
    private static final Set<String> SERVICE_ONLY = Set.of(
            ConsumerConfig.GROUP_ID_CONFIG,
            ConsumerConfig.GROUP_INSTANCE_ID_CONFIG,
            ConsumerConfig.CLIENT_ID_CONFIG,
            ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
            ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
            ConsumerConfig.ISOLATION_LEVEL_CONFIG,
            ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
            ConsumerConfig.GROUP_PROTOCOL_CONFIG,
            ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG);

    /** The settings in {@code path}: every regular file whose name does not start with a dot. */
    static Map<String, String> loadFolder(String path) {
        Map<String, String> values = new TreeMap<>();
        if (path == null) {
            return values;
        }
        Path folder = Path.of(path);
        if (!Files.isDirectory(folder)) {
            throw new KafkaConfigException("REPRISE_KAFKA_CONFIG_DIR " + folder + " is not a directory");
        }
        try (Stream<Path> entries = Files.list(folder)) {
            for (Path entry : (Iterable<Path>) entries.sorted()::iterator) {
                // Kubernetes mounts a Secret as files plus `..data` links: the dot-names are skipped.
                if (entry.getFileName().toString().startsWith(".") || !Files.isRegularFile(entry)) {
                    continue;
                }
                String text;
                try {
                    text = Files.readString(entry, StandardCharsets.UTF_8);
                } catch (IOException unreadable) {
                    throw new KafkaConfigException("cannot read Kafka setting file " + entry + ": "
                            + unreadable.getClass().getSimpleName());
                }
                // Editors and `kubectl create secret --from-file` often leave one trailing newline.
                values.put(
                        entry.getFileName().toString(),
                        text.endsWith("\n") ? text.substring(0, text.length() - 1) : text);
            }
        } catch (IOException unlisted) {
            throw new KafkaConfigException("cannot list REPRISE_KAFKA_CONFIG_DIR " + folder + ": "
                    + unlisted.getClass().getSimpleName());
        }
        return values;
    }

    /**
     * The folder's settings for Java clients. Java names pass as they are; the librdkafka names the Python worker's
     * Secrets use are translated; anything else is reported by name and left out (a Java client would warn about
     * it, or fail).
     */
    static Map<String, Object> translate(Map<String, String> folder, List<String> unknown) {
        Map<String, Object> out = new HashMap<>();
        Set<String> javaNames = new java.util.HashSet<>(ConsumerConfig.configNames());
        javaNames.addAll(ProducerConfig.configNames());
        javaNames.addAll(AdminClientConfig.configNames());
        String mechanism = folder.getOrDefault("sasl.mechanism", folder.get("sasl.mechanisms"));
        for (Map.Entry<String, String> entry : folder.entrySet()) {
            String key = entry.getKey();
            String value = entry.getValue();
            switch (key) {
                case "sasl.mechanisms" -> out.put("sasl.mechanism", value);
                case "sasl.username", "sasl.password" -> {
                    // Both make one JAAS line, below.
                }
                case "ssl.ca.location" -> {
                    out.put("ssl.truststore.type", "PEM");
                    out.put("ssl.truststore.location", value);
                }
                case "ssl.certificate.location" -> {
                    out.put("ssl.keystore.type", "PEM");
                    out.put("ssl.keystore.certificate.chain", readPem(value, key));
                }
                case "ssl.key.location" -> {
                    out.put("ssl.keystore.type", "PEM");
                    out.put("ssl.keystore.key", readPem(value, key));
                }
                case "ssl.certificate.pem" -> {
                    out.put("ssl.keystore.type", "PEM");
                    out.put("ssl.keystore.certificate.chain", value);
                }
                case "ssl.key.pem" -> {
                    out.put("ssl.keystore.type", "PEM");
                    out.put("ssl.keystore.key", value);
                }
                case "ssl.ca.pem" -> {
                    out.put("ssl.truststore.type", "PEM");
                    out.put("ssl.truststore.certificates", value);
                }
                case "enable.ssl.certificate.verification" -> {
                    if (value.strip().equalsIgnoreCase("false")) {
                        out.put("ssl.endpoint.identification.algorithm", "");
                    }
                }
                case "ssl.endpoint.identification.algorithm" -> out.put(
                        key, value.strip().equalsIgnoreCase("none") ? "" : value);
                default -> {
                    if (javaNames.contains(key)) {
                        out.put(key, value);
                    } else {
                        unknown.add(key);
                    }
                }
            }
        }
        String user = folder.get("sasl.username");
        String password = folder.get("sasl.password");
        if (user != null && password != null && !folder.containsKey("sasl.jaas.config")) {
            String module =
                    mechanism != null && mechanism.toUpperCase(Locale.ROOT).startsWith("SCRAM")
                            ? "org.apache.kafka.common.security.scram.ScramLoginModule"
                            : "org.apache.kafka.common.security.plain.PlainLoginModule";
            out.put(
                    "sasl.jaas.config",
                    module + " required username=\"" + jaasQuote(user) + "\" password=\"" + jaasQuote(password)
                            + "\";");
        }
        return out;
    }

    private static String jaasQuote(String value) {
        return value.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    private static String readPem(String path, String key) {
        try {
            return Files.readString(Path.of(path), StandardCharsets.UTF_8);
        } catch (IOException unreadable) {
            throw new KafkaConfigException("cannot read the file of Kafka setting " + key + ": "
                    + unreadable.getClass().getSimpleName());
        }
    }

    // ------------------------------------------------------------------------------------------- per client

    private Map<String, Object> only(Set<String> names, String clientId) {
        Map<String, Object> config = new HashMap<>();
        base.forEach((k, v) -> {
            if (names.contains(k) || k.startsWith("sasl.") || k.startsWith("ssl.") || k.startsWith("security.")) {
                config.put(k, v);
            }
        });
        config.put(CommonNames.CLIENT_ID, clientId);
        return config;
    }

    /** A replay-group member that commits only what its handler returned, and rebalances cooperatively. */
    Map<String, Object> replayConsumer(String groupId, String clientId, int maxPollRecords) {
        Map<String, Object> config = only(ConsumerConfig.configNames(), clientId);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        // Partitions without a committed offset are outside the replay's plan: they are never read, so the reset
        // policy only decides where the client parks them.
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPollRecords);
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.remove(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
        return config;
    }

    /** An idempotent producer: retries never duplicate or reorder records within a partition. */
    Map<String, Object> producer(String clientId) {
        Map<String, Object> config = only(ProducerConfig.configNames(), clientId);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return config;
    }

    Map<String, Object> admin(String clientId) {
        return only(AdminClientConfig.configNames(), clientId);
    }

    /** The connection settings alone (what the handover topic's clients are given). */
    Map<String, Object> connection() {
        Map<String, Object> config = new HashMap<>();
        base.forEach((k, v) -> {
            if (AdminClientConfig.configNames().contains(k)
                    || k.startsWith("sasl.")
                    || k.startsWith("ssl.")
                    || k.startsWith("security.")) {
                config.put(k, v);
            }
        });
        config.remove(CommonNames.CLIENT_ID);
        return config;
    }

    private static final class CommonNames {
        static final String CLIENT_ID = "client.id";
    }
}
