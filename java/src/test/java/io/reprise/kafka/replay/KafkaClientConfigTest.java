package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Kafka config folder the Python worker reads serves the Java role too; values never appear in errors. */
class KafkaClientConfigTest {

    @Test
    void theFolderIsReadWithoutDotFilesAndOneTrailingNewline(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("security.protocol"), "SASL_SSL\n");
        Files.writeString(dir.resolve("..data"), "ignored");
        Map<String, String> folder = KafkaClientConfig.loadFolder(dir.toString());
        assertEquals(Map.of("security.protocol", "SASL_SSL"), folder);
        String message = assertThrows(
                        KafkaClientConfig.KafkaConfigException.class,
                        () -> KafkaClientConfig.loadFolder(
                                dir.resolve("missing").toString()))
                .getMessage();
        assertTrue(message.startsWith("REPRISE_KAFKA_CONFIG_DIR"));
    }

    @Test
    void librdkafkaNamesAreTranslated() {
        List<String> unknown = new ArrayList<>();
        Map<String, Object> out = KafkaClientConfig.translate(
                Map.of(
                        "sasl.mechanisms",
                        "SCRAM-SHA-512",
                        "sasl.username",
                        "svc",
                        "sasl.password",
                        "p\"w",
                        "security.protocol",
                        "SASL_SSL",
                        "ssl.ca.location",
                        "/etc/ca.pem",
                        "socket.keepalive.enable",
                        "true"),
                unknown);
        assertEquals("SCRAM-SHA-512", out.get("sasl.mechanism"));
        assertEquals(
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"svc\" "
                        + "password=\"p\\\"w\";",
                out.get("sasl.jaas.config"));
        assertEquals("PEM", out.get("ssl.truststore.type"));
        assertEquals("/etc/ca.pem", out.get("ssl.truststore.location"));
        assertEquals("SASL_SSL", out.get("security.protocol"));
        assertFalse(out.containsKey("sasl.username"));
        assertEquals(List.of("socket.keepalive.enable"), unknown);
    }

    @Test
    void theRolesOwnSettingsWin() {
        KafkaClientConfig clients = KafkaClientConfig.of(
                "broker:9092",
                Map.of(
                        "group.id",
                        "live",
                        "enable.auto.commit",
                        "true",
                        "bootstrap.servers",
                        "old:1",
                        "security.protocol",
                        "SSL"),
                Map.of());
        Map<String, Object> consumer = clients.replayConsumer("fix-replay", "reprise-pod", 500);
        assertEquals("fix-replay", consumer.get("group.id"));
        assertEquals(false, consumer.get("enable.auto.commit"));
        assertEquals("read_committed", consumer.get("isolation.level"));
        assertEquals("broker:9092", consumer.get("bootstrap.servers"));
        assertEquals("SSL", consumer.get("security.protocol"));
        assertEquals(500, consumer.get("max.poll.records"));
        Map<String, Object> producer = clients.producer("p");
        assertEquals(true, producer.get("enable.idempotence"));
        assertEquals("all", producer.get("acks"));
        assertFalse(producer.containsKey("group.id"));
    }
}
