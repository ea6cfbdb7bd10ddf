package io.reprise.kafka.protocol;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.MissingNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.Map;

/**
 * JSON as the protocol writes and reads it: the bytes the Python reference produces (compact separators,
 * non-ASCII characters as UTF-8, control characters escaped as four-digit lowercase hex escapes), and a reader that accepts what
 * Python's {@code json.loads} accepts. Keys and values of the handover topic are compared as bytes by the
 * compacted topic and by the conformance vectors, so the writer must agree byte for byte.
 */
public final class CompactJson {

    /**
     * Parses like Python's json module: NaN/Infinity allowed, trailing tokens refused, duplicates: last wins,
     * integers as {@code BigInteger}. A streaming parser and a tree built here, not an {@code ObjectMapper}: the
     * trees are the ones {@code readTree} of a mapper so configured gives, and the parser alone loads a sixth of
     * the classes (an {@code ObjectMapper}'s first use costs a fresh JVM about 0.35 s of CPU; the replay role and
     * the guard paid it at every start).
     */
    static final JsonFactory STRICT = JsonFactory.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .disable(StreamReadFeature.AUTO_CLOSE_SOURCE)
            .build();

    /**
     * {@link #STRICT} with the protocol's nesting limit, for the records the protocol reads (handover keys and
     * values, filtered values): deeper than {@link JsonLimits#MAX_DEPTH} fails like any value that is not JSON.
     * Names, strings and numbers get no limit of Jackson's own (its defaults, 50 000, 20 000 000 and 1000 characters,
     * are not the protocol's: the size of the whole value bounds them, and integers have the protocol's digit limit),
     * so Jackson refuses nothing Python and Go read.
     */
    static final JsonFactory RECORDS = JsonFactory.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .disable(StreamReadFeature.AUTO_CLOSE_SOURCE)
            .streamReadConstraints(StreamReadConstraints.builder()
                    .maxNestingDepth(JsonLimits.MAX_DEPTH)
                    .maxNameLength(Integer.MAX_VALUE)
                    .maxStringLength(Integer.MAX_VALUE)
                    .maxNumberLength(Integer.MAX_VALUE) // integers: JsonLimits.MAX_INTEGER_DIGITS, checked in tree()
                    .build())
            .build();

    /** Parses as a default {@code ObjectMapper}'s {@code readTree}: strict JSON, the first value only. */
    private static final JsonFactory PLAIN = new JsonFactory();

    public static final JsonNodeFactory NODES = JsonNodeFactory.withExactBigDecimals(false);

    private CompactJson() {}

    /** Parses JSON text; {@link IOException} when it is not exactly one JSON document. */
    public static JsonNode parse(byte[] bytes) throws IOException {
        try (JsonParser parser = STRICT.createParser(bytes)) {
            return document(parser);
        }
    }

    /**
     * Parses a record the protocol reads, with its nesting limit ({@link #RECORDS}); {@link IOException} when it
     * is not exactly one JSON document or nests deeper than {@link JsonLimits#MAX_DEPTH}. The caller checks sizes.
     */
    public static JsonNode parseRecord(byte[] bytes) throws IOException {
        try (JsonParser parser = RECORDS.createParser(bytes)) {
            return document(parser);
        }
    }

    /** {@link #parseRecord(byte[])} of text (commit-offset metadata). */
    public static JsonNode parseRecord(String text) throws IOException {
        try (JsonParser parser = RECORDS.createParser(text)) {
            return document(parser);
        }
    }

    public static JsonNode parse(String text) throws IOException {
        try (JsonParser parser = STRICT.createParser(text)) {
            return document(parser);
        }
    }

    private static JsonNode document(JsonParser parser) throws IOException {
        JsonToken first = parser.nextToken();
        if (first == null) {
            throw new IOException("no JSON document");
        }
        JsonNode node = tree(parser, first, true);
        JsonToken trailing = parser.nextToken();
        if (trailing != null) {
            throw MismatchedInputException.from(
                    parser,
                    JsonNode.class,
                    "Trailing token (of type " + trailing
                            + ") found after value (bound as `" + JsonNode.class.getName() + "`): not allowed as per "
                            + "`DeserializationFeature.FAIL_ON_TRAILING_TOKENS`");
        }
        return node;
    }

    /**
     * The first JSON value of {@code text} as a default {@code ObjectMapper}'s {@code readTree} gives it: strict
     * JSON (no NaN), integers as int, long or {@code BigInteger} nodes by size, what follows the value not read, a
     * {@link MissingNode} when there is no value. For settings and start specs, which always parsed so.
     */
    public static JsonNode readTree(String text) throws JsonProcessingException {
        try (JsonParser parser = PLAIN.createParser(text)) {
            JsonToken first = parser.nextToken();
            return first == null ? MissingNode.getInstance() : tree(parser, first, false);
        } catch (JsonProcessingException bad) {
            throw bad;
        } catch (IOException impossible) {
            throw new IllegalStateException("reading a string failed", impossible); // no I/O behind a String
        }
    }

    /** The value that starts at {@code token}, as {@code JsonNodeDeserializer} builds it (duplicate keys: last wins). */
    private static JsonNode tree(JsonParser parser, JsonToken token, boolean bigIntegers) throws IOException {
        switch (token) {
            case START_OBJECT: {
                ObjectNode object = NODES.objectNode();
                for (String name = parser.nextFieldName(); name != null; name = parser.nextFieldName()) {
                    object.replace(name, tree(parser, parser.nextToken(), bigIntegers));
                }
                return object;
            }
            case START_ARRAY: {
                ArrayNode array = NODES.arrayNode();
                for (JsonToken item = parser.nextToken(); item != JsonToken.END_ARRAY; item = parser.nextToken()) {
                    array.add(tree(parser, item, bigIntegers));
                }
                return array;
            }
            case VALUE_STRING:
                return NODES.textNode(parser.getText());
            case VALUE_NUMBER_INT:
                if (bigIntegers) {
                    int digits = parser.getTextLength()
                            - (parser.getTextCharacters()[parser.getTextOffset()] == '-' ? 1 : 0);
                    if (digits > JsonLimits.MAX_INTEGER_DIGITS) {
                        // Python's rule (its parser refuses more); Jackson's own default was 1000 for any number.
                        throw new JsonParseException(
                                parser,
                                "an integer of " + digits + " digits, more than " + JsonLimits.MAX_INTEGER_DIGITS);
                    }
                    return NODES.numberNode(parser.getBigIntegerValue());
                }
                return switch (parser.getNumberType()) {
                    case INT -> NODES.numberNode(parser.getIntValue());
                    case LONG -> NODES.numberNode(parser.getLongValue());
                    default -> NODES.numberNode(parser.getBigIntegerValue());
                };
            case VALUE_NUMBER_FLOAT:
                return NODES.numberNode(parser.getDoubleValue());
            case VALUE_TRUE:
                return NODES.booleanNode(true);
            case VALUE_FALSE:
                return NODES.booleanNode(false);
            case VALUE_NULL:
                return NODES.nullNode();
            default:
                throw MismatchedInputException.from(
                        parser, JsonNode.class, "Unexpected token (" + token + ") where a JSON value starts");
        }
    }

    public static byte[] bytes(JsonNode node) {
        return write(node).getBytes(StandardCharsets.UTF_8);
    }

    /** Compact JSON text, as Python's {@code json.dumps(x, separators=(",", ":"), ensure_ascii=False)}. */
    public static String write(JsonNode node) {
        StringBuilder out = new StringBuilder(64);
        write(node, out);
        return out.toString();
    }

    static void write(JsonNode node, StringBuilder out) {
        if (node == null || node.isNull() || node.isMissingNode()) {
            out.append("null");
        } else if (node.isTextual()) {
            string(node.textValue(), out);
        } else if (node.isBoolean()) {
            out.append(node.booleanValue() ? "true" : "false");
        } else if (node.isIntegralNumber()) {
            out.append(node.bigIntegerValue().toString());
        } else if (node.isNumber()) {
            out.append(pythonFloat(node.doubleValue()));
        } else if (node.isArray()) {
            out.append('[');
            boolean first = true;
            for (JsonNode item : node) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                write(item, out);
            }
            out.append(']');
        } else if (node.isObject()) {
            out.append('{');
            boolean first = true;
            for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> field = it.next();
                if (!first) {
                    out.append(',');
                }
                first = false;
                string(field.getKey(), out);
                out.append(':');
                write(field.getValue(), out);
            }
            out.append('}');
        } else {
            throw new IllegalArgumentException("not JSON data: " + node.getNodeType());
        }
    }

    /** A JSON string literal the way Python spells it with ensure_ascii=False. */
    public static String string(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2);
        string(text, out);
        return out.toString();
    }

    static void string(String text, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    /** Python's repr of a float: shortest digits, exponent beyond 1e16 or below 1e-4, as "1e+16". */
    static String pythonFloat(double d) {
        if (Double.isNaN(d)) {
            return "NaN";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "Infinity" : "-Infinity";
        }
        if (d == 0) {
            return (1 / d < 0) ? "-0.0" : "0.0";
        }
        BigDecimal exact = new BigDecimal(Double.toString(d)).stripTrailingZeros();
        String digits = exact.unscaledValue().abs().toString();
        int exponent = digits.length() - 1 - exact.scale(); // decimal exponent of the first digit
        String sign = d < 0 ? "-" : "";
        if (exponent >= 16 || exponent < -4) {
            String mantissa = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
            return sign + mantissa + "e" + (exponent < 0 ? "-" : "+") + String.format("%02d", Math.abs(exponent));
        }
        String plain = exact.abs().toPlainString();
        if (!plain.contains(".")) {
            plain += ".0";
        }
        return sign + plain;
    }
}
