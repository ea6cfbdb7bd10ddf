package io.reprise.kafka.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import io.reprise.kafka.conformance.Vectors;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** conformance/vectors/replay_finish.json: when the replay stops a partition, per mode, and the end of a bounded replay. */
class ReplayFinishVectorsTest {

    static Long optional(JsonNode n) {
        return n == null || n.isNull() ? null : n.longValue();
    }

    @TestFactory
    List<DynamicTest> finish() {
        JsonNode root = Vectors.load("replay_finish.json", "replay_finish");
        Vectors.uniqueNames(root.get("finish"), "replay_finish.json finish");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("finish")) {
            tests.add(DynamicTest.dynamicTest("finish: " + c.get("name").asText(), () -> {
                if (c.has("error")) {
                    assertEquals("unknown-mode", c.get("error").asText());
                    assertThrows(IllegalArgumentException.class, () -> decide(c));
                    return;
                }
                JsonNode reason = c.get("reason");
                assertEquals(
                        reason == null || reason.isNull() ? null : reason.asText(),
                        decide(c).orElse(null));
            }));
        }
        return tests;
    }

    private static java.util.Optional<String> decide(JsonNode c) {
        return FinishRule.decide(
                c.get("mode").asText(),
                c.get("position").longValue(),
                optional(c.get("end_offset")),
                optional(c.get("end_timestamp_ms")),
                c.get("at_end").asBoolean(),
                optional(c.get("live_position")));
    }

    @TestFactory
    List<DynamicTest> recordEnds() {
        JsonNode root = Vectors.load("replay_finish.json", "replay_finish");
        Vectors.uniqueNames(root.get("record_ends"), "replay_finish.json record_ends");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("record_ends")) {
            tests.add(DynamicTest.dynamicTest(
                    "record ends: " + c.get("name").asText(),
                    () -> assertEquals(
                            c.get("ends").asBoolean(),
                            FinishRule.recordEndsPartition(
                                    optional(c.get("end_offset")),
                                    optional(c.get("end_timestamp_ms")),
                                    c.get("offset").longValue(),
                                    optional(c.get("timestamp_ms"))))));
        }
        return tests;
    }
}
