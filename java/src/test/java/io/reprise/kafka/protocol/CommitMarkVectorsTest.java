package io.reprise.kafka.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.reprise.kafka.conformance.Vectors;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** conformance/vectors/commit_marks.json: commit-offset metadata, encoded and decoded. */
class CommitMarkVectorsTest {

    static CommitMark mark(JsonNode m) {
        return new CommitMark(
                m.get("replay").textValue(),
                text(m.get("finished")),
                number(m.get("skip_from")),
                number(m.get("reread_until")));
    }

    private static String text(JsonNode n) {
        return n == null || n.isNull() ? null : n.textValue();
    }

    private static Long number(JsonNode n) {
        return n == null || n.isNull() ? null : n.longValue();
    }

    @TestFactory
    List<DynamicTest> commitMarks() {
        JsonNode root = Vectors.load("commit_marks.json", "commit_marks");
        Vectors.uniqueNames(root.get("encode"), "commit_marks.json encode");
        Vectors.uniqueNames(root.get("decode"), "commit_marks.json decode");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("encode")) {
            tests.add(DynamicTest.dynamicTest("encode: " + c.get("name").asText(), () -> {
                assertEquals(c.get("metadata").textValue(), mark(c.get("mark")).encode());
                assertEquals(c.get("committed").textValue(), CommitMetadata.store(mark(c.get("mark"))));
            }));
        }
        for (JsonNode c : root.get("decode")) {
            tests.add(DynamicTest.dynamicTest("decode: " + c.get("name").asText(), () -> {
                JsonNode metadata = c.get("metadata");
                CommitMark decoded =
                        CommitMetadata.read(metadata == null || metadata.isNull() ? null : metadata.textValue());
                switch (c.get("result").asText()) {
                    case "none" -> assertNull(decoded);
                    case "mark" -> {
                        assertNotNull(decoded);
                        assertNull(decoded.problem(), "usable");
                        assertEquals(mark(c.get("mark")), decoded);
                    }
                    case "unusable" -> {
                        assertNotNull(decoded);
                        assertEquals(c.get("reason").asText(), decoded.problem());
                    }
                    default -> fail("unknown result " + c.get("result"));
                }
            }));
        }
        return tests;
    }
}
