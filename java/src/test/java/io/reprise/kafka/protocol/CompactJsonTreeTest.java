package io.reprise.kafka.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * CompactJson builds its trees from the streaming parser; they must be the trees the ObjectMappers it replaced gave
 * (node classes included: an int read as BigInteger by the protocol's parser, by size by the settings' one).
 */
class CompactJsonTreeTest {

    /** The protocol's former mapper: NaN allowed, trailing tokens refused, integers as BigInteger. */
    private static final ObjectMapper STRICT = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS)
            .disable(JsonParser.Feature.AUTO_CLOSE_SOURCE)
            .build();
    /** The settings' and start specs' former mapper. */
    private static final ObjectMapper PLAIN = new ObjectMapper();

    private static final List<String> DOCUMENTS = List.of(
            "{}",
            "[]",
            "null",
            "true",
            "false",
            "0",
            "-7",
            "2147483648",
            "9223372036854775808",
            "1.0",
            "1e400",
            "-0.0",
            "\"\"",
            "\"caf\u00e9 \\u0000 \\n\"",
            "{\"a\":1,\"a\":2,\"b\":[1,2.5,{\"c\":null}]}",
            "{\"kind\":\"even\",\"n\":12,\"nested\":{\"x\":[true,false,\"y\"]}}",
            " [ 1 , [ [ ] ] ] ");

    @Test
    void theProtocolParserGivesTheTreesOfItsFormerMapper() throws IOException {
        for (String text : concat(DOCUMENTS, List.of("NaN", "[Infinity,-Infinity]"))) {
            JsonNode expected = STRICT.readTree(text);
            assertSame(expected, CompactJson.parse(text), text);
            assertSame(expected, CompactJson.parse(text.getBytes(StandardCharsets.UTF_8)), text);
        }
    }

    @Test
    void theSettingsParserGivesTheTreesOfADefaultMapper() throws IOException {
        for (String text : concat(DOCUMENTS, List.of("{\"a\":1} trailing", "", "   "))) {
            assertSame(PLAIN.readTree(text), CompactJson.readTree(text), text);
        }
    }

    @Test
    void refusesWhatTheFormerMappersRefused() {
        for (String text : List.of("", " ", "{} {}", "[1,]", "{\"a\":}", "nul")) {
            assertThrows(IOException.class, () -> CompactJson.parse(text), text);
        }
        for (String text : List.of("NaN", "[1,]", "{\"a\" 1}")) {
            assertThrows(JsonProcessingException.class, () -> PLAIN.readTree(text), text);
            assertThrows(JsonProcessingException.class, () -> CompactJson.readTree(text), text);
        }
    }

    private static List<String> concat(List<String> a, List<String> b) {
        return java.util.stream.Stream.concat(a.stream(), b.stream()).toList();
    }

    /** Equal, and of the same node classes all the way down. */
    private static void assertSame(JsonNode expected, JsonNode actual, String text) {
        assertEquals(expected, actual, text);
        assertEquals(expected.getClass(), actual.getClass(), text + ": node class");
        if (expected.isObject()) {
            Iterator<Map.Entry<String, JsonNode>> fields = expected.fields();
            List<String> order = new java.util.ArrayList<>();
            actual.fieldNames().forEachRemaining(order::add);
            int i = 0;
            while (fields.hasNext()) {
                Map.Entry<String, JsonNode> field = fields.next();
                assertEquals(field.getKey(), order.get(i++), text + ": field order");
                assertSame(field.getValue(), actual.get(field.getKey()), text);
            }
        } else if (expected.isArray()) {
            for (int i = 0; i < expected.size(); i++) {
                assertSame(expected.get(i), actual.get(i), text);
            }
        }
    }
}
