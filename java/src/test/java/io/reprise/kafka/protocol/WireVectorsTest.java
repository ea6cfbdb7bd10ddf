package io.reprise.kafka.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.conformance.Vectors;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** conformance/vectors/wire.json: handover-topic keys and values, encoded and decoded, malformed ones refused. */
class WireVectorsTest {

    @TestFactory
    List<DynamicTest> wire() {
        JsonNode root = Vectors.load("wire.json", "wire");
        Vectors.uniqueNames(root.get("encode"), "wire.json encode");
        Vectors.uniqueNames(root.get("decode"), "wire.json decode");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("encode")) {
            tests.add(DynamicTest.dynamicTest("encode: " + c.get("name").asText(), () -> {
                HandoverRecord record = NormalForm.record(c.get("record"));
                HandoverWire.Encoded encoded = HandoverWire.encode(record);
                assertArrayEquals(
                        Vectors.bytes(c.get("key")),
                        encoded.key(),
                        () -> "key " + new String(encoded.key(), StandardCharsets.UTF_8));
                // The value SHOULD be byte-identical; this port writes it so.
                assertEquals(
                        new String(Vectors.bytes(c.get("value")), StandardCharsets.UTF_8),
                        new String(encoded.value(), StandardCharsets.UTF_8));
            }));
        }
        for (JsonNode c : root.get("decode")) {
            tests.add(DynamicTest.dynamicTest("decode: " + c.get("name").asText(), () -> {
                byte[] key = Vectors.bytes(c.get("key"));
                byte[] value = Vectors.bytes(c.get("value"));
                if (c.has("error")) {
                    HandoverFormatException e =
                            assertThrows(HandoverFormatException.class, () -> HandoverWire.decode(key, value));
                    assertEquals(c.get("error").asText(), e.code(), e.getMessage());
                    return;
                }
                HandoverWire.Decoded decoded = HandoverWire.decode(key, value);
                JsonNode parsedKey = c.get("parsed_key");
                assertEquals(
                        parsedKey.get("replay_id").textValue(), decoded.key().replayId());
                assertEquals(parsedKey.get("kind").textValue(), decoded.key().kind());
                assertEquals(
                        parsedKey.get("topic").isNull()
                                ? null
                                : parsedKey.get("topic").textValue(),
                        decoded.key().topic());
                assertEquals(
                        parsedKey.get("partition").isNull()
                                ? null
                                : parsedKey.get("partition").intValue(),
                        decoded.key().partition());
                if (c.get("record").isNull()) {
                    assertNull(decoded.record(), "a tombstone");
                    return;
                }
                ObjectNode normal = NormalForm.of(decoded.record());
                assertTrue(
                        RecordFilter.JsonEquality.equal(c.get("record"), normal),
                        () -> "expected " + c.get("record") + "\n     got " + normal);
            }));
        }
        return tests;
    }
}
