package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.math.BigInteger;

/**
 * Metadata on a committed offset, recording what a side did atomically with the offset itself (HANDOVER.md
 * section 3): {@code {"reprise":1,"replay":"<id>",...}}.
 * <ul>
 * <li>replay group, {@code finished}: this partition is finished at the committed offset (= its H);</li>
 * <li>live group, {@code skip_from} F: matching records in [F, committed) were skipped, not processed;</li>
 * <li>live group, {@code reread_until} U: records in [committed, U) that do not match were processed already.</li>
 * </ul>
 * Metadata is Reprise's when it is a JSON object with a {@code reprise} member; anything else is not Reprise's and
 * is ignored. A Reprise mark this reader cannot use (a newer format version, or malformed) comes back with
 * {@code problem} set ({@code newer-version}, {@code malformed}) and no fields: it says nothing reliable about
 * what was skipped or processed below the offset.
 */
public record CommitMark(String replayId, String finished, Long skipFrom, Long rereadUntil, String problem) {

    public CommitMark(String replayId, String finished, Long skipFrom, Long rereadUntil) {
        this(replayId, finished, skipFrom, rereadUntil, null);
    }

    public static CommitMark finished(String replayId, String reason) {
        return new CommitMark(replayId, reason, null, null);
    }

    public static CommitMark skipFrom(String replayId, long firstSkipped) {
        return new CommitMark(replayId, null, firstSkipped, null);
    }

    public static CommitMark rereadUntil(String replayId, long until) {
        return new CommitMark(replayId, null, null, until);
    }

    /** False for a Reprise mark this reader cannot read. */
    public boolean usable() {
        return problem == null;
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
            body = CompactJson.parseRecord(text); // deeper than MAX_DEPTH: not JSON the protocol reads, so no mark
        } catch (IOException | RuntimeException e) {
            return null;
        }
        if (!body.isObject() || !body.has("reprise")) {
            return null;
        }
        JsonNode version = body.get("reprise");
        JsonNode replay = body.get("replay");
        String replayId = replay != null && replay.isTextual() ? replay.textValue() : "";
        if (!version.isIntegralNumber() || version.bigIntegerValue().signum() < 1) {
            return unusable(replayId, "malformed");
        }
        if (version.bigIntegerValue().compareTo(BigInteger.valueOf(HandoverWire.FORMAT_VERSION)) > 0) {
            return unusable(replayId, "newer-version");
        }
        JsonNode finished = body.get("finished");
        JsonNode skipFrom = body.get("skip_from");
        JsonNode rereadUntil = body.get("reread_until");
        if (replay == null
                || !replay.isTextual()
                || !(absent(finished) || finished.isTextual())
                || !(absent(skipFrom) || isLong(skipFrom))
                || !(absent(rereadUntil) || isLong(rereadUntil))) {
            return unusable(replayId, "malformed");
        }
        return new CommitMark(
                replayId,
                absent(finished) ? null : finished.textValue(),
                absent(skipFrom) ? null : skipFrom.longValue(),
                absent(rereadUntil) ? null : rereadUntil.longValue());
    }

    private static CommitMark unusable(String replayId, String problem) {
        return new CommitMark(replayId, null, null, null, problem);
    }

    private static boolean absent(JsonNode node) {
        return node == null || node.isNull();
    }

    private static boolean isLong(JsonNode node) {
        return node.isIntegralNumber() && node.bigIntegerValue().bitLength() <= 63;
    }

    /** The live group owns the partition from H on: its committed offset is at or past H, with no mark pending. */
    public static boolean ackDue(long handoverOffset, Long committed, CommitMark mark) {
        if (committed == null || committed < handoverOffset) {
            return false;
        }
        return mark == null || (mark.usable() && mark.skipFrom == null && mark.rereadUntil == null);
    }
}
