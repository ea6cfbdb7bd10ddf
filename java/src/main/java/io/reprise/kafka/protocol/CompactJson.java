package io.reprise.kafka.protocol;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;

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

    /** Parses like Python's json module: NaN/Infinity allowed, trailing tokens refused, duplicates: last wins. */
    static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS)
            .disable(JsonParser.Feature.AUTO_CLOSE_SOURCE)
            .build();

    public static final JsonNodeFactory NODES = JsonNodeFactory.withExactBigDecimals(false);

    private CompactJson() {
    }

    /** Parses JSON text; {@link IOException} when it is not exactly one JSON document. */
    public static JsonNode parse(byte[] bytes) throws IOException {
        JsonNode node = MAPPER.readTree(bytes);
        if (node == null || node.isMissingNode()) {
            throw new IOException("no JSON document");
        }
        return node;
    }

    public static JsonNode parse(String text) throws IOException {
        JsonNode node = MAPPER.readTree(text);
        if (node == null || node.isMissingNode()) {
            throw new IOException("no JSON document");
        }
        return node;
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
