package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

/**
 * The bytes of handover-topic records (HANDOVER.md section 2): values are compact JSON objects with {@code v}
 * (the format version), {@code replay_id}, {@code kind}, the kind's fields and {@code at_ms}, in that order,
 * exactly as the Python reference writes them. Decoding is lenient where the reference is (unknown fields
 * ignored, numbers given as strings accepted) and refuses the rest with a {@link HandoverFormatException}
 * naming the key and the field.
 */
public final class HandoverWire {

    public static final int FORMAT_VERSION = 1;

    private HandoverWire() {
    }

    /** Key and value bytes of one record; a null value is a tombstone. */
    public record Encoded(byte[] key, byte[] value) {
    }

    /** A decoded message: its key and its record, or null for a tombstone. */
    public record Decoded(HandoverKey key, HandoverRecord record) {
    }

    public static Encoded encode(HandoverRecord record) {
        ObjectNode v = CompactJson.NODES.objectNode();
        v.put("v", FORMAT_VERSION);
        v.put("replay_id", record.replayId());
        v.put("kind", record.kind());
        if (record instanceof HandoverRecord.Replay r) {
            v.put("mode", r.mode());
            v.put("replay_group", r.replayGroup());
            v.put("live_group", r.liveGroup());
            ArrayNode topics = v.putArray("topics");
            r.topics().forEach(topics::add);
            v.set("filter", r.filter().deepCopy());
        } else if (record instanceof HandoverRecord.Start s) {
            partition(v, s);
            v.put("offset", s.offset());
            v.put("end_offset", s.endOffset());
            v.put("end_timestamp_ms", s.endTimestampMs());
            v.put("clamped", s.clamped());
        } else if (record instanceof HandoverRecord.Handover h) {
            partition(v, h);
            v.put("offset", h.offset());
            v.put("reason", h.reason());
            v.put("by", h.by());
        } else if (record instanceof HandoverRecord.Guard g) {
            partition(v, g);
            v.put("first_skipped", g.firstSkipped());
            v.put("seen_until", g.seenUntil());
            v.put("member", g.member());
        } else if (record instanceof HandoverRecord.Ack a) {
            partition(v, a);
            v.put("offset", a.offset());
            v.put("committed", a.committed());
            v.put("member", a.member());
        } else if (record instanceof HandoverRecord.Progress p) {
            partition(v, p);
            v.put("position", p.position());
            v.put("at_end", p.atEnd());
            v.put("member", p.member());
        } else if (record instanceof HandoverRecord.Result r) {
            v.set("result", r.result().deepCopy());
        }
        v.put("at_ms", record.atMs());
        return new Encoded(record.key().encode(), CompactJson.bytes(v));
    }

    private static void partition(ObjectNode v, HandoverRecord.PerPartition record) {
        v.put("topic", record.topic());
        v.put("partition", record.partition());
    }

    /** The record of one handover-topic message. */
    public static Decoded decode(byte[] rawKey, byte[] rawValue) throws HandoverFormatException {
        HandoverKey key = HandoverKey.decode(rawKey);
        if (rawValue == null) {
            return new Decoded(key, null);
        }
        JsonNode v;
        try {
            v = CompactJson.parse(rawValue);
        } catch (IOException e) {
            throw new HandoverFormatException("value of " + key + " is not JSON");
        }
        if (!v.isObject() || !key.kind().equals(v.path("kind").isTextual() ? v.get("kind").textValue() : null)) {
            throw new HandoverFormatException("value of " + key + " does not say kind '" + key.kind() + "'");
        }
        long version;
        try {
            version = v.has("v") ? integer(v.get("v")) : 0;
        } catch (IllegalArgumentException e) {
            throw new HandoverFormatException("value of " + key + " has a bad format version: " + v.get("v"));
        }
        if (version > FORMAT_VERSION) {
            throw new HandoverFormatException(key + " has format version " + version + ", newer than "
                    + FORMAT_VERSION);
        }
        String rid = key.replayId();
        try {
            long at = truthy(v.get("at_ms")) ? integer(v.get("at_ms")) : 0;
            switch (key.kind()) {
                case "replay": {
                    JsonNode filter = v.get("filter");
                    if (truthy(filter) && !filter.isObject()) {
                        throw new IllegalArgumentException("'filter' is not an object");
                    }
                    return new Decoded(key, new HandoverRecord.Replay(rid, text(required(v, "mode")),
                            text(required(v, "replay_group")), optionalText(v.get("live_group")), strings(v.get("topics")),
                            truthy(filter) ? (ObjectNode) filter : null, at));
                }
                case "result": {
                    JsonNode result = v.get("result");
                    if (truthy(result) && !result.isObject()) {
                        throw new IllegalArgumentException("'result' is not an object");
                    }
                    return new Decoded(key, new HandoverRecord.Result(rid, truthy(result) ? result : null, at));
                }
                default:
                    break;
            }
            String t = text(required(v, "topic"));
            long p = integer(required(v, "partition"));
            if (!t.equals(key.topic()) || key.partition() == null || p != key.partition()) {
                throw new HandoverFormatException("value of " + key + " names " + t + "[" + p + "]");
            }
            int partition = (int) p;
            HandoverRecord record = switch (key.kind()) {
                case "start" -> new HandoverRecord.Start(rid, t, partition, integer(required(v, "offset")),
                        optionalInteger(v.get("end_offset")), optionalInteger(v.get("end_timestamp_ms")),
                        truthy(v.get("clamped")), at);
                case "handover" -> new HandoverRecord.Handover(rid, t, partition, integer(required(v, "offset")),
                        textOr(v.get("reason"), ""), textOr(v.get("by"), "replay"), at);
                case "guard" -> new HandoverRecord.Guard(rid, t, partition, integer(required(v, "first_skipped")),
                        integer(required(v, "seen_until")), textOr(v.get("member"), ""), at);
                case "progress" -> new HandoverRecord.Progress(rid, t, partition, integer(required(v, "position")),
                        truthy(v.get("at_end")), textOr(v.get("member"), ""), at);
                case "ack" -> new HandoverRecord.Ack(rid, t, partition, integer(required(v, "offset")),
                        integer(required(v, "committed")), textOr(v.get("member"), ""), at);
                default -> null;
            };
            if (record == null) {
                throw new HandoverFormatException("unknown record kind '" + key.kind() + "'");
            }
            return new Decoded(key, record);
        } catch (IllegalArgumentException e) {
            throw new HandoverFormatException("value of " + key + " is missing or has a bad field: " + e.getMessage());
        }
    }

    // -- Python's conversions, so that both sides accept and refuse the same values

    private static JsonNode required(JsonNode v, String field) {
        JsonNode found = v.get(field);
        if (found == null) {
            throw new IllegalArgumentException("'" + field + "'");
        }
        return found;
    }

    /** Python's {@code int(x)}: integers, floats truncated, booleans, integer strings. */
    static long integer(JsonNode node) {
        if (node == null || node.isNull()) {
            throw new IllegalArgumentException("expected a number, got null");
        }
        if (node.isBoolean()) {
            return node.booleanValue() ? 1 : 0;
        }
        if (node.isIntegralNumber()) {
            BigInteger big = node.bigIntegerValue();
            if (big.bitLength() > 63) {
                throw new IllegalArgumentException("number out of range: " + big);
            }
            return big.longValue();
        }
        if (node.isNumber()) {
            double d = node.doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                throw new IllegalArgumentException("cannot convert " + d + " to an integer");
            }
            return new BigDecimal(d).toBigInteger().longValueExact();
        }
        if (node.isTextual()) {
            String s = node.textValue().strip().replace("_", "");
            try {
                return Long.parseLong(s.startsWith("+") ? s.substring(1) : s);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("invalid integer: '" + node.textValue() + "'");
            }
        }
        throw new IllegalArgumentException("expected a number, got " + node.getNodeType());
    }

    private static Long optionalInteger(JsonNode node) {
        return node == null || node.isNull() ? null : integer(node);
    }

    /** Python's truthiness of a JSON value. */
    static boolean truthy(JsonNode node) {
        if (node == null || node.isNull()) {
            return false;
        }
        if (node.isBoolean()) {
            return node.booleanValue();
        }
        if (node.isNumber()) {
            return node.doubleValue() != 0 || (node.isIntegralNumber() && node.bigIntegerValue().signum() != 0);
        }
        if (node.isTextual()) {
            return !node.textValue().isEmpty();
        }
        return node.size() > 0;
    }

    /** Python's {@code str(x)} of a JSON scalar (records written by the reference always carry strings). */
    private static String text(JsonNode node) {
        if (node.isTextual()) {
            return node.textValue();
        }
        if (node.isNull()) {
            return "None";
        }
        if (node.isBoolean()) {
            return node.booleanValue() ? "True" : "False";
        }
        if (node.isValueNode()) {
            return node.isIntegralNumber() ? node.bigIntegerValue().toString() : CompactJson.write(node);
        }
        throw new IllegalArgumentException("expected a string, got " + node.getNodeType());
    }

    private static String textOr(JsonNode node, String fallback) {
        return node == null ? fallback : text(node);
    }

    private static String optionalText(JsonNode node) {
        return node == null || node.isNull() ? null : text(node);
    }

    private static List<String> strings(JsonNode node) {
        List<String> out = new ArrayList<>();
        if (!truthy(node)) {
            return out;
        }
        if (!node.isArray()) {
            throw new IllegalArgumentException("'topics' is not a list");
        }
        for (JsonNode item : node) {
            out.add(text(item));
        }
        return out;
    }
}
