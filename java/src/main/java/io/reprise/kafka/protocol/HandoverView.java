package io.reprise.kafka.protocol;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.apache.kafka.common.TopicPartition;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The state of every replay, built by applying the handover topic's records in log order. Malformed records are
 * counted and skipped, never fatal: one bad writer must not stop every guard.
 */
public final class HandoverView {
    private static final Logger log = LoggerFactory.getLogger(HandoverView.class);

    private final Map<String, ReplayHandover> replays = new LinkedHashMap<>();
    private final Map<String, CompiledFilter> filters = new HashMap<>();
    private long applied;
    private long malformed;
    private String lastMalformed;

    private record CompiledFilter(Object spec, RecordFilter filter, String problem) {
    }

    /** Applies one message of the handover topic; returns false when it was malformed (and skipped). */
    public boolean apply(byte[] rawKey, byte[] rawValue) {
        HandoverWire.Decoded decoded;
        try {
            decoded = HandoverWire.decode(rawKey, rawValue);
        } catch (HandoverFormatException e) {
            malformed++;
            lastMalformed = e.getMessage();
            log.warn("skipping a malformed handover record: {}", e.getMessage());
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

    public Map<String, ReplayHandover> replays() {
        return replays;
    }

    public ReplayHandover replay(String replayId) {
        ReplayHandover found = replays.get(replayId);
        return found != null ? found : new ReplayHandover(replayId);
    }

    /** How many malformed records were skipped, and the last one's reason (null if none). */
    public long malformed() {
        return malformed;
    }

    public String lastMalformed() {
        return lastMalformed;
    }

    /** Per partition, the Handover-mode replay whose guard is {@code liveGroup} (the earliest if several). */
    public Map<TopicPartition, ActiveHandover> activeFor(String liveGroup) {
        Map<TopicPartition, ActiveHandover> result = new HashMap<>();
        List<ReplayHandover> ordered = new ArrayList<>(replays.values());
        ordered.sort(Comparator.comparingLong(r -> r.order));
        for (ReplayHandover replay : ordered) {
            HandoverRecord.Replay info = replay.replay;
            if (info == null || !"Handover".equals(info.mode()) || !liveGroup.equals(info.liveGroup())) {
                continue;
            }
            CompiledFilter filter = filterOf(info);
            for (Map.Entry<TopicPartition, PartitionHandover> e : replay.partitions.entrySet()) {
                PartitionHandover part = e.getValue();
                if (part.start == null || result.containsKey(e.getKey())) {
                    continue;
                }
                result.put(e.getKey(), new ActiveHandover(replay.replayId, part.start.offset(), part.handoverOffset(),
                        filter.filter(), filter.problem()));
            }
        }
        return result;
    }

    private CompiledFilter filterOf(HandoverRecord.Replay info) {
        CompiledFilter cached = filters.get(info.replayId());
        if (cached == null || !cached.spec().equals(info.filter())) {
            RecordFilter compiled = null;
            String problem = null;
            try {
                compiled = RecordFilter.compile(info.filter());
            } catch (FilterSpecException e) {
                problem = e.getMessage();
                log.error("replay {}: the guard cannot evaluate its filter, so it skips no record of it "
                        + "(records it covers are processed by both groups): {}", info.replayId(), problem);
            }
            cached = new CompiledFilter(info.filter(), compiled, problem);
            filters.put(info.replayId(), cached);
        }
        return cached;
    }
}
