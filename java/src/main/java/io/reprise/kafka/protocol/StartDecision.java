package io.reprise.kafka.protocol;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where a replay starts and ends on one partition: the specs ({@link Start}, {@link End}) and the pure
 * decision, ported from {@code replay_worker/protocol/start_position.py} and held to it by the conformance vectors.
 *
 * <ul>
 *   <li>A timestamp start is the earliest offset whose timestamp is {@code >= T}. Kafka answers "no such
 *       offset" (-1) when no record is that new: the partition then starts at its end offset.</li>
 *   <li>A start older than the log-start offset is an error ({@link OlderThanRetention}) unless clamping is
 *       allowed: records the replay was asked for are gone, and a replay must say so (Kafka's own tool clamps
 *       silently).</li>
 *   <li>The start is resolved once, in the bootstrap; a duration back from now becomes a timestamp at that
 *       moment, so every replica and restart agrees on it. A partition that already has a committed offset in
 *       the replay group keeps it.</li>
 * </ul>
 *
 * <p>The I/O (watermarks, {@code offsetsForTimes}) is the bootstrap's; this class only decides.
 *
 * @param topic the partition's topic
 * @param partition the partition
 * @param offset S, the first offset the replay processes
 * @param clamped the asked-for start was below the log start and clamping was allowed
 * @param endOffset the exclusive end offset of a bounded replay, when known now (else null)
 * @param endTimestampMs a timestamp end in the future: the first record at or after it ends the partition
 */
public record StartDecision(
        String topic, int partition, long offset, boolean clamped, Long endOffset, Long endTimestampMs) {

    /**
     * A start or end spec that cannot be understood, or cannot be honoured on a partition; the message says what is
     * accepted. {@link #code} is the conformance vectors' stable error code, {@link #field} the member at fault.
     */
    public static final class SpecException extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;
        private final String code;
        private final String field;

        public SpecException(String code, String field, String message) {
            super(message);
            this.code = code;
            this.field = field;
        }

        public String code() {
            return code;
        }

        public String field() {
            return field;
        }
    }

    /** The asked-for start is below the log-start offset: records the replay should cover were deleted. */
    public static final class OlderThanRetention extends RuntimeException {
        private static final long serialVersionUID = 1L;
        private final String topic;
        private final int partition;
        private final long logStart;

        public OlderThanRetention(String topic, int partition, Long requested, long logStart, String what) {
            super("start of " + topic + "[" + partition + "] (" + (requested != null ? "offset " + requested : what)
                    + ") is older than the partition's log-start offset " + logStart
                    + ": those records were deleted by retention. Replay them from the lake (a LakeReplay), or allow "
                    + "clamping (REPRISE_ALLOW_CLAMP=true / --allow-clamp) to start at offset " + logStart
                    + " instead");
            this.topic = topic;
            this.partition = partition;
            this.logStart = logStart;
        }

        public String topic() {
            return topic;
        }

        public int partition() {
            return partition;
        }

        public long logStart() {
            return logStart;
        }

        /** The conformance vectors' error code. */
        public String code() {
            return "start-older-than-retention";
        }
    }

    /** What Kafka said about one partition at bootstrap. */
    public record PartitionFacts(
            String topic, int partition, long logStart, long end, Long timeLookup, Long endTimeLookup) {
        public PartitionFacts(String topic, int partition, long logStart, long end) {
            this(topic, partition, logStart, end, null, null);
        }
    }

    /** The kinds of start. */
    public enum StartKind {
        EARLIEST,
        TIMESTAMP,
        DURATION,
        OFFSETS
    }

    /** The kinds of end bound. */
    public enum EndKind {
        SNAPSHOT,
        TIMESTAMP,
        OFFSETS
    }

    /** Where the replay starts: earliest, a timestamp, a duration back from now, or explicit offsets. */
    public record Start(
            StartKind kind, Long timestampMs, Double durationSeconds, Map<String, Map<Integer, Long>> offsets) {

        public static final Start EARLIEST = new Start(StartKind.EARLIEST, null, null, Map.of());

        /** Parses {@code REPRISE_START}: JSON text (or a bare kind name). */
        public static Start parse(String text) {
            return parse(readSpec(text, "start"), "start");
        }

        public static Start parse(JsonNode spec, String what) {
            Object[] found = oneOf(spec, new String[] {"earliest", "timestamp", "duration", "offsets"}, what);
            String kind = (String) found[0];
            JsonNode value = (JsonNode) found[1];
            return switch (kind) {
                case "earliest" -> EARLIEST;
                case "timestamp" -> new Start(StartKind.TIMESTAMP, msFrom(value, what + ".timestamp"), null, Map.of());
                case "duration" -> new Start(
                        StartKind.DURATION, null, parseDuration(value, what + ".duration"), Map.of());
                default -> new Start(StartKind.OFFSETS, null, null, parseOffsets(value, what + ".offsets"));
            };
        }

        /** The timestamp to look up with {@code offsetsForTimes}, or null when the spec is not time-based. */
        public Long lookupTimestamp(long nowMs) {
            if (kind == StartKind.TIMESTAMP) {
                return timestampMs;
            }
            if (kind == StartKind.DURATION) {
                return nowMs - (long) (durationSeconds * 1000);
            }
            return null;
        }

        /** The canonical JSON form (what {@code to_json} of the reference writes). */
        public String toJson() {
            ObjectNode body = JsonNodeFactory.instance.objectNode();
            switch (kind) {
                case EARLIEST -> body.put("type", "earliest");
                case TIMESTAMP -> body.put("type", "timestamp").put("timestamp", timestampMs);
                case DURATION -> body.put("type", "duration").put("duration", durationSeconds);
                default -> body.put("type", "offsets").set("offsets", offsetsNode(offsets));
            }
            return CompactJson.write(body); // JsonNode.toString would build an ObjectMapper
        }
    }

    /** An optional bounded end: the end offsets at bootstrap ({@code snapshot}), a timestamp, or offsets. */
    public record End(EndKind kind, Long timestampMs, Map<String, Map<Integer, Long>> offsets) {

        /** Parses {@code REPRISE_END}. */
        public static End parse(String text) {
            return parse(readSpec(text, "end"), "end");
        }

        public static End parse(JsonNode spec, String what) {
            Object[] found = oneOf(spec, new String[] {"snapshot", "timestamp", "offsets"}, what);
            String kind = (String) found[0];
            JsonNode value = (JsonNode) found[1];
            return switch (kind) {
                case "snapshot" -> new End(EndKind.SNAPSHOT, null, Map.of());
                case "timestamp" -> new End(EndKind.TIMESTAMP, msFrom(value, what + ".timestamp"), Map.of());
                default -> new End(EndKind.OFFSETS, null, parseOffsets(value, what + ".offsets"));
            };
        }

        public String toJson() {
            ObjectNode body = JsonNodeFactory.instance.objectNode();
            switch (kind) {
                case SNAPSHOT -> body.put("type", "snapshot");
                case TIMESTAMP -> body.put("type", "timestamp").put("timestamp", timestampMs);
                default -> body.put("type", "offsets").set("offsets", offsetsNode(offsets));
            }
            return CompactJson.write(body); // JsonNode.toString would build an ObjectMapper
        }
    }

    // ------------------------------------------------------------------------------------------- decisions

    /** The start offset of one partition, or {@link OlderThanRetention}. */
    public static StartDecision decideStart(Start spec, PartitionFacts facts, boolean allowClamp) {
        String t = facts.topic();
        int p = facts.partition();
        switch (spec.kind()) {
            case EARLIEST:
                return new StartDecision(t, p, facts.logStart(), false, null, null);
            case OFFSETS: {
                Long wanted = spec.offsets().getOrDefault(t, Map.of()).get(p);
                if (wanted == null) {
                    throw new SpecException(
                            "missing-partition-offset",
                            "start.offsets",
                            "start.offsets has no offset for " + t + "[" + p
                                    + "]: give one for every partition of the topics");
                }
                if (wanted > facts.end()) {
                    throw new SpecException(
                            "offset-beyond-end",
                            "start.offsets",
                            "start.offsets: " + t + "[" + p + "]=" + wanted + " is beyond the partition's end offset "
                                    + facts.end());
                }
                if (wanted < facts.logStart()) {
                    if (!allowClamp) {
                        throw new OlderThanRetention(t, p, wanted, facts.logStart(), "explicit offset");
                    }
                    return new StartDecision(t, p, facts.logStart(), true, null, null);
                }
                return new StartDecision(t, p, wanted, false, null, null);
            }
            default: {
                // Time-based: the earliest offset whose timestamp is >= T.
                Long found = facts.timeLookup();
                if (found == null || found < 0) {
                    // No record is that new: start at the end (nothing of this partition is replayed).
                    return new StartDecision(t, p, facts.end(), false, null, null);
                }
                if (found == facts.logStart() && facts.logStart() > 0) {
                    // Every retained record is newer than T and older ones were deleted: some of the asked-for
                    // records may be gone. Say so unless the user accepted it.
                    if (!allowClamp) {
                        throw new OlderThanRetention(t, p, null, facts.logStart(), "the start time");
                    }
                    return new StartDecision(t, p, found, true, null, null);
                }
                return new StartDecision(t, p, Math.max(found, facts.logStart()), false, null, null);
            }
        }
    }

    /** {endOffset, endTimestampMs} of one partition; both null when unbounded. */
    public static Long[] decideEnd(End spec, PartitionFacts facts, long nowMs) {
        if (spec == null) {
            return new Long[] {null, null};
        }
        switch (spec.kind()) {
            case SNAPSHOT:
                return new Long[] {facts.end(), null};
            case OFFSETS: {
                Long end = spec.offsets().getOrDefault(facts.topic(), Map.of()).get(facts.partition());
                if (end == null) {
                    throw new SpecException(
                            "missing-partition-offset",
                            "end.offsets",
                            "end.offsets has no offset for " + facts.topic() + "[" + facts.partition()
                                    + "]: give one for every partition of the topics");
                }
                return new Long[] {end, null};
            }
            default: {
                Long found = facts.endTimeLookup();
                if (found != null && found >= 0) {
                    return new Long[] {found, null};
                }
                if (spec.timestampMs() <= nowMs) {
                    // No record is that new yet and the time has passed: the end is the end offset now.
                    return new Long[] {facts.end(), null};
                }
                // In the future: decided per record (the first record at or after it ends the partition).
                return new Long[] {null, spec.timestampMs()};
            }
        }
    }

    /**
     * Start and end of one partition. A partition that already has a committed offset in the replay group keeps
     * it: the replay resumes there, and that is what the published start must say.
     */
    public static StartDecision decide(
            Start start, End end, PartitionFacts facts, boolean allowClamp, long nowMs, Long committed) {
        StartDecision decision = committed != null && committed >= 0
                ? new StartDecision(facts.topic(), facts.partition(), committed, false, null, null)
                : decideStart(start, facts, allowClamp);
        Long[] bound = decideEnd(end, facts, nowMs);
        Long endOffset = bound[0];
        if (endOffset != null && endOffset < decision.offset()) {
            endOffset = decision.offset();
        }
        return new StartDecision(
                decision.topic(), decision.partition(), decision.offset(), decision.clamped(), endOffset, bound[1]);
    }

    // ------------------------------------------------------------------------------------------- parsing

    private static final Pattern ISO_DURATION = Pattern.compile("P(?:(\\d+(?:\\.\\d+)?)W)?(?:(\\d+(?:\\.\\d+)?)D)?"
            + "(?:T(?:(\\d+(?:\\.\\d+)?)H)?(?:(\\d+(?:\\.\\d+)?)M)?(?:(\\d+(?:\\.\\d+)?)S)?)?");
    private static final double[] ISO_UNITS = {604800, 86400, 3600, 60, 1};
    private static final Pattern DURATION_PIECE = Pattern.compile("(\\d+(?:\\.\\d+)?)(ms|s|m|h|d|w)");
    private static final Map<String, Double> UNITS =
            Map.of("ms", 0.001, "s", 1.0, "m", 60.0, "h", 3600.0, "d", 86400.0, "w", 604800.0);

    /** Seconds from a number (seconds), {@code 90s}/{@code 15m}/{@code 2h}/{@code 7d}/{@code 1h30m}, or ISO-8601 {@code PT2H}. */
    public static double parseDuration(JsonNode value, String what) {
        double seconds;
        if (value == null || value.isNull() || value.isBoolean()) {
            throw new SpecException("bad-duration", what, what + ": " + repr(value) + " is not a duration");
        }
        if (value.isNumber()) {
            seconds = value.asDouble();
        } else if (value.isTextual()) {
            String text = value.asText().strip();
            Matcher iso = text.toUpperCase().startsWith("P") ? ISO_DURATION.matcher(text.toUpperCase()) : null;
            if (iso != null && iso.matches() && anyGroup(iso)) {
                seconds = 0;
                for (int i = 0; i < ISO_UNITS.length; i++) {
                    String group = iso.group(i + 1);
                    seconds += group == null ? 0 : Double.parseDouble(group) * ISO_UNITS[i];
                }
            } else if (text.matches("\\d+(?:\\.\\d+)?")) {
                seconds = Double.parseDouble(text);
            } else {
                Matcher pieces = DURATION_PIECE.matcher(text);
                StringBuilder joined = new StringBuilder();
                seconds = 0;
                while (pieces.find()) {
                    joined.append(pieces.group(1)).append(pieces.group(2));
                    seconds += Double.parseDouble(pieces.group(1)) * UNITS.get(pieces.group(2));
                }
                if (joined.length() == 0 || !joined.toString().equals(text)) {
                    throw new SpecException(
                            "bad-duration",
                            what,
                            what + ": " + repr(value)
                                    + " is not a duration (use e.g. 90s, 15m, 2h, 7d, 1h30m or PT2H)");
                }
            }
        } else {
            throw new SpecException("bad-duration", what, what + ": " + repr(value) + " is not a duration");
        }
        if (seconds <= 0) {
            throw new SpecException("duration-not-positive", what, what + ": must be positive, got " + repr(value));
        }
        return seconds;
    }

    private static boolean anyGroup(Matcher m) {
        for (int i = 1; i <= m.groupCount(); i++) {
            if (m.group(i) != null) {
                return true;
            }
        }
        return false;
    }

    /** Epoch milliseconds from a number (ms) or an ISO-8601 string (naive means UTC). */
    static long msFrom(JsonNode value, String what) {
        if (value == null || value.isNull() || value.isBoolean()) {
            throw new SpecException(
                    "bad-time", what, what + ": expected epoch milliseconds or an ISO-8601 time, got " + repr(value));
        }
        if (value.isNumber()) {
            return value.asLong();
        }
        if (value.isTextual()) {
            String text = value.asText().strip();
            if (text.matches("-?\\d+")) {
                return Long.parseLong(text);
            }
            String iso = text.replace(' ', 'T');
            try {
                return OffsetDateTime.parse(iso.replace("Z", "+00:00"))
                        .toInstant()
                        .toEpochMilli();
            } catch (DateTimeParseException notOffset) {
                try {
                    return LocalDateTime.parse(iso).toInstant(ZoneOffset.UTC).toEpochMilli();
                } catch (DateTimeParseException notLocal) {
                    try {
                        return LocalDate.parse(iso)
                                .atStartOfDay()
                                .toInstant(ZoneOffset.UTC)
                                .toEpochMilli();
                    } catch (DateTimeParseException notDate) {
                        throw new SpecException(
                                "bad-time",
                                what,
                                what + ": " + repr(value)
                                        + " is not an ISO-8601 time (e.g. 2024-05-01T12:00:00Z) nor epoch milliseconds");
                    }
                }
            }
        }
        throw new SpecException(
                "bad-time", what, what + ": expected epoch milliseconds or an ISO-8601 time, got " + repr(value));
    }

    /** {@code {"topic": {"0": 12}}} or {@code [{"topic": "t", "partition": 0, "offset": 12}, ...]}. */
    static Map<String, Map<Integer, Long>> parseOffsets(JsonNode value, String what) {
        Map<String, Map<Integer, Long>> result = new LinkedHashMap<>();
        try {
            if (value != null && value.isObject()) {
                for (Iterator<Map.Entry<String, JsonNode>> it =
                                value.properties().iterator();
                        it.hasNext(); ) {
                    Map.Entry<String, JsonNode> topic = it.next();
                    if (!topic.getValue().isObject()) {
                        throw new IllegalArgumentException();
                    }
                    Map<Integer, Long> partitions = new LinkedHashMap<>();
                    for (Iterator<Map.Entry<String, JsonNode>> ps =
                                    topic.getValue().properties().iterator();
                            ps.hasNext(); ) {
                        Map.Entry<String, JsonNode> p = ps.next();
                        partitions.put(Integer.parseInt(p.getKey().strip()), wholeNumber(p.getValue()));
                    }
                    result.put(topic.getKey(), partitions);
                }
            } else if (value != null && value.isArray()) {
                for (JsonNode item : value) {
                    if (!item.isObject() || !item.has("topic") || !item.has("partition") || !item.has("offset")) {
                        throw new IllegalArgumentException();
                    }
                    result.computeIfAbsent(item.get("topic").asText(), k -> new LinkedHashMap<>())
                            .put((int) wholeNumber(item.get("partition")), wholeNumber(item.get("offset")));
                }
            } else {
                throw new IllegalArgumentException();
            }
        } catch (IllegalArgumentException bad) {
            String shown = value == null ? "null" : value.toString();
            throw new SpecException(
                    "bad-offsets",
                    what,
                    what + ": expected {\"topic\": {\"0\": 12}} or a list of {topic, partition, offset}, got "
                            + shown.substring(0, Math.min(200, shown.length())));
        }
        for (Map.Entry<String, Map<Integer, Long>> topic : result.entrySet()) {
            for (Map.Entry<Integer, Long> p : topic.getValue().entrySet()) {
                if (p.getKey() < 0 || p.getValue() < 0) {
                    throw new SpecException(
                            "negative-offset",
                            what,
                            what + ": " + topic.getKey() + "[" + p.getKey() + "]=" + p.getValue()
                                    + ": partitions and offsets are >= 0");
                }
            }
        }
        return result;
    }

    private static long wholeNumber(JsonNode node) {
        if (node.isIntegralNumber() || node.isFloatingPointNumber()) {
            return node.asLong();
        }
        if (node.isTextual()) {
            return Long.parseLong(node.asText().strip());
        }
        throw new IllegalArgumentException();
    }

    private static JsonNode readSpec(String text, String what) {
        String trimmed = text.strip();
        if (trimmed.startsWith("{") || trimmed.startsWith("[") || trimmed.startsWith("\"")) {
            try {
                return CompactJson.readTree(trimmed);
            } catch (JsonProcessingException exc) {
                throw new SpecException("not-json", what, what + ": not valid JSON (" + exc.getOriginalMessage() + ")");
            }
        }
        return JsonNodeFactory.instance.textNode(text);
    }

    /** {@code {"type": K, K: value}}, the shorthand {@code {K: value}}, or a bare "K" for value-less kinds. */
    private static Object[] oneOf(JsonNode obj, String[] kinds, String what) {
        String known = String.join(", ", kinds);
        if (obj.isTextual()) {
            for (String kind : kinds) {
                if (kind.equals(obj.asText())) {
                    return new Object[] {kind, null};
                }
            }
            throw new SpecException("unknown-type", what, what + ": " + repr(obj) + " is not one of " + known);
        }
        if (!obj.isObject()) {
            String shown = obj.toString();
            throw new SpecException(
                    "not-an-object",
                    what,
                    what + ": expected a JSON object, got " + shown.substring(0, Math.min(200, shown.length())));
        }
        if (obj.has("type")) {
            String kind = obj.get("type").asText();
            for (String k : kinds) {
                if (k.equals(kind) && obj.get("type").isTextual()) {
                    return new Object[] {k, obj.get(k)};
                }
            }
            throw new SpecException(
                    "unknown-type", what, what + ": type " + repr(obj.get("type")) + " is not one of " + known);
        }
        List<String> present = new ArrayList<>();
        for (String k : kinds) {
            if (obj.has(k)) {
                present.add(k);
            }
        }
        if (present.size() != 1) {
            List<String> names = new ArrayList<>();
            obj.fieldNames().forEachRemaining(names::add);
            names.sort(null);
            throw new SpecException(
                    "ambiguous-type", what, what + ": give exactly one of " + known + " (got " + pyList(names) + ")");
        }
        return new Object[] {present.get(0), obj.get(present.get(0))};
    }

    private static ObjectNode offsetsNode(Map<String, Map<Integer, Long>> offsets) {
        ObjectNode node = JsonNodeFactory.instance.objectNode();
        offsets.forEach((topic, partitions) -> {
            ObjectNode ps = node.putObject(topic);
            partitions.forEach((p, o) -> ps.put(String.valueOf(p), o));
        });
        return node;
    }

    /** How the reference shows a value in its messages (Python's repr), so both say the same. */
    static String repr(JsonNode value) {
        if (value == null || value.isNull()) {
            return "None";
        }
        if (value.isBoolean()) {
            return value.asBoolean() ? "True" : "False";
        }
        if (value.isTextual()) {
            return "'" + value.asText() + "'";
        }
        return value.toString();
    }

    private static String pyList(List<String> names) {
        List<String> quoted = new ArrayList<>();
        for (String n : names) {
            quoted.add("'" + n + "'");
        }
        return "[" + String.join(", ", quoted) + "]";
    }
}
