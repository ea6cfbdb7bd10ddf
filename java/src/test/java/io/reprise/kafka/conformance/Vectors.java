package io.reprise.kafka.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.HashSet;
import java.util.Set;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The shared conformance vectors (conformance/README.md): where they are, and their conventions for bytes and
 * headers. The folder is {@code REPRISE_CONFORMANCE_DIR}, else the system property {@code reprise.conformance.dir}
 * (the pom sets it to the repository's {@code conformance/vectors}). A missing file fails the run: a port that
 * does not run a vector file does not conform.
 */
public final class Vectors {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private Vectors() {}

    public static Path dir() {
        String env = System.getenv("REPRISE_CONFORMANCE_DIR");
        String prop = System.getProperty("reprise.conformance.dir");
        String chosen = env != null && !env.isEmpty() ? env : prop;
        if (chosen == null || chosen.isEmpty()) {
            fail("no conformance vector folder: set REPRISE_CONFORMANCE_DIR or -Dreprise.conformance.dir");
        }
        return Path.of(chosen);
    }

    /** One vector file, checked for its format and area. */
    public static JsonNode load(String file, String area) {
        Path path = dir().resolve(file);
        assertTrue(
                Files.isRegularFile(path),
                "conformance vector file " + path + " is missing: every vector file "
                        + "must run (generate them with `make vectors`, or point REPRISE_CONFORMANCE_DIR at them)");
        JsonNode root;
        try {
            root = MAPPER.readTree(path.toFile());
        } catch (IOException e) {
            throw new AssertionError("cannot read " + path + ": " + e.getMessage(), e);
        }
        assertEquals(1, root.path("format").asInt(), path + ": vector format version");
        assertEquals(area, root.path("area").asText(), path + ": area");
        return root;
    }

    /** Case names are unique in their list (they name the tests). */
    public static void uniqueNames(JsonNode cases, String what) {
        Set<String> seen = new HashSet<>();
        for (JsonNode c : cases) {
            assertTrue(seen.add(c.path("name").asText()), what + ": duplicate case name " + c.path("name"));
        }
        assertTrue(!seen.isEmpty(), what + ": no cases");
    }

    /** {@code {"utf8": "..."}}, {@code {"base64": "..."}}, {@code {"utf8_repeat": [["text", n], ...]}} or null. */
    public static byte[] bytes(JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        if (node.has("utf8_repeat")) {
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
            for (JsonNode part : node.get("utf8_repeat")) {
                byte[] text = part.get(0).textValue().getBytes(StandardCharsets.UTF_8);
                for (long i = part.get(1).longValue(); i > 0; i--) {
                    out.write(text, 0, text.length);
                }
            }
            return out.toByteArray();
        }
        if (node.has("utf8")) {
            return node.get("utf8").textValue().getBytes(StandardCharsets.UTF_8);
        }
        if (node.has("base64")) {
            return Base64.getDecoder().decode(node.get("base64").textValue());
        }
        throw new AssertionError("not a bytes value: " + node);
    }

    /** A list of {@code [name, bytes-or-null]} pairs, or null. */
    public static Headers headers(JsonNode node) {
        RecordHeaders headers = new RecordHeaders();
        if (node == null || node.isNull()) {
            return headers;
        }
        for (JsonNode pair : node) {
            headers.add(pair.get(0).textValue(), bytes(pair.get(1)));
        }
        return headers;
    }
}
