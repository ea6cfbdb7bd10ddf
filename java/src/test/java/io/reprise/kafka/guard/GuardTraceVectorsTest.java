package io.reprise.kafka.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.reprise.kafka.conformance.Vectors;
import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.HandoverView;
import io.reprise.kafka.protocol.PartitionHandover;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * conformance/vectors/guard_traces.json: the guard's bookkeeping ({@link GuardBook} around the protocol rules, fed
 * by a {@link HandoverView}) step by step, and again with a crash after every step (a new guard continues from
 * what was committed). Every expected output of every step is compared.
 */
class GuardTraceVectorsTest {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final Set<String> OPS =
            Set.of("assign", "handover", "release", "batch", "store", "commit", "tick", "revoke", "crash");

    @TestFactory
    List<DynamicNode> guardTraces() {
        JsonNode root = Vectors.load("guard_traces.json", "guard_traces");
        Vectors.uniqueNames(root.get("scenarios"), "guard_traces.json scenarios");
        List<DynamicNode> nodes = new ArrayList<>();
        for (JsonNode scenario : root.get("scenarios")) {
            List<DynamicTest> runs = new ArrayList<>();
            runs.add(DynamicTest.dynamicTest("no crash", () -> new Simulation(scenario).run(scenario.get("steps"))));
            for (JsonNode crash : scenario.get("crashes")) {
                int after = crash.get("after_step").asInt();
                runs.add(DynamicTest.dynamicTest("crash after step " + after, () -> {
                    Simulation sim = new Simulation(scenario);
                    ArrayNode prefix = MAPPER.createArrayNode();
                    for (int i = 0; i < after; i++) {
                        prefix.add(scenario.get("steps").get(i));
                    }
                    sim.run(prefix);
                    sim.run(crash.get("steps"));
                }));
            }
            nodes.add(DynamicContainer.dynamicContainer(scenario.get("name").asText(), runs));
        }
        return nodes;
    }

    /** One guarded consumer in the simulated world of a scenario. */
    private static final class Simulation {
        private final String group;
        private final boolean autoStore;
        private final Map<TopicPartition, List<byte[][]>> logs = new HashMap<>();
        private final List<byte[][]> viewRecords = new ArrayList<>();
        private final Map<TopicPartition, Long> committed = new HashMap<>();
        private final Map<TopicPartition, String> committedMetadata = new HashMap<>();
        private GuardBook book;
        private HandoverView view = new HandoverView();
        private long tickets;
        private int index;

        Simulation(JsonNode scenario) {
            group = scenario.get("live_group").asText();
            autoStore = scenario.get("auto_store").asBoolean();
            book = new GuardBook(autoStore);
            for (JsonNode log : scenario.get("logs")) {
                List<byte[][]> records = new ArrayList<>();
                for (JsonNode r : log.get("records")) {
                    records.add(new byte[][] {Vectors.bytes(r.get("key")), Vectors.bytes(r.get("value"))});
                }
                logs.put(tp(log), records);
            }
        }

        void run(JsonNode steps) {
            for (JsonNode step : steps) {
                index++;
                String op = step.get("op").asText();
                if (!OPS.contains(op)) {
                    fail("unknown step op '" + op + "' (step " + index + "): this runner is older than the vectors");
                }
                JsonNode expect = step.get("expect");
                switch (op) {
                    case "assign" -> assign(step);
                    case "handover" -> handover(step, expect);
                    case "release" -> release(step, expect);
                    case "batch" -> batch(step, expect);
                    case "store" -> store(step, expect);
                    case "commit" -> commit(step, expect);
                    case "tick" -> tick(step, expect);
                    case "revoke" -> step.get("partitions").forEach(p -> book.drop(tp(p)));
                    default -> crash();
                }
            }
        }

        private void assign(JsonNode step) {
            tickets++;
            for (JsonNode p : step.get("partitions")) {
                TopicPartition tp = tp(p);
                Long offset =
                        p.get("committed").isNull() ? null : p.get("committed").asLong();
                String metadata =
                        p.get("metadata").isNull() ? null : p.get("metadata").asText();
                if (offset != null) {
                    committed.put(tp, offset);
                    committedMetadata.put(tp, metadata);
                }
                book.assign(tp, offset, CommitMark.decode(metadata), tickets);
            }
        }

        private void handover(JsonNode step, JsonNode expect) {
            for (JsonNode r : step.get("records")) {
                byte[][] record = {Vectors.bytes(r.get("key")), Vectors.bytes(r.get("value"))};
                viewRecords.add(record);
                view.apply(record[0], record[1]);
            }
            check("seeks", expect, seeks(book.apply(view.activeFor(group))));
        }

        private void release(JsonNode step, JsonNode expect) {
            var snapshot = view.activeFor(group);
            Map<TopicPartition, Long> seeks = new HashMap<>();
            for (JsonNode p : step.get("partitions")) {
                TopicPartition tp = tp(p);
                Long target = book.release(tp, snapshot.get(tp));
                if (target != null) {
                    seeks.put(tp, target);
                }
            }
            check("seeks", expect, seeks(seeks));
        }

        private void batch(JsonNode step, JsonNode expect) {
            ArrayNode verdicts = MAPPER.createArrayNode();
            List<Store> stores;
            if (!book.guarded()) {
                Map<TopicPartition, Long> positions = new TreeMap<>(Comparator.comparing(TopicPartition::toString));
                for (JsonNode r : step.get("records")) {
                    verdicts.add("process");
                    positions.put(tp(r), r.get("offset").asLong() + 1);
                }
                stores = book.handedUnguarded(positions);
            } else {
                Set<TopicPartition> held = new HashSet<>();
                List<TopicPartition> touched = new ArrayList<>();
                for (JsonNode r : step.get("records")) {
                    TopicPartition tp = tp(r);
                    long offset = r.get("offset").asLong();
                    GuardBook.PartitionBook part = book.part(tp);
                    if (part == null || held.contains(tp)) {
                        verdicts.add("dropped");
                        continue;
                    }
                    if (part.held()) {
                        verdicts.add("held");
                        held.add(tp);
                        continue;
                    }
                    if (!touched.contains(tp)) {
                        touched.add(tp);
                    }
                    byte[][] record = logs.get(tp).get((int) offset);
                    verdicts.add(book.judge(tp, offset, record[0], null, record[1]) ? "process" : "skip");
                }
                stores = new ArrayList<>();
                for (TopicPartition tp : touched) {
                    Store s = book.afterBatch(tp);
                    if (s != null) {
                        stores.add(s);
                    }
                }
            }
            check("verdicts", expect, verdicts);
            check("stores", expect, stores(stores, true));
        }

        private void store(JsonNode step, JsonNode expect) {
            List<Store> stores = serviceStores(step.get("offsets"));
            check("stores", expect, stores(stores, false));
        }

        private void commit(JsonNode step, JsonNode expect) {
            List<Store> commits;
            boolean sort;
            if (step.get("offsets").isNull()) {
                commits = book.storedOffsets();
                sort = true;
            } else {
                commits = serviceStores(step.get("offsets"));
                sort = false;
            }
            durable(commits);
            check("commits", expect, stores(commits, sort));
        }

        private List<Store> serviceStores(JsonNode offsets) {
            List<Store> stores = new ArrayList<>();
            for (JsonNode o : offsets) {
                stores.add(book.serviceStore(
                        tp(o),
                        o.get("offset").asLong(),
                        o.get("metadata").isNull() ? null : o.get("metadata").asText()));
            }
            return stores;
        }

        private void durable(List<Store> stores) {
            for (Store s : stores) {
                committed.put(s.partition(), s.offset());
                committedMetadata.put(s.partition(), s.metadata());
            }
        }

        private void tick(JsonNode step, JsonNode expect) {
            List<Store> guardCommits = book.takeGuardCommits();
            durable(guardCommits);
            ArrayNode reports = MAPPER.createArrayNode();
            for (SkipReport r : sorted(book.skipReports(), SkipReport::partition)) {
                ObjectNode o = partitionNode(r.partition())
                        .put("first_skipped", r.firstSkipped())
                        .put("seen_until", r.seenUntil());
                o.put("replay_id", r.replayId());
                reports.add(o);
            }
            ArrayNode problems = MAPPER.createArrayNode();
            for (GuardBook.ProblemReport r : sorted(book.problemReports(), GuardBook.ProblemReport::partition)) {
                ObjectNode o = partitionNode(r.partition()).put("problem", r.problem());
                o.put("replay_id", r.replayId());
                o.put("first_skipped", r.firstSkipped());
                o.put("seen_until", r.seenUntil());
                problems.add(o);
            }
            Map<TopicPartition, Long> positions = new HashMap<>();
            for (JsonNode p : step.get("positions")) {
                positions.put(tp(p), p.get("offset").asLong());
            }
            List<Store> floors = book.floorCommits(positions::get);
            for (Store s : floors) {
                durable(List.of(s));
                book.floorDone(s);
            }
            ArrayNode acks = MAPPER.createArrayNode();
            for (Map.Entry<TopicPartition, GuardBook.PendingAck> e :
                    sorted(new ArrayList<>(book.pendingAcks().entrySet()), Map.Entry::getKey)) {
                TopicPartition tp = e.getKey();
                String replayId = e.getValue().replayId();
                long h = e.getValue().handover();
                PartitionHandover part = view.replay(replayId).partitions.get(tp);
                if (part == null
                        || part.handoverOffset() == null
                        || part.handoverOffset() != h
                        || (part.ack != null && part.ack.offset() == h)) {
                    continue;
                }
                Long offset = committed.get(tp);
                if (CommitMark.ackDue(h, offset, CommitMark.decode(committedMetadata.get(tp)))) {
                    ObjectNode o = partitionNode(tp).put("offset", h).put("committed", offset);
                    o.put("replay_id", replayId);
                    acks.add(o);
                }
            }
            check("commits", expect, stores(guardCommits, true));
            check("reports", expect, reports);
            check("problems", expect, problems);
            check("floor_commits", expect, stores(floors, true));
            check("acks", expect, acks);
        }

        private void crash() {
            book = new GuardBook(autoStore);
            view = new HandoverView();
            for (byte[][] r : viewRecords) {
                view.apply(r[0], r[1]);
            }
        }

        private void check(String what, JsonNode expect, JsonNode actual) {
            JsonNode wanted = expect.get(what);
            if (wanted == null) {
                fail("step " + index + ": the vector does not say " + what);
            }
            assertEquals(normal(wanted), normal(actual), "step " + index + ": " + what);
        }

        /** Compared as canonical JSON text: numbers of either width, members in sorted order. */
        private static String normal(JsonNode node) {
            try {
                Object plain = MAPPER.treeToValue(node, Object.class);
                return MAPPER.copy()
                        .configure(com.fasterxml.jackson.databind.SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS, true)
                        .writeValueAsString(plain);
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        }

        private static ArrayNode seeks(Map<TopicPartition, Long> seeks) {
            ArrayNode out = MAPPER.createArrayNode();
            for (Map.Entry<TopicPartition, Long> e : sorted(new ArrayList<>(seeks.entrySet()), Map.Entry::getKey)) {
                out.add(partitionNode(e.getKey()).put("offset", e.getValue()));
            }
            return out;
        }

        private static ArrayNode stores(List<Store> stores, boolean sort) {
            ArrayNode out = MAPPER.createArrayNode();
            for (Store s : sort ? sorted(stores, Store::partition) : stores) {
                out.add(partitionNode(s.partition()).put("offset", s.offset()).put("metadata", s.metadata()));
            }
            return out;
        }

        private static ObjectNode partitionNode(TopicPartition tp) {
            return MAPPER.createObjectNode().put("topic", tp.topic()).put("partition", tp.partition());
        }

        private static <T> List<T> sorted(List<T> items, java.util.function.Function<T, TopicPartition> key) {
            List<T> out = new ArrayList<>(items);
            out.sort(Comparator.comparing((T t) -> key.apply(t).topic())
                    .thenComparingInt(t -> key.apply(t).partition()));
            return out;
        }

        private static TopicPartition tp(JsonNode n) {
            return new TopicPartition(
                    n.get("topic").asText(), n.get("partition").asInt());
        }
    }
}
