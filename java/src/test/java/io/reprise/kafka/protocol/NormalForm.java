package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;

/** The vectors' normal form of a record: its value without {@code v}, every field of its kind present. */
final class NormalForm {
    private NormalForm() {}

    static ObjectNode of(HandoverRecord record) {
        HandoverWire.Encoded encoded = HandoverWire.encode(record);
        ObjectNode value;
        try {
            value = (ObjectNode) CompactJson.parse(encoded.value());
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
        value.remove("v");
        return value;
    }

    static HandoverRecord record(JsonNode n) {
        String rid = n.get("replay_id").textValue();
        long at = n.path("at_ms").asLong(0);
        return switch (n.get("kind").textValue()) {
            case "replay" -> {
                List<String> topics = new ArrayList<>();
                n.path("topics").forEach(t -> topics.add(t.textValue()));
                yield new HandoverRecord.Replay(
                        rid,
                        n.get("mode").textValue(),
                        n.get("replay_group").textValue(),
                        text(n.get("live_group")),
                        topics,
                        (ObjectNode) n.get("filter"),
                        at);
            }
            case "start" -> new HandoverRecord.Start(
                    rid,
                    n.get("topic").textValue(),
                    n.get("partition").intValue(),
                    n.get("offset").longValue(),
                    number(n.get("end_offset")),
                    number(n.get("end_timestamp_ms")),
                    n.path("clamped").asBoolean(false),
                    at);
            case "handover" -> new HandoverRecord.Handover(
                    rid,
                    n.get("topic").textValue(),
                    n.get("partition").intValue(),
                    n.get("offset").longValue(),
                    n.get("reason").textValue(),
                    n.get("by").textValue(),
                    at);
            case "guard" -> new HandoverRecord.Guard(
                    rid,
                    n.get("topic").textValue(),
                    n.get("partition").intValue(),
                    number(n.get("first_skipped")),
                    number(n.get("seen_until")),
                    n.get("member").textValue(),
                    at,
                    text(n.get("problem")));
            case "ack" -> new HandoverRecord.Ack(
                    rid,
                    n.get("topic").textValue(),
                    n.get("partition").intValue(),
                    n.get("offset").longValue(),
                    n.get("committed").longValue(),
                    n.get("member").textValue(),
                    at);
            case "progress" -> new HandoverRecord.Progress(
                    rid,
                    n.get("topic").textValue(),
                    n.get("partition").intValue(),
                    n.get("position").longValue(),
                    n.path("at_end").asBoolean(false),
                    n.get("member").textValue(),
                    at);
            case "result" -> new HandoverRecord.Result(rid, n.get("result"), at);
            default -> throw new AssertionError("unknown kind in a vector: " + n);
        };
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.textValue();
    }

    private static Long number(JsonNode node) {
        return node == null || node.isNull() ? null : node.longValue();
    }
}
