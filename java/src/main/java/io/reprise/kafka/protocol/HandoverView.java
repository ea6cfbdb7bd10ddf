package io.reprise.kafka.protocol;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The state of every replay, built by applying the handover topic's records in log order.
 *
 * <p>Malformed records are counted and logged, never fatal: one bad writer must not stop every guard. A governing
 * record ({@code replay}, {@code start}, {@code handover}) that cannot be read (malformed, or written by a newer
 * version) replaces what its key held: the guard stops acting on that replay (or partition) and says why
 * (HANDOVER.md section 6, Bad input). A record whose key cannot be read belongs to no replay and is only counted.
 */
public final class HandoverView {
    private static final Logger log = LoggerFactory.getLogger(HandoverView.class);

    /** Kinds whose unreadable value stops the guard from acting on the replay (the others are advisory). */
    static final Set<String> GOVERNING_KINDS = Set.of("replay", "start", "handover");

    private final Map<String, ReplayHandover> replays = new LinkedHashMap<>();
    private final Map<String, CompiledFilter> filters = new HashMap<>();
    private long applied;
    private long malformed;
    private String lastMalformed;
    private String lastMalformedCode;

    private record CompiledFilter(Object spec, RecordFilter filter) {}

    /** Applies one message of the handover topic; returns false when it was malformed. */
    public boolean apply(byte[] rawKey, byte[] rawValue) {
        HandoverWire.Decoded decoded;
        try {
            decoded = HandoverWire.decode(rawKey, rawValue);
        } catch (HandoverFormatException e) {
            malformed++;
            lastMalformed = e.getMessage();
            lastMalformedCode = e.code();
            log.warn("a malformed handover record ({}): {}", e.code(), e.getMessage());
            unreadable(rawKey, e.code());
            return false;
        }
        applied++;
        HandoverKey key = decoded.key();
        HandoverRecord record = decoded.record();
        ReplayHandover replay = replays.get(key.replayId());
        if (replay == null) {
            if (record == null) {
                return true;
            }
            replay = new ReplayHandover(key.replayId());
            replay.order = applied;
            replays.put(key.replayId(), replay);
        }
        if ("replay".equals(key.kind()) && record != null && replay.replay == null) {
            replay.order = applied;
        }
        replay.apply(key, rawKey, record);
        if (replay.liveKeys.isEmpty()) {
            replays.remove(key.replayId());
        }
        return true;
    }

    private void unreadable(byte[] rawKey, String code) {
        HandoverKey key;
        try {
            key = HandoverKey.decode(rawKey);
        } catch (HandoverFormatException e) {
            return;
        }
        if (!GOVERNING_KINDS.contains(key.kind()) || "replay".equals(key.kind()) != (key.topic() == null)) {
            return;
        }
        applied++;
        ReplayHandover replay = replays.get(key.replayId());
        if (replay == null) {
            replay = new ReplayHandover(key.replayId());
            replay.order = applied;
            replays.put(key.replayId(), replay);
        }
        replay.unreadable.put(new ReplayHandover.KeySlot(key.kind(), key.topic(), key.partition()), code);
        replay.liveKeys.add(ByteBuffer.wrap(rawKey == null ? new byte[0] : rawKey));
    }

    public Map<String, ReplayHandover> replays() {
        return replays;
    }

    public ReplayHandover replay(String replayId) {
        ReplayHandover found = replays.get(replayId);
        return found != null ? found : new ReplayHandover(replayId);
    }

    /** The wire code of the last malformed record ({@code malformed-key}, {@code too-large}, ...), or null. */
    public String lastMalformedCode() {
        return lastMalformedCode;
    }

    /** How many malformed records were seen, and the last one's reason (null if none). */
    public long malformed() {
        return malformed;
    }

    public String lastMalformed() {
        return lastMalformed;
    }

    /**
     * Per partition, the Handover-mode replay whose guard is {@code liveGroup} (the earliest if several). A replay
     * the guard cannot follow (an unreadable {@code replay}, {@code start} or {@code handover} record, or a filter it
     * cannot evaluate) still holds its partitions, as an entry with {@code problem} set: the guard skips nothing for
     * it, and a later replay does not take those partitions over.
     */
    public Map<TopicPartition, ActiveHandover> activeFor(String liveGroup) {
        Map<TopicPartition, ActiveHandover> result = new HashMap<>();
        List<ReplayHandover> ordered = new ArrayList<>(replays.values());
        ordered.sort(Comparator.comparingLong(r -> r.order));
        for (ReplayHandover replay : ordered) {
            HandoverRecord.Replay info = replay.replay;
            String replayProblem = replay.unreadable.get(new ReplayHandover.KeySlot("replay", null, null));
            String problem;
            RecordFilter matcher;
            if (replayProblem != null) {
                // Whose replay it is cannot be read: it may be this group's, unless an earlier readable value said
                // it is not (a replay record is written once; a changed one is a writer's fault anyway).
                if (info != null && (!"Handover".equals(info.mode()) || !liveGroup.equals(info.liveGroup()))) {
                    continue;
                }
                problem = "unreadable-replay-record:" + replayProblem;
                matcher = null;
            } else if (info == null || !"Handover".equals(info.mode()) || !liveGroup.equals(info.liveGroup())) {
                continue;
            } else {
                try {
                    matcher = filterOf(info);
                    problem = null;
                } catch (FilterSpecException e) {
                    matcher = null;
                    problem = "unevaluable-filter:" + e.code();
                }
            }
            Set<TopicPartition> slots = new LinkedHashSet<>();
            replay.partitions.forEach((tp, part) -> {
                if (part.start != null) {
                    slots.add(tp);
                }
            });
            for (ReplayHandover.KeySlot slot : replay.unreadable.keySet()) {
                if (slot.topic() != null && slot.partition() != null) {
                    slots.add(new TopicPartition(slot.topic(), slot.partition()));
                }
            }
            for (TopicPartition tp : slots) {
                if (result.containsKey(tp)) {
                    continue;
                }
                PartitionHandover part = replay.partitions.get(tp);
                Long start = part != null && part.start != null ? part.start.offset() : null;
                String partProblem = problem;
                for (String kind : List.of("start", "handover")) {
                    String code = replay.unreadable.get(new ReplayHandover.KeySlot(kind, tp.topic(), tp.partition()));
                    if (partProblem == null && code != null) {
                        partProblem = "unreadable-" + kind + "-record:" + code;
                    }
                }
                if (partProblem != null) {
                    result.put(tp, new ActiveHandover(replay.replayId, start, null, null, partProblem));
                } else if (start != null && matcher != null) {
                    result.put(tp, new ActiveHandover(replay.replayId, start, part.handoverOffset(), matcher, null));
                }
            }
        }
        return result;
    }

    private RecordFilter filterOf(HandoverRecord.Replay info) throws FilterSpecException {
        CompiledFilter cached = filters.get(info.replayId());
        if (cached == null || !cached.spec().equals(info.filter())) {
            cached = new CompiledFilter(info.filter(), RecordFilter.published(info.filter()));
            filters.put(info.replayId(), cached);
        }
        return cached.filter();
    }
}
