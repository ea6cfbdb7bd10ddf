package io.reprise.kafka.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.reprise.kafka.conformance.Vectors;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** conformance/vectors/replay_start.json: start and end specs, and where a replay starts and ends per partition. */
class ReplayStartVectorsTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** JSON equality with numbers compared by value (an offset read as int equals the same one written as long). */
    static boolean sameJson(JsonNode a, JsonNode b) {
        Comparator<JsonNode> numbers = (x, y) ->
                x.isNumber() && y.isNumber() ? x.decimalValue().compareTo(y.decimalValue()) : x.equals(y) ? 0 : 1;
        return a.equals(numbers, b);
    }

    static StartDecision.Start start(JsonNode spec) {
        return spec.isTextual()
                ? StartDecision.Start.parse(spec.textValue())
                : StartDecision.Start.parse(spec, "start");
    }

    static StartDecision.End end(JsonNode spec) {
        if (spec == null || spec.isNull()) {
            return null;
        }
        return spec.isTextual() ? StartDecision.End.parse(spec.textValue()) : StartDecision.End.parse(spec, "end");
    }

    static Long optional(JsonNode n) {
        return n == null || n.isNull() ? null : n.longValue();
    }

    @TestFactory
    List<DynamicTest> parse() {
        JsonNode root = Vectors.load("replay_start.json", "replay_start");
        Vectors.uniqueNames(root.get("parse"), "replay_start.json parse");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("parse")) {
            tests.add(DynamicTest.dynamicTest("parse: " + c.get("name").asText(), () -> {
                boolean isStart = c.get("what").asText().equals("start");
                try {
                    String normal = isStart
                            ? start(c.get("spec")).toJson()
                            : end(c.get("spec")).toJson();
                    if (c.has("error")) {
                        fail("expected error " + c.get("error") + ", parsed " + normal);
                    }
                    JsonNode parsed = JSON.readTree(normal);
                    assertTrue(sameJson(c.get("parsed"), parsed), "expected " + c.get("parsed") + ", got " + parsed);
                } catch (StartDecision.SpecException error) {
                    if (!c.has("error")) {
                        throw error;
                    }
                    assertEquals(c.get("error").get("code").asText(), error.code(), error.getMessage());
                    assertEquals(c.get("error").get("field").asText(), error.field(), error.getMessage());
                }
            }));
        }
        return tests;
    }

    @TestFactory
    List<DynamicTest> decide() {
        JsonNode root = Vectors.load("replay_start.json", "replay_start");
        Vectors.uniqueNames(root.get("decide"), "replay_start.json decide");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("decide")) {
            tests.add(DynamicTest.dynamicTest("decide: " + c.get("name").asText(), () -> {
                StartDecision.Start spec = start(c.get("start"));
                long now = c.get("now_ms").longValue();
                assertEquals(optional(c.get("lookup_ms")), spec.lookupTimestamp(now), "lookup_ms");
                JsonNode p = c.get("partition");
                StartDecision.PartitionFacts facts = new StartDecision.PartitionFacts(
                        p.get("topic").asText(),
                        p.get("partition").asInt(),
                        p.get("log_start").longValue(),
                        p.get("end").longValue(),
                        optional(p.get("time_lookup")),
                        optional(p.get("end_time_lookup")));
                try {
                    StartDecision d = StartDecision.decide(
                            spec,
                            end(c.get("end")),
                            facts,
                            c.get("allow_clamp").asBoolean(),
                            now,
                            optional(c.get("committed")));
                    if (c.has("error")) {
                        fail("expected error " + c.get("error") + ", decided " + d);
                    }
                    JsonNode expected = c.get("decision");
                    assertEquals(expected.get("offset").longValue(), d.offset(), "offset");
                    assertEquals(expected.get("clamped").asBoolean(), d.clamped(), "clamped");
                    assertEquals(optional(expected.get("end_offset")), d.endOffset(), "end_offset");
                    assertEquals(optional(expected.get("end_timestamp_ms")), d.endTimestampMs(), "end_timestamp_ms");
                } catch (StartDecision.SpecException error) {
                    assertEquals(c.path("error").asText(), error.code(), error.getMessage());
                } catch (StartDecision.OlderThanRetention error) {
                    assertEquals(c.path("error").asText(), error.code(), error.getMessage());
                }
            }));
        }
        return tests;
    }
}
