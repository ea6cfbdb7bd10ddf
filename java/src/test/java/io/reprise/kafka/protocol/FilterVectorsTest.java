package io.reprise.kafka.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.reprise.kafka.conformance.Vectors;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** conformance/vectors/filters.json: which records a replay's filter covers, and which filters are refused. */
class FilterVectorsTest {

    @TestFactory
    List<DynamicTest> filters() {
        JsonNode root = Vectors.load("filters.json", "filters");
        Vectors.uniqueNames(root.get("cases"), "filters.json cases");
        Vectors.uniqueNames(root.get("invalid"), "filters.json invalid");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                String expected = c.get("result").asText();
                if (!Set.of("match", "no-match", "undecodable").contains(expected)) {
                    fail("unknown result '" + expected + "' in case " + c.get("name"));
                }
                RecordFilter filter = RecordFilter.published(c.get("filter"));
                String actual;
                try {
                    actual = filter.matches(
                                    Vectors.bytes(c.get("key")),
                                    Vectors.headers(c.get("headers")),
                                    Vectors.bytes(c.get("value")))
                            ? "match"
                            : "no-match";
                } catch (UndecodableValueException e) {
                    actual = "undecodable";
                }
                assertEquals(expected, actual, "filter " + c.get("filter") + " on value " + c.get("value"));
                // The guard's reading: a record it cannot decode counts as covered.
                assertEquals(
                        !expected.equals("no-match"),
                        GuardPartition.matches(
                                filter,
                                Vectors.bytes(c.get("key")),
                                Vectors.headers(c.get("headers")),
                                Vectors.bytes(c.get("value"))));
            }));
        }
        for (JsonNode c : root.get("invalid")) {
            tests.add(DynamicTest.dynamicTest("invalid: " + c.get("name").asText(), () -> {
                FilterSpecException e =
                        assertThrows(FilterSpecException.class, () -> RecordFilter.published(c.get("filter")));
                assertEquals(c.get("error").get("code").asText(), e.code(), e.getMessage());
                assertEquals(c.get("error").get("field").asText(), e.field(), e.getMessage());
            }));
        }
        return tests;
    }
}
