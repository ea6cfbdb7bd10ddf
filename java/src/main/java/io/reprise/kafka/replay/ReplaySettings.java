package io.reprise.kafka.replay;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.protocol.CompactJson;
import io.reprise.kafka.protocol.FilterSpec;
import io.reprise.kafka.protocol.FilterSpecException;
import io.reprise.kafka.protocol.StartDecision;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * The replay role's settings, from the same {@code REPRISE_*} environment contract as the Python worker
 * ({@code replay_worker/settings.py}, {@code WorkerSettings.from_env}): the same variable names, defaults and
 * checks, and errors that name the variable. The operator writes these variables into the replay Deployment; in
 * the Java role the handler is the service's code, so {@code REPRISE_HANDLER} is only informational, and what
 * {@link #UNSUPPORTED} lists (a forward, a backfill, follow) is refused with the way to get it
 * ({@code python -m replay_worker}). The table of every variable is {@code docs/settings.md}; the vectors
 * {@code conformance/vectors/settings.json} hold this parser to it.
 *
 * <p>Kafka credentials are never settings: they are files in {@code REPRISE_KAFKA_CONFIG_DIR} (see
 * {@link KafkaClientConfig}).
 *
 * @param bootstrapServers {@code REPRISE_BOOTSTRAP_SERVERS}: Kafka's bootstrap servers. Required.
 * @param replayId {@code REPRISE_REPLAY_ID}: names this replay in the handover topic. Required; its presence is
 *     what asks a service to run the replay role (see {@link ReplayRole#requested}).
 * @param topics {@code REPRISE_TOPICS}: the source topics, comma-separated. Required.
 * @param mode {@code REPRISE_MODE}: {@code Parallel}, {@code Handover} or {@code Drain} (default).
 * @param replayGroup {@code REPRISE_REPLAY_GROUP}: the replay's own consumer group. Required.
 * @param liveGroup {@code REPRISE_LIVE_GROUP}: the live service's group; required for Parallel and Handover.
 * @param start {@code REPRISE_START}: JSON start spec, resolved once. Default earliest.
 * @param allowClamp {@code REPRISE_ALLOW_CLAMP}: start at the log start when the asked-for start was deleted.
 *     Default false: missing history is an error (exit code 3).
 * @param end {@code REPRISE_END}: optional JSON end bound (not with Handover).
 * @param filter {@code REPRISE_FILTER}: the filter as published (a {@code keysFile} read into {@code keys}).
 * @param handler {@code REPRISE_HANDLER}: informational here (the handler is the service's code).
 * @param handoverTopic {@code REPRISE_HANDOVER_TOPIC}: default {@code reprise.handover}.
 * @param dlqTopic {@code REPRISE_DLQ_TOPIC}: dead-letter topic for poison records.
 * @param poisonPolicy {@code REPRISE_POISON_POLICY}: {@code dead-letter} (the default when a DLQ topic is set) or
 *     {@code skip} (count and go on).
 * @param handlerRetries {@code REPRISE_HANDLER_RETRIES}: retries of a record whose handler threw before it counts
 *     as poison. Default 2.
 * @param batchSize {@code REPRISE_BATCH_SIZE}: records per batch ({@code max.poll.records}): the unit of handler
 *     calls and commits, and the duplicate window after a crash. Default 1000.
 * @param maxRecordsPerSecond {@code REPRISE_MAX_RECORDS_PER_SECOND}: throttle; 0 = unlimited.
 * @param maxBytesPerSecond {@code REPRISE_MAX_BYTES_PER_SECOND}: throttle on key+value bytes; 0 = unlimited.
 * @param metricsPort {@code REPRISE_METRICS_PORT}: {@code /metrics} and {@code /healthz}; 0 turns it off.
 *     Default 9400.
 * @param kafkaConfigDir {@code REPRISE_KAFKA_CONFIG_DIR}: folder of Kafka settings, one per file; never logged.
 * @param memberName {@code REPRISE_MEMBER_NAME}: this replica's name (default {@code $HOSTNAME}, the pod name).
 * @param exitWhenDone {@code REPRISE_EXIT_WHEN_DONE}: return once every partition is finished. Default false.
 * @param checkIntervalSeconds {@code REPRISE_CHECK_INTERVAL}: seconds between reads of the live group's offsets
 *     and other slow checks. Default 1.
 * @param logLevel {@code REPRISE_LOG_LEVEL}: DEBUG, INFO, WARNING or ERROR (informational: the service owns its
 *     logging backend).
 */
public record ReplaySettings(
        String bootstrapServers,
        String replayId,
        List<String> topics,
        String mode,
        String replayGroup,
        String liveGroup,
        StartDecision.Start start,
        boolean allowClamp,
        StartDecision.End end,
        ObjectNode filter,
        String handler,
        String handoverTopic,
        String dlqTopic,
        String poisonPolicy,
        int handlerRetries,
        int batchSize,
        double maxRecordsPerSecond,
        double maxBytesPerSecond,
        int metricsPort,
        String kafkaConfigDir,
        String memberName,
        boolean exitWhenDone,
        double checkIntervalSeconds,
        String logLevel) {

    public static final List<String> MODES = List.of("Parallel", "Handover", "Drain");
    public static final List<String> POISON_POLICIES = List.of("skip", "dead-letter");

    /**
     * What this role does not support, in the table's order ({@code replay_worker/settings_table.py},
     * {@code UNSUPPORTED["java"]}; the settings vectors check the two lists are equal): {@code VARIABLE} is refused
     * with any value but its default, {@code VARIABLE=value} with that value. The role hands records to the
     * service's own handler, so it neither forwards nor backfills, and it stops at the live group's offsets.
     */
    public static final List<String> UNSUPPORTED = List.of(
            "REPRISE_ROLE=backfill", "REPRISE_FOLLOW", "REPRISE_FORWARD_TOPIC", "REPRISE_FORWARD_TRANSACTIONAL");

    /**
     * A setting is missing or wrong; the message names the variable and says what is accepted. {@link #code()}
     * and {@link #field()} are the stable refusal every port gives for the same environment: {@code required},
     * {@code invalid}, {@code out-of-range}, {@code conflict} or {@code unsupported}, and the variable.
     */
    public static final class SettingsException extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;
        private final String code;
        private final String field;

        public SettingsException(String code, String field, String message) {
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

    public ReplaySettings {
        topics = List.copyOf(topics);
    }

    /** Settings from the process environment. */
    public static ReplaySettings fromEnv() {
        return fromEnv(System.getenv());
    }

    /** Settings from {@code REPRISE_*} variables; an empty value counts as unset (as in the reference). */
    public static ReplaySettings fromEnv(Map<String, String> env) {
        String unsupported = unsupportedAsked(env);
        if (unsupported != null) {
            throw new SettingsException(
                    "unsupported",
                    unsupported.split("=", 2)[0],
                    unsupported
                            + " is not supported by the Java "
                            + "replay role: it hands the records to the service's own handler in a replay group, never "
                            + "forwards, backfills or follows (run python -m replay_worker, entrypoint ReplayWorker)");
        }
        Source source = new Source(env);
        String bootstrap = source.text("REPRISE_BOOTSTRAP_SERVERS");
        String replayId = source.text("REPRISE_REPLAY_ID");
        List<String> topics = source.parse("REPRISE_TOPICS", ReplaySettings::topics);
        source.parse("REPRISE_ROLE", raw -> choice(raw, List.of("replay", "backfill"), true));
        String mode = source.parse("REPRISE_MODE", raw -> choice(raw, MODES, true));
        String replayGroup = source.text("REPRISE_REPLAY_GROUP");
        String liveGroup = source.text("REPRISE_LIVE_GROUP");
        StartDecision.Start start = source.parse("REPRISE_START", StartDecision.Start::parse);
        Boolean allowClamp = source.parse("REPRISE_ALLOW_CLAMP", ReplaySettings::bool);
        StartDecision.End end = source.parse("REPRISE_END", StartDecision.End::parse);
        ObjectNode filter = source.parse("REPRISE_FILTER", ReplaySettings::filter);
        String handler = source.text("REPRISE_HANDLER");
        String handoverTopic = source.text("REPRISE_HANDOVER_TOPIC");
        String dlqTopic = source.text("REPRISE_DLQ_TOPIC");
        String poisonPolicy = source.parse("REPRISE_POISON_POLICY", raw -> choice(raw, POISON_POLICIES, true));
        Integer retries = source.parse("REPRISE_HANDLER_RETRIES", ReplaySettings::whole);
        Integer batchSize = source.parse("REPRISE_BATCH_SIZE", ReplaySettings::whole);
        Double maxRecords = source.parse("REPRISE_MAX_RECORDS_PER_SECOND", ReplaySettings::number);
        Double maxBytes = source.parse("REPRISE_MAX_BYTES_PER_SECOND", ReplaySettings::number);
        Integer metricsPort = source.parse("REPRISE_METRICS_PORT", ReplaySettings::whole);
        String configDir = source.text("REPRISE_KAFKA_CONFIG_DIR");
        String member = source.text("REPRISE_MEMBER_NAME");
        Boolean exitWhenDone = source.parse("REPRISE_EXIT_WHEN_DONE", ReplaySettings::bool);
        Double checkInterval = source.parse("REPRISE_CHECK_INTERVAL", ReplaySettings::number);
        String logLevel = source.parse(
                "REPRISE_LOG_LEVEL", raw -> choice(raw, List.of("DEBUG", "INFO", "WARNING", "ERROR"), true));
        source.parse("REPRISE_RESULT_FILE", raw -> raw); // the backfill's; accepted and unused

        if (poisonPolicy == null && dlqTopic != null) {
            poisonPolicy = "dead-letter";
        }
        for (String[] required : new String[][] {
            {"REPRISE_BOOTSTRAP_SERVERS", bootstrap},
            {"REPRISE_REPLAY_ID", replayId},
            {"REPRISE_TOPICS", topics == null ? null : "given"}
        }) {
            if (required[1] == null) {
                throw new SettingsException("required", required[0], required[0] + " is required");
            }
        }
        mode = mode == null ? "Drain" : mode;
        poisonPolicy = poisonPolicy == null ? "skip" : poisonPolicy;
        int retriesValue = retries == null ? 2 : retries;
        int batch = batchSize == null ? 1000 : batchSize;
        int port = metricsPort == null ? 9400 : metricsPort;
        double interval = checkInterval == null ? 1.0 : checkInterval;

        // The combinations, checked in the reference's order.
        need(batch >= 1, "out-of-range", "REPRISE_BATCH_SIZE", "REPRISE_BATCH_SIZE must be at least 1");
        need(retriesValue >= 0, "out-of-range", "REPRISE_HANDLER_RETRIES", "REPRISE_HANDLER_RETRIES must be >= 0");
        need(
                port >= 0 && port <= 65535,
                "out-of-range",
                "REPRISE_METRICS_PORT",
                "REPRISE_METRICS_PORT must be 0..65535");
        need(interval > 0, "out-of-range", "REPRISE_CHECK_INTERVAL", "REPRISE_CHECK_INTERVAL must be > 0");
        need(
                !(poisonPolicy.equals("dead-letter") && dlqTopic == null),
                "conflict",
                "REPRISE_POISON_POLICY",
                "REPRISE_POISON_POLICY=dead-letter needs REPRISE_DLQ_TOPIC");
        need(
                replayGroup != null,
                "required",
                "REPRISE_REPLAY_GROUP",
                "REPRISE_REPLAY_GROUP is required for role replay");
        if (mode.equals("Parallel") || mode.equals("Handover")) {
            need(liveGroup != null, "required", "REPRISE_LIVE_GROUP", "REPRISE_LIVE_GROUP is required in mode " + mode);
            need(
                    !liveGroup.equals(replayGroup),
                    "conflict",
                    "REPRISE_LIVE_GROUP",
                    "REPRISE_LIVE_GROUP and REPRISE_REPLAY_GROUP must differ: the replay runs in a group of its own");
        }
        if (mode.equals("Handover")) {
            need(
                    end == null,
                    "conflict",
                    "REPRISE_END",
                    "REPRISE_END cannot be used with mode Handover: the live "
                            + "group takes over at the handover offset, so the replay has no end of its own");
        }
        return new ReplaySettings(
                bootstrap,
                replayId,
                topics,
                mode,
                replayGroup,
                liveGroup,
                start == null ? StartDecision.Start.EARLIEST : start,
                Boolean.TRUE.equals(allowClamp),
                end,
                filter == null ? CompactJson.NODES.objectNode() : filter,
                handler,
                handoverTopic == null ? "reprise.handover" : handoverTopic,
                dlqTopic,
                poisonPolicy,
                retriesValue,
                batch,
                maxRecords == null ? 0.0 : maxRecords,
                maxBytes == null ? 0.0 : maxBytes,
                port,
                configDir,
                member == null ? defaultMember(env) : member,
                Boolean.TRUE.equals(exitWhenDone),
                interval,
                logLevel == null ? "INFO" : logLevel);
    }

    /**
     * The first entry of {@link #UNSUPPORTED} that {@code env} asks for, or null. Empty is unset; a boolean
     * asks unless it is one of the false spellings; {@code VARIABLE=value} asks with that value (any case).
     */
    static String unsupportedAsked(Map<String, String> env) {
        for (String entry : UNSUPPORTED) {
            int eq = entry.indexOf('=');
            String name = eq < 0 ? entry : entry.substring(0, eq);
            String raw = env.get(name);
            String text = raw == null ? "" : raw.strip();
            if (text.isEmpty()) {
                continue;
            }
            boolean asks;
            if (eq >= 0) {
                asks = text.equalsIgnoreCase(entry.substring(eq + 1));
            } else if (name.equals("REPRISE_FOLLOW") || name.equals("REPRISE_FORWARD_TRANSACTIONAL")) {
                asks = !FALSE.contains(text.toLowerCase(Locale.ROOT));
            } else {
                asks = true;
            }
            if (asks) {
                return entry;
            }
        }
        return null;
    }

    private static final List<String> FALSE = List.of("0", "false", "no", "off");

    /** Whether poison records go to the dead-letter topic (else they are counted and skipped). */
    public boolean deadLetters() {
        return poisonPolicy.equals("dead-letter") && dlqTopic != null;
    }

    /** The settings for a log line: no credentials live here; the key set is counted, not listed. */
    public Map<String, Object> described() {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("replay_id", replayId);
        body.put("mode", mode);
        body.put("topics", String.join(",", topics));
        body.put("replay_group", replayGroup);
        body.put("live_group", liveGroup);
        body.put("start", start.toJson());
        body.put("end", end == null ? null : end.toJson());
        ObjectNode shown = filter.deepCopy();
        if (shown.has("keys")) {
            shown.put("keys", "<" + shown.get("keys").size() + " keys>");
        }
        body.put("filter", CompactJson.write(shown)); // JsonNode.toString would build an ObjectMapper
        body.put("handover_topic", handoverTopic);
        body.put("dlq_topic", dlqTopic);
        body.put("poison_policy", poisonPolicy);
        body.put("batch_size", batchSize);
        body.put("member_name", memberName);
        return body;
    }

    // ------------------------------------------------------------------------------------------- single values

    private static void need(boolean condition, String code, String field, String message) {
        if (!condition) {
            throw new SettingsException(code, field, message);
        }
    }

    private static String defaultMember(Map<String, String> env) {
        // In Kubernetes the pod name: it names the replica in logs and in the handover topic.
        String host = env.get("HOSTNAME");
        if (host != null && !host.isBlank()) {
            return host;
        }
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException unknown) {
            return "replay";
        }
    }

    static boolean bool(String raw) {
        String text = raw.strip().toLowerCase(Locale.ROOT);
        if (List.of("1", "true", "yes", "on").contains(text)) {
            return true;
        }
        if (List.of("0", "false", "no", "off").contains(text)) {
            return false;
        }
        throw new IllegalArgumentException("'" + raw + "' is not a boolean (true or false)");
    }

    static int whole(String raw) {
        try {
            return Integer.parseInt(raw.strip());
        } catch (NumberFormatException bad) {
            throw new IllegalArgumentException("'" + raw + "' is not a whole number");
        }
    }

    static double number(String raw) {
        double value;
        try {
            value = Double.parseDouble(raw.strip());
        } catch (NumberFormatException bad) {
            throw new IllegalArgumentException("'" + raw + "' is not a number");
        }
        if (value < 0) {
            throw new IllegalArgumentException("'" + raw + "' must not be negative");
        }
        return value;
    }

    static List<String> topics(String raw) {
        List<String> topics = new ArrayList<>();
        for (String t : raw.split(",")) {
            if (!t.strip().isEmpty()) {
                topics.add(t.strip());
            }
        }
        if (topics.isEmpty()) {
            throw new IllegalArgumentException("no topic given");
        }
        return topics;
    }

    static String choice(String raw, List<String> options, boolean fold) {
        String text = raw.strip();
        for (String option : options) {
            if (fold ? option.equalsIgnoreCase(text) : option.equals(text)) {
                return option;
            }
        }
        throw new IllegalArgumentException("'" + text + "' is not one of " + String.join(", ", options));
    }

    /**
     * The filter as the handover topic publishes it: checked once, by the protocol's {@link FilterSpec#parse} (the
     * same rules and messages as the guard's), then shaped: header values as lists, and a {@code keysFile} read
     * into {@code keys} (sorted, blank lines ignored), because the guard cannot read a file mounted into the
     * replay's pods.
     */
    static ObjectNode filter(String raw) {
        JsonNode obj;
        try {
            obj = CompactJson.readTree(raw);
        } catch (JsonProcessingException bad) {
            throw new IllegalArgumentException("filter: not valid JSON (" + bad.getOriginalMessage() + ")");
        }
        FilterSpec spec;
        try {
            spec = FilterSpec.parse(obj);
        } catch (FilterSpecException bad) {
            throw new IllegalArgumentException(bad.getMessage());
        }
        ObjectNode result = CompactJson.NODES.objectNode();
        if (spec.isEmpty()) {
            return result;
        }
        if (!spec.headers().isEmpty()) {
            ObjectNode shaped = result.putObject("headers");
            spec.headers().forEach((name, values) -> values.forEach(shaped.putArray(name)::add));
        }
        if (spec.keys() != null || spec.keysFile() != null) {
            TreeSet<String> all = new TreeSet<>(spec.keys() == null ? List.of() : spec.keys());
            if (spec.keysFile() != null) {
                String path = spec.keysFile();
                try {
                    for (String line : Files.readAllLines(Path.of(path), StandardCharsets.UTF_8)) {
                        if (!line.strip().isEmpty()) {
                            all.add(line.strip());
                        }
                    }
                } catch (IOException unreadable) {
                    throw new IllegalArgumentException("filter.keysFile " + path + ": cannot read it ("
                            + unreadable.getClass().getSimpleName() + ")");
                }
            }
            ArrayNode list = result.putArray("keys");
            all.forEach(list::add);
        }
        JsonNode json = obj.get("json");
        if (!spec.json().isEmpty()) {
            ArrayNode conditions = CompactJson.NODES.arrayNode();
            if (json.isObject()) {
                conditions.add(json);
            } else {
                conditions.addAll((ArrayNode) json);
            }
            result.set("json", conditions);
        }
        return result;
    }

    /** Reads variables: empty means unset; a parse failure names the variable. */
    private static final class Source {
        private final Map<String, String> env;

        Source(Map<String, String> env) {
            this.env = env;
        }

        String text(String name) {
            String raw = env.get(name);
            return raw == null || raw.strip().isEmpty() ? null : raw.strip();
        }

        <T> T parse(String name, java.util.function.Function<String, T> parser) {
            String raw = env.get(name);
            if (raw == null || raw.isEmpty()) {
                return null;
            }
            try {
                return parser.apply(raw);
            } catch (IllegalArgumentException bad) {
                throw new SettingsException("invalid", name, name + ": " + bad.getMessage());
            }
        }
    }
}
