package io.reprise.kafka.replay;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.protocol.CommitMark;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java testee of replay_traces.json (conformance/REPLAY_TRACES.md, "Testees"): a {@link ReplayBook} driven by
 * one JSON step per line, answering the step's outputs as one JSON line. It lives in the book's package because the
 * book is package-private; {@code io.reprise.kafka.conformance.ReplayTraceTestee} is the main class the runner starts.
 */
public final class ReplayBookTestee {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** A {@code read} step's record, with what the handler and the filter make of it. */
    record TraceRecord(TopicPartition partition, long offset, Long timestampMs, String filter, boolean fails)
            implements ReplayBook.Item {
        @Override
        public boolean endOfPartition() {
            return false;
        }
    }

    private JsonNode config = MAPPER.createObjectNode();
    private ReplayBook book = fresh();
    /** Asynchronous commits not answered yet, by id. */
    private final Map<Integer, ReplayBook.Commit> unanswered = new HashMap<>();

    /** Serves the protocol until {@code in} ends. */
    public static void serve(BufferedReader in, PrintStream out) throws IOException {
        ReplayBookTestee testee = new ReplayBookTestee();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            out.println(testee.line(line));
            out.flush();
        }
    }

    String line(String text) {
        try {
            JsonNode step = MAPPER.readTree(text);
            return MAPPER.writeValueAsString(send(step));
        } catch (IOException | RuntimeException failed) {
            ObjectNode error = MAPPER.createObjectNode();
            error.put("error", failed.getClass().getSimpleName() + ": " + failed.getMessage());
            return error.toString();
        }
    }

    private ReplayBook fresh() {
        Map<TopicPartition, ReplayBook.Planned> plan = new HashMap<>();
        for (JsonNode p : config.path("plan")) {
            plan.put(
                    tp(p),
                    new ReplayBook.Planned(
                            p.path("start").asLong(), optLong(p, "end_offset"), optLong(p, "end_timestamp_ms")));
        }
        return new ReplayBook(
                config.path("replay_id").asText(""),
                config.path("mode").asText("Drain"),
                plan,
                config.path("follow").asBoolean(false),
                config.path("transactional").asBoolean(false));
    }

    ObjectNode send(JsonNode step) {
        String op = step.path("op").asText();
        ObjectNode out = MAPPER.createObjectNode();
        boolean ok = "ok".equals(step.path("sync_commit").asText("ok"));
        switch (op) {
            case "scenario" -> {
                config = step.path("config");
                crash();
            }
            case "crash" -> crash();
            case "assign" -> assign(step, out);
            case "read" -> {
                List<ReplayBook.Item> items = new ArrayList<>();
                for (JsonNode i : step.path("items")) {
                    if ("end".equals(i.path("kind").asText())) {
                        items.add(new ReplayBook.End(tp(i), i.path("offset").asLong()));
                    } else {
                        items.add(new TraceRecord(
                                tp(i),
                                i.path("offset").asLong(),
                                optLong(i, "timestamp"),
                                i.path("filter").asText("match"),
                                i.path("fails").asBoolean(false)));
                    }
                }
                book.read(items);
            }
            case "deliver" -> deliver(step.path("in_flight").asBoolean(false), ok, out);
            case "commit_result" -> {
                ReplayBook.Commit commit = unanswered.remove(step.path("id").asInt());
                if (commit == null) {
                    throw new IllegalArgumentException("no unanswered commit " + step.path("id"));
                }
                List<TopicPartition> failed = new ArrayList<>();
                if (!step.path("ok").asBoolean()) {
                    commit.offsets().forEach(o -> failed.add(o.partition()));
                }
                book.answered(failed);
            }
            case "revoke" -> {
                List<TopicPartition> gone = partitions(step.path("partitions"));
                ReplayBook.Commit commit = book.revoking(gone);
                ArrayNode commits = out.putArray("commits");
                if (commit != null) {
                    commits.add(made(commit, ok));
                }
                records(out.putArray("dropped"), book.lost(gone));
            }
            case "lost" -> records(out.putArray("dropped"), book.lost(partitions(step.path("partitions"))));
            case "live" -> book.live(offsets(step.path("offsets")));
            case "view" -> book.view(offsets(step.path("handovers")).keySet(), offsets(step.path("guards")));
            case "ends" -> {
                // end offsets are for lag metrics only: no rule reads them
            }
            case "tick" -> {
                ArrayNode progress = out.putArray("progress");
                for (ReplayBook.Progress p : book.progress()) {
                    ObjectNode o = tpJson(p.partition());
                    o.put("committed", p.committed());
                    o.put("at_end", p.atEnd());
                    progress.add(o);
                }
            }
            case "progress_failed" -> book.progressFailed();
            case "stop" -> {
                ReplayBook.Checkpoint checkpoint = book.checkpoint(() -> false, true);
                if (checkpoint.commit() != null) {
                    out.putArray("commits").add(made(checkpoint.commit(), ok));
                } else if (checkpoint.flush()) {
                    out.put("flush", true);
                }
            }
            default -> throw new IllegalArgumentException("unknown op '" + op + "'");
        }
        return out;
    }

    private void crash() {
        book = fresh();
        unanswered.clear();
    }

    private void assign(JsonNode step, ObjectNode out) {
        ArrayNode commits = out.putArray("commits");
        List<ReplayBook.Handover> handovers = new ArrayList<>();
        List<TopicPartition> pauses = new ArrayList<>();
        for (JsonNode p : step.path("partitions")) {
            String metadata =
                    p.path("metadata").isTextual() ? p.path("metadata").asText() : null;
            ReplayBook.Assigned assigned = book.assign(tp(p), optLong(p, "committed"), CommitMark.decode(metadata));
            if (assigned.startCommit() != null) {
                commits.add(commitJson(assigned.startCommit()));
            }
            if (assigned.handover() != null) {
                handovers.add(assigned.handover());
            }
            if (assigned.pause()) {
                pauses.add(tp(p));
            }
        }
        handovers(out, handovers);
        pauses.sort(java.util.Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        ArrayNode paused = out.putArray("pauses");
        pauses.forEach(tp -> paused.add(tpJson(tp)));
        out.put("done", book.done());
    }

    private void deliver(boolean inFlight, boolean ok, ObjectNode out) {
        ReplayBook.Taken<TraceRecord> taken = book.take();
        records(out.putArray("dropped"), taken.dropped());
        ArrayNode commits = out.putArray("commits");
        if (book.anythingToDeliver(taken.records())) {
            List<TraceRecord> handled = new ArrayList<>();
            List<TraceRecord> poison = new ArrayList<>();
            for (TraceRecord r : taken.records()) {
                if ("match".equals(r.filter())) {
                    handled.add(r);
                    if (r.fails()) {
                        poison.add(r);
                    }
                }
            }
            for (TraceRecord r : taken.records()) {
                if ("undecodable".equals(r.filter())) {
                    poison.add(r);
                }
            }
            records(out.putArray("handled"), handled);
            boolean dlq = config.path("dead_letter_topic").isTextual();
            records(out.putArray(dlq ? "dead_letters" : "poison_skipped"), poison);
            book.endPositions();
            ReplayBook.Checkpoint checkpoint = book.checkpoint(() -> inFlight, false);
            if (checkpoint.commit() != null) {
                commits.add(made(checkpoint.commit(), ok));
            } else if (checkpoint.flush()) {
                out.put("flush", true);
            }
        }
        ReplayBook.Finishing finishing = book.decide();
        if (finishing != null) {
            commits.add(commitJson(finishing.commit()));
            book.committed(finishing.commit(), ok);
            List<ReplayBook.Handover> handovers = book.finished(finishing, ok);
            handovers(out, handovers);
            ArrayNode pauses = out.putArray("pauses");
            handovers.forEach(h -> pauses.add(tpJson(h.partition())));
        }
        ReplayBook.Commit reseal = book.resealing();
        if (reseal != null) {
            commits.add(made(reseal, ok));
        }
        out.put("done", book.done());
    }

    /** A commit the book asked for, made: a sync one answered at once, an asynchronous one sent. */
    private ObjectNode made(ReplayBook.Commit commit, boolean ok) {
        if (commit.sync()) {
            book.committed(commit, ok);
        } else {
            book.committed(commit, true);
            unanswered.put(commit.id(), commit);
        }
        return commitJson(commit);
    }

    // ------------------------------------------------------------------------------------------- JSON

    private static ObjectNode commitJson(ReplayBook.Commit commit) {
        ObjectNode o = MAPPER.createObjectNode();
        o.put("id", commit.id());
        o.put("sync", commit.sync());
        ArrayNode offsets = o.putArray("offsets");
        for (ReplayBook.Offset offset : commit.offsets()) {
            ObjectNode each = tpJson(offset.partition());
            each.put("offset", offset.offset());
            if (offset.mark() == null) {
                each.putNull("metadata");
            } else {
                each.put("metadata", offset.mark().encode());
            }
            offsets.add(each);
        }
        return o;
    }

    private static void handovers(ObjectNode out, List<ReplayBook.Handover> handovers) {
        List<ReplayBook.Handover> sorted = new ArrayList<>(handovers);
        sorted.sort(java.util.Comparator.comparing(
                        (ReplayBook.Handover h) -> h.partition().topic())
                .thenComparingInt(h -> h.partition().partition()));
        ArrayNode array = out.putArray("handovers");
        for (ReplayBook.Handover h : sorted) {
            ObjectNode o = tpJson(h.partition());
            o.put("offset", h.offset());
            o.put("reason", h.reason());
            array.add(o);
        }
    }

    private static void records(ArrayNode array, List<? extends ReplayBook.Item> items) {
        for (ReplayBook.Item item : items) {
            ObjectNode o = tpJson(item.partition());
            o.put("offset", item.offset());
            array.add(o);
        }
    }

    private static ObjectNode tpJson(TopicPartition tp) {
        ObjectNode o = MAPPER.createObjectNode();
        o.put("topic", tp.topic());
        o.put("partition", tp.partition());
        return o;
    }

    private static TopicPartition tp(JsonNode node) {
        return new TopicPartition(
                node.path("topic").asText(), node.path("partition").asInt());
    }

    private static List<TopicPartition> partitions(JsonNode array) {
        List<TopicPartition> out = new ArrayList<>();
        array.forEach(p -> out.add(tp(p)));
        return out;
    }

    private static Map<TopicPartition, Long> offsets(JsonNode array) {
        Map<TopicPartition, Long> out = new LinkedHashMap<>();
        array.forEach(o -> out.put(tp(o), o.path("offset").asLong()));
        return out;
    }

    private static Long optLong(JsonNode node, String field) {
        JsonNode value = node.path(field);
        return value.isIntegralNumber() ? value.asLong() : null;
    }
}
