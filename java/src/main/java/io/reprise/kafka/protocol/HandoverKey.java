package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * The key of a handover-topic record: {@code ["<replay id>","<kind>"]} or
 * {@code ["<replay id>","<kind>","<topic>",<partition>]}, compact JSON in UTF-8 (JSON because replay ids
 * contain {@code /}). The compacted topic keeps one value per key.
 *
 * @param topic     null for the per-replay kinds ({@code replay}, {@code result})
 * @param partition null when {@code topic} is null
 */
public record HandoverKey(String replayId, String kind, String topic, Integer partition) {

    public static HandoverKey of(String replayId, String kind) {
        return new HandoverKey(replayId, kind, null, null);
    }

    public static HandoverKey of(String replayId, String kind, String topic, int partition) {
        return new HandoverKey(replayId, kind, topic, partition);
    }

    public byte[] encode() {
        ArrayNode parts = CompactJson.NODES.arrayNode();
        parts.add(replayId).add(kind);
        if (topic != null) {
            parts.add(topic).add(partition == null ? -1 : partition);
        }
        return CompactJson.bytes(parts);
    }

    public static HandoverKey decode(byte[] raw) throws HandoverFormatException {
        JsonNode parts = null;
        if (raw != null && raw.length <= JsonLimits.MAX_RECORD_KEY_BYTES) {
            try {
                parts = CompactJson.parseRecord(raw);
            } catch (IOException | RuntimeException e) {
                parts = null; // every way a key fails to parse is the protocol's malformed-key
            }
        }
        if (parts == null
                || !parts.isArray()
                || (parts.size() != 2 && parts.size() != 4)
                || !parts.get(0).isTextual()
                || !parts.get(1).isTextual()) {
            throw new HandoverFormatException("not a handover key: " + show(raw), "malformed-key");
        }
        if (parts.size() == 4) {
            JsonNode partition = parts.get(3);
            if (!parts.get(2).isTextual() || !partition.isIntegralNumber() || !partition.canConvertToInt()) {
                throw new HandoverFormatException("not a handover key: " + show(raw), "malformed-key");
            }
            return new HandoverKey(
                    parts.get(0).textValue(),
                    parts.get(1).textValue(),
                    parts.get(2).textValue(),
                    partition.intValue());
        }
        return new HandoverKey(parts.get(0).textValue(), parts.get(1).textValue(), null, null);
    }

    /** The key for a message, cut at 200 characters (a key may be megabytes). */
    static String show(byte[] raw) {
        if (raw == null) {
            return "null";
        }
        String text = new String(raw, 0, Math.min(raw.length, 200), StandardCharsets.UTF_8);
        return raw.length > 200 ? text + "... (" + raw.length + " bytes)" : text;
    }

    @Override
    public String toString() {
        return topic == null ? replayId + "/" + kind : replayId + "/" + kind + "/" + topic + "[" + partition + "]";
    }
}
