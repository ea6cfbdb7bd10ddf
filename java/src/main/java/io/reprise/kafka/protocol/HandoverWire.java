package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeType;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
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

    private HandoverWire() {}

    /** Key and value bytes of one record; a null value is a tombstone. */
    public record Encoded(byte[] key, byte[] value) {}

    /** A decoded message: its key and its record, or null for a tombstone. */
    public record Decoded(HandoverKey key, HandoverRecord record) {}

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
            if (g.problem() != null) {
                v.put("problem", g.problem());
            }
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

    /** The kinds of record the protocol has. */
    public static final java.util.Set<String> KINDS =
            java.util.Set.of("replay", "start", "handover", "guard", "ack", "progress", "result");

    /**
     * The record of one handover-topic message (a null record for a tombstone). Refusals carry a code, checked in
     * this order: {@code malformed-key} (also longer than 4096 bytes or nested deeper than 64), {@code too-large} (a
     * value above 1 MiB), {@code malformed-value} (nested deeper than 64, not a JSON object, or {@code v} not an
     * integer),
     * {@code newer-version}, {@code kind-mismatch}, {@code unknown-kind}, {@code key-mismatch} (the key's shape is
     * not its kind's, or the value names another partition), {@code bad-field} (a required field missing or null,
     * or a field of the wrong JSON type; unknown fields are ignored).
     */
    public static Decoded decode(byte[] rawKey, byte[] rawValue) throws HandoverFormatException {
        HandoverKey key = HandoverKey.decode(rawKey);
        if (rawValue == null) {
            return new Decoded(key, null);
        }
        if (rawValue.length > JsonLimits.MAX_RECORD_VALUE_BYTES) {
            throw new HandoverFormatException(
                    "value of " + key + " is " + rawValue.length + " bytes, more than the limit of "
                            + JsonLimits.MAX_RECORD_VALUE_BYTES,
                    "too-large");
        }
        JsonNode v;
        try {
            v = CompactJson.parseRecord(rawValue);
        } catch (IOException | RuntimeException e) {
            // Nested deeper than MAX_DEPTH or not JSON: one code, as a value can be both and every port must agree.
            throw new HandoverFormatException(
                    "value of " + key + " is not JSON nested at most " + JsonLimits.MAX_DEPTH + " deep",
                    "malformed-value");
        }
        if (!v.isObject() || (v.has("v") && !isInteger(v.get("v")))) {
            throw new HandoverFormatException("value of " + key + " is not a handover record", "malformed-value");
        }
        if (v.has("v") && v.get("v").bigIntegerValue().compareTo(BigInteger.valueOf(FORMAT_VERSION)) > 0) {
            throw new HandoverFormatException(
                    key + " has format version " + v.get("v") + ", newer than " + FORMAT_VERSION
                            + ": this reader is older than its writer",
                    "newer-version");
        }
        JsonNode kind = v.get("kind");
        if (kind == null || !kind.isTextual() || !kind.textValue().equals(key.kind())) {
            throw new HandoverFormatException(
                    "value of " + key + " does not say kind '" + key.kind() + "'", "kind-mismatch");
        }
        if (!KINDS.contains(key.kind())) {
            throw new HandoverFormatException("unknown record kind '" + key.kind() + "'", "unknown-kind");
        }
        boolean replayWide = key.kind().equals("replay") || key.kind().equals("result");
        if ((key.topic() == null) != replayWide) {
            throw new HandoverFormatException(
                    "a " + key.kind() + " record has no key of this shape: " + key, "key-mismatch");
        }
        String rid = key.replayId();
        try {
            long at = optionalLong(v, "at_ms", 0L);
            if (key.kind().equals("replay")) {
                List<String> topics = new ArrayList<>();
                JsonNode rawTopics = field(v, "topics", JsonNodeType.ARRAY, false);
                if (rawTopics != null) {
                    for (JsonNode t : rawTopics) {
                        if (!t.isTextual()) {
                            throw new IllegalArgumentException("topics is not a list of strings");
                        }
                        topics.add(t.textValue());
                    }
                }
                JsonNode filter = field(v, "filter", JsonNodeType.OBJECT, false);
                JsonNode live = field(v, "live_group", JsonNodeType.STRING, false);
                return new Decoded(
                        key,
                        new HandoverRecord.Replay(
                                rid,
                                field(v, "mode", JsonNodeType.STRING, true).textValue(),
                                field(v, "replay_group", JsonNodeType.STRING, true)
                                        .textValue(),
                                live == null ? null : live.textValue(),
                                topics,
                                (ObjectNode) filter,
                                at));
            }
            if (key.kind().equals("result")) {
                return new Decoded(
                        key, new HandoverRecord.Result(rid, field(v, "result", JsonNodeType.OBJECT, false), at));
            }
            String t = field(v, "topic", JsonNodeType.STRING, true).textValue();
            long p = requiredLong(v, "partition");
            if (!t.equals(key.topic()) || p != key.partition()) {
                throw new HandoverFormatException("value of " + key + " names " + t + "[" + p + "]", "key-mismatch");
            }
            int partition = key.partition();
            HandoverRecord record =
                    switch (key.kind()) {
                        case "start" -> new HandoverRecord.Start(
                                rid,
                                t,
                                partition,
                                requiredLong(v, "offset"),
                                optionalLong(v, "end_offset", null),
                                optionalLong(v, "end_timestamp_ms", null),
                                optionalBoolean(v, "clamped"),
                                at);
                        case "handover" -> new HandoverRecord.Handover(
                                rid,
                                t,
                                partition,
                                requiredLong(v, "offset"),
                                optionalText(v, "reason", ""),
                                optionalText(v, "by", "replay"),
                                at);
                        case "guard" -> new HandoverRecord.Guard(
                                rid,
                                t,
                                partition,
                                optionalLong(v, "first_skipped", null),
                                optionalLong(v, "seen_until", null),
                                optionalText(v, "member", ""),
                                at,
                                optionalText(v, "problem", null));
                        case "progress" -> new HandoverRecord.Progress(
                                rid,
                                t,
                                partition,
                                requiredLong(v, "position"),
                                optionalBoolean(v, "at_end"),
                                optionalText(v, "member", ""),
                                at);
                        default -> new HandoverRecord.Ack(
                                rid,
                                t,
                                partition,
                                requiredLong(v, "offset"),
                                requiredLong(v, "committed"),
                                optionalText(v, "member", ""),
                                at);
                    };
            return new Decoded(key, record);
        } catch (IllegalArgumentException e) {
            throw new HandoverFormatException(
                    "value of " + key + " is missing or has a bad field: " + e.getMessage(), "bad-field");
        }
    }

    /** A JSON integer: not true/false, not 1.5 or "1". */
    static boolean isInteger(JsonNode node) {
        return node != null && node.isIntegralNumber();
    }

    /** A field with its JSON type; absent or null gives null, or fails when {@code required}. */
    private static JsonNode field(JsonNode body, String name, JsonNodeType type, boolean required) {
        JsonNode value = body.get(name);
        if (value == null || value.isNull()) {
            if (required) {
                throw new IllegalArgumentException("'" + name + "' is missing");
            }
            return null;
        }
        if (value.getNodeType() != type) {
            throw new IllegalArgumentException(
                    "'" + name + "' is not a JSON " + type.name().toLowerCase(java.util.Locale.ROOT));
        }
        return value;
    }

    private static long requiredLong(JsonNode body, String name) {
        Long value = optionalLong(body, name, null);
        if (value == null) {
            throw new IllegalArgumentException("'" + name + "' is missing");
        }
        return value;
    }

    private static Long optionalLong(JsonNode body, String name, Long fallback) {
        JsonNode value = body.get(name);
        if (value == null || value.isNull()) {
            return fallback;
        }
        if (!value.isIntegralNumber()) {
            throw new IllegalArgumentException("'" + name + "' is not a JSON integer");
        }
        if (value.bigIntegerValue().bitLength() > 63) {
            throw new IllegalArgumentException("'" + name + "' is out of range");
        }
        return value.longValue();
    }

    private static boolean optionalBoolean(JsonNode body, String name) {
        JsonNode value = field(body, name, JsonNodeType.BOOLEAN, false);
        return value != null && value.booleanValue();
    }

    private static String optionalText(JsonNode body, String name, String fallback) {
        JsonNode value = field(body, name, JsonNodeType.STRING, false);
        return value == null ? fallback : value.textValue();
    }

    /** Python's truthiness of a JSON value (how the reference reads optional filter parts). */
    static boolean truthy(JsonNode node) {
        if (node == null || node.isNull()) {
            return false;
        }
        if (node.isBoolean()) {
            return node.booleanValue();
        }
        if (node.isNumber()) {
            return node.isIntegralNumber() ? node.bigIntegerValue().signum() != 0 : node.doubleValue() != 0;
        }
        if (node.isTextual()) {
            return !node.textValue().isEmpty();
        }
        return node.size() > 0;
    }
}
