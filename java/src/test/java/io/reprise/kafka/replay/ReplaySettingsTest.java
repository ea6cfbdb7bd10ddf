package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.reprise.kafka.protocol.StartDecision;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The REPRISE_* contract: names, defaults and errors as replay_worker/settings.py. */
class ReplaySettingsTest {

    static Map<String, String> env(String... pairs) {
        Map<String, String> env = new HashMap<>(Map.of(
                "REPRISE_BOOTSTRAP_SERVERS",
                "k:9092",
                "REPRISE_REPLAY_ID",
                "ns/fix/1",
                "REPRISE_TOPICS",
                "orders, payments",
                "REPRISE_REPLAY_GROUP",
                "fix-replay"));
        for (int i = 0; i < pairs.length; i += 2) {
            env.put(pairs[i], pairs[i + 1]);
        }
        return env;
    }

    static String error(Map<String, String> env) {
        return assertThrows(ReplaySettings.SettingsException.class, () -> ReplaySettings.fromEnv(env))
                .getMessage();
    }

    @Test
    void defaultsAreTheReferences() {
        ReplaySettings s = ReplaySettings.fromEnv(env("HOSTNAME", "pod-1"));
        assertEquals(List.of("orders", "payments"), s.topics());
        assertEquals("Drain", s.mode());
        assertEquals(StartDecision.StartKind.EARLIEST, s.start().kind());
        assertFalse(s.allowClamp());
        assertNull(s.end());
        assertEquals("reprise.handover", s.handoverTopic());
        assertEquals("skip", s.poisonPolicy());
        assertEquals(2, s.handlerRetries());
        assertEquals(1000, s.batchSize());
        assertEquals(0.0, s.maxRecordsPerSecond());
        assertEquals(9400, s.metricsPort());
        assertEquals("pod-1", s.memberName());
        assertFalse(s.exitWhenDone());
        assertEquals(1.0, s.checkIntervalSeconds());
        assertTrue(s.filter().isEmpty());
    }

    @Test
    void aDeadLetterTopicMakesDeadLetteringTheDefault() {
        ReplaySettings s = ReplaySettings.fromEnv(env("REPRISE_DLQ_TOPIC", "orders.dlq"));
        assertEquals("dead-letter", s.poisonPolicy());
        assertTrue(s.deadLetters());
        assertEquals(
                "skip",
                ReplaySettings.fromEnv(env("REPRISE_DLQ_TOPIC", "d", "REPRISE_POISON_POLICY", "skip"))
                        .poisonPolicy());
    }

    @Test
    void modesAreCaseInsensitiveAndLiveGroupIsNeeded() {
        assertEquals(
                "Handover",
                ReplaySettings.fromEnv(env("REPRISE_MODE", "handover", "REPRISE_LIVE_GROUP", "live"))
                        .mode());
        assertEquals("REPRISE_LIVE_GROUP is required in mode Parallel", error(env("REPRISE_MODE", "Parallel")));
        assertTrue(error(env("REPRISE_MODE", "Sideways"))
                .startsWith("REPRISE_MODE: 'Sideways' is not one of Parallel, Handover, Drain"));
        assertTrue(error(env("REPRISE_MODE", "Handover", "REPRISE_LIVE_GROUP", "fix-replay"))
                .contains("must differ"));
        assertTrue(
                error(env("REPRISE_MODE", "Handover", "REPRISE_LIVE_GROUP", "l", "REPRISE_END", "{\"snapshot\":true}"))
                        .startsWith("REPRISE_END cannot be used with mode Handover"));
    }

    @Test
    void everyErrorNamesTheVariable() {
        Map<String, String> missing = env();
        missing.remove("REPRISE_TOPICS");
        assertEquals("REPRISE_TOPICS is required", error(missing));
        missing = env("REPRISE_BOOTSTRAP_SERVERS", "");
        assertEquals("REPRISE_BOOTSTRAP_SERVERS is required", error(missing));
        Map<String, String> noGroup = env();
        noGroup.remove("REPRISE_REPLAY_GROUP");
        assertEquals("REPRISE_REPLAY_GROUP is required for role replay", error(noGroup));
        assertEquals("REPRISE_BATCH_SIZE: 'many' is not a whole number", error(env("REPRISE_BATCH_SIZE", "many")));
        assertEquals("REPRISE_BATCH_SIZE must be at least 1", error(env("REPRISE_BATCH_SIZE", "0")));
        assertEquals(
                "REPRISE_MAX_RECORDS_PER_SECOND: '-3' must not be negative",
                error(env("REPRISE_MAX_RECORDS_PER_SECOND", "-3")));
        assertEquals(
                "REPRISE_ALLOW_CLAMP: 'perhaps' is not a boolean (true or false)",
                error(env("REPRISE_ALLOW_CLAMP", "perhaps")));
        assertEquals("REPRISE_METRICS_PORT must be 0..65535", error(env("REPRISE_METRICS_PORT", "70000")));
        assertEquals(
                "REPRISE_POISON_POLICY=dead-letter needs REPRISE_DLQ_TOPIC",
                error(env("REPRISE_POISON_POLICY", "dead-letter")));
        assertTrue(error(env("REPRISE_START", "{\"latest\":true}"))
                .startsWith("REPRISE_START: start: give exactly one of"));
        assertTrue(error(env("REPRISE_START", "{\"duration\":\"2 hours\"}"))
                .startsWith("REPRISE_START: start.duration: '2 hours' is not a duration"));
        assertTrue(error(env("REPRISE_FILTER", "{\"colour\":1}"))
                .startsWith("REPRISE_FILTER: filter: unknown field(s) ['colour']"));
        assertTrue(error(env("REPRISE_FORWARD_TOPIC", "copy"))
                .startsWith("REPRISE_FORWARD_TOPIC is not supported by the Java replay role"));
        assertTrue(error(env("REPRISE_ROLE", "backfill"))
                .startsWith("REPRISE_ROLE=backfill is not supported by the Java replay role"));
    }

    @Test
    void startAndEndSpecsParse() {
        ReplaySettings s = ReplaySettings.fromEnv(env(
                "REPRISE_START",
                "{\"timestamp\":\"2024-05-01T00:00:00Z\"}",
                "REPRISE_END",
                "{\"offsets\":{\"orders\":{\"0\":9}}}",
                "REPRISE_ALLOW_CLAMP",
                "yes"));
        assertEquals(1714521600000L, s.start().timestampMs());
        assertEquals(9L, s.end().offsets().get("orders").get(0));
        assertTrue(s.allowClamp());
        assertEquals(
                7200.0,
                ReplaySettings.fromEnv(env("REPRISE_START", "{\"duration\":\"2h\"}"))
                        .start()
                        .durationSeconds());
    }

    @Test
    void aKeysFileIsPublishedInline(@TempDir Path dir) throws Exception {
        Path keys = dir.resolve("keys.txt");
        Files.writeString(keys, "b\n\n a \n");
        ReplaySettings s =
                ReplaySettings.fromEnv(env("REPRISE_FILTER", "{\"keys\":[\"c\"],\"keysFile\":\"" + keys + "\"}"));
        assertEquals("{\"keys\":[\"a\",\"b\",\"c\"]}", s.filter().toString());
        assertTrue(error(env("REPRISE_FILTER", "{\"keysFile\":\"" + dir.resolve("none") + "\"}"))
                .contains("cannot read it"));
    }

    @Test
    void theRoleIsRequestedByTheReplayId() {
        assertTrue(ReplayRole.requested(Map.of("REPRISE_REPLAY_ID", "x")));
        assertFalse(ReplayRole.requested(Map.of("REPRISE_REPLAY_ID", " ")));
        assertFalse(ReplayRole.requested(Map.of()));
    }
}
