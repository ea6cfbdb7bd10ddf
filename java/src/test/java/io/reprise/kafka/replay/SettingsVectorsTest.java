package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.reprise.kafka.conformance.Vectors;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * conformance/vectors/settings.json: the {@code REPRISE_*} environment in, the normalised settings or a
 * {@code {code, field}} refusal out. The expected outcome is the case's {@code ports.java} where it has one (a
 * setting this role declares unsupported; the handler is the service's own), else the reference's.
 */
class SettingsVectorsTest {

    @Test
    void theDeclaredUnsupportedListIsThePublishedOne() {
        JsonNode root = Vectors.load("settings.json", "settings");
        List<String> published = new ArrayList<>();
        root.get("unsupported").get("java").forEach(e -> published.add(e.asText()));
        assertEquals(published, ReplaySettings.UNSUPPORTED);
    }

    @TestFactory
    List<DynamicTest> cases() {
        JsonNode root = Vectors.load("settings.json", "settings");
        Vectors.uniqueNames(root.get("cases"), "settings.json cases");
        List<String> compared = new ArrayList<>();
        root.get("compared").forEach(name -> {
            if (!ReplaySettings.UNSUPPORTED.contains(name.asText())) {
                compared.add(name.asText());
            }
        });
        assertTrue(compared.size() >= 18, "settings.json compares too few settings: " + compared);
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                JsonNode expected = c.path("ports").has("java") ? c.get("ports").get("java") : c.get("result");
                Map<String, String> env = new LinkedHashMap<>();
                c.get("env")
                        .properties()
                        .forEach(e -> env.put(e.getKey(), e.getValue().asText()));
                ReplaySettings settings;
                try {
                    settings = ReplaySettings.fromEnv(env);
                } catch (ReplaySettings.SettingsException refused) {
                    assertTrue(expected.has("error"), "refused (" + refused.getMessage() + "), expected " + expected);
                    assertEquals(
                            expected.get("error").get("code").asText() + " "
                                    + expected.get("error").get("field").asText(),
                            refused.code() + " " + refused.field(),
                            refused.getMessage());
                    return;
                }
                if (expected.has("error")) {
                    fail("accepted, expected the refusal " + expected.get("error"));
                }
                Map<String, Object> normal = normalised(settings);
                for (String name : compared) {
                    JsonNode want = expected.get("settings").get(name);
                    Object got = normal.get(name);
                    if (want.isNumber()) {
                        assertEquals(want.doubleValue(), ((Number) got).doubleValue(), 0.0, name);
                    } else if (want.isArray()) {
                        List<String> items = new ArrayList<>();
                        want.forEach(i -> items.add(i.asText()));
                        assertEquals(items, got, name);
                    } else if (want.isBoolean()) {
                        assertEquals(want.booleanValue(), got, name);
                    } else {
                        assertEquals(want.isNull() ? null : want.asText(), got, name);
                    }
                }
            }));
        }
        return tests;
    }

    /** The settings by variable, as the vectors write them. */
    private static Map<String, Object> normalised(ReplaySettings s) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("REPRISE_BOOTSTRAP_SERVERS", s.bootstrapServers());
        out.put("REPRISE_KAFKA_CONFIG_DIR", s.kafkaConfigDir());
        out.put("REPRISE_ROLE", "replay"); // the only role this port runs
        out.put("REPRISE_REPLAY_ID", s.replayId());
        out.put("REPRISE_TOPICS", s.topics());
        out.put("REPRISE_MODE", s.mode());
        out.put("REPRISE_REPLAY_GROUP", s.replayGroup());
        out.put("REPRISE_LIVE_GROUP", s.liveGroup());
        out.put("REPRISE_ALLOW_CLAMP", s.allowClamp());
        out.put("REPRISE_DLQ_TOPIC", s.dlqTopic());
        out.put("REPRISE_POISON_POLICY", s.poisonPolicy());
        out.put("REPRISE_HANDLER_RETRIES", s.handlerRetries());
        out.put("REPRISE_BATCH_SIZE", s.batchSize());
        out.put("REPRISE_HANDOVER_TOPIC", s.handoverTopic());
        out.put("REPRISE_MAX_RECORDS_PER_SECOND", s.maxRecordsPerSecond());
        out.put("REPRISE_MAX_BYTES_PER_SECOND", s.maxBytesPerSecond());
        out.put("REPRISE_METRICS_PORT", s.metricsPort());
        out.put("REPRISE_MEMBER_NAME", s.memberName());
        out.put("REPRISE_EXIT_WHEN_DONE", s.exitWhenDone());
        out.put("REPRISE_CHECK_INTERVAL", s.checkIntervalSeconds());
        out.put("REPRISE_LOG_LEVEL", s.logLevel());
        return out;
    }
}
