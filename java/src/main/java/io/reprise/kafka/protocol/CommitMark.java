package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;

/**
 * Metadata on a committed offset, recording what a side did atomically with the offset itself (HANDOVER.md
 * section 3): {@code {"reprise":1,"replay":"<id>",...}}.
 * <ul>
 * <li>replay group, {@code finished}: this partition is finished at the committed offset (= its H);</li>
 * <li>live group, {@code skip_from} F: matching records in [F, committed) were skipped, not processed;</li>
 * <li>live group, {@code reread_until} U: records in [committed, U) that do not match were processed already.</li>
 * </ul>
 * Any other metadata is not Reprise's and is ignored.
 */
public record CommitMark(String replayId, String finished, Long skipFrom, Long rereadUntil) {

    public static CommitMark finished(String replayId, String reason) {
        return new CommitMark(replayId, reason, null, null);
    }

    public static CommitMark skipFrom(String replayId, long firstSkipped) {
        return new CommitMark(replayId, null, firstSkipped, null);
    }

    public static CommitMark rereadUntil(String replayId, long until) {
        return new CommitMark(replayId, null, null, until);
    }

    public String encode() {
        ObjectNode body = CompactJson.NODES.objectNode();
        body.put("reprise", HandoverWire.FORMAT_VERSION);
        body.put("replay", replayId);
        if (finished != null) {
            body.put("finished", finished);
        }
        if (skipFrom != null) {
            body.put("skip_from", skipFrom);
        }
        if (rereadUntil != null) {
            body.put("reread_until", rereadUntil);
        }
        return CompactJson.write(body);
    }

    /** The mark in a committed offset's metadata; null when there is none (or it is someone else's). */
    public static CommitMark decode(String text) {
        if (text == null || text.isEmpty() || !text.startsWith("{")) {
            return null;
        }
        JsonNode body;
        try {
            body = CompactJson.parse(text);
        } catch (IOException e) {
            return null;
        }
        if (!body.isObject() || !body.has("reprise") || !body.path("replay").isTextual()) {
            return null;
        }
        JsonNode finished = body.get("finished");
        return new CommitMark(body.get("replay").textValue(),
                finished == null || finished.isNull() ? null : finished.isTextual() ? finished.textValue() : CompactJson.write(finished),
                optional(body.get("skip_from")), optional(body.get("reread_until")));
    }

    private static Long optional(JsonNode node) {
        return node == null || node.isNull() ? null : HandoverWire.integer(node);
    }

    /** The live group owns the partition from H on: its committed offset is at or past H, with no mark pending. */
    public static boolean ackDue(long handoverOffset, Long committed, CommitMark mark) {
        if (committed == null || committed < handoverOffset) {
            return false;
        }
        return mark == null || (mark.skipFrom == null && mark.rereadUntil == null);
    }
}
