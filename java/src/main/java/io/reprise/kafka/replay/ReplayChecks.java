package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.FinishRule;
import io.reprise.kafka.protocol.HandoverRecord;
import io.reprise.kafka.topic.HandoverTopic;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A replica's slow checks, in a thread of their own with a client of their own (the consumer is only touched by the
 * loop): every check interval the live group's committed offsets (Parallel, Handover) into the book, the end offsets
 * (for the lag metrics only: no finish is decided on them, HANDOVER.md section 5.5), and the book's progress records.
 */
final class ReplayChecks implements Runnable {

    private static final Logger LOG = LoggerFactory.getLogger(ReplayChecks.class);

    /** Seconds between two {@code progress} records of one replica. */
    static final double PROGRESS_INTERVAL = 2.0;

    private final ReplaySettings settings;
    private final KafkaClientConfig clients;
    private final ReplayMetrics metrics;
    private final ReplayBook book;
    private final HandoverTopic handover;
    private volatile boolean stopped;
    private long lastReport;

    ReplayChecks(
            ReplaySettings settings,
            KafkaClientConfig clients,
            ReplayMetrics metrics,
            ReplayBook book,
            HandoverTopic handover) {
        this.settings = settings;
        this.clients = clients;
        this.metrics = metrics;
        this.book = book;
        this.handover = handover;
    }

    void stop() {
        stopped = true;
    }

    @Override
    public void run() {
        try (Admin admin = Admin.create(clients.admin("reprise-" + settings.memberName() + "-checks"))) {
            while (!stopped) {
                long began = System.nanoTime();
                try {
                    once(admin);
                } catch (RuntimeException failed) {
                    metrics.errors.inc(1);
                    LOG.warn("a slow check failed: {}", failed.toString());
                }
                long left = (long) (settings.checkIntervalSeconds() * 1000) - (System.nanoTime() - began) / 1_000_000;
                long until = System.nanoTime() + Math.max(0, left) * 1_000_000;
                while (!stopped && System.nanoTime() < until) {
                    sleep(Math.min(100, Math.max(1, (until - System.nanoTime()) / 1_000_000)));
                }
            }
        }
    }

    private void once(Admin admin) {
        report();
        Map<TopicPartition, Long> current = book.positions();
        if (settings.liveGroup() != null && !settings.mode().equals(FinishRule.DRAIN)) {
            try {
                Map<TopicPartition, Long> found = new HashMap<>();
                admin.listConsumerGroupOffsets(settings.liveGroup())
                        .partitionsToOffsetAndMetadata()
                        .get(15, TimeUnit.SECONDS)
                        .forEach((tp, om) -> {
                            if (om != null && om.offset() >= 0) {
                                found.put(tp, om.offset());
                            }
                        });
                book.live(found);
            } catch (Exception failed) {
                metrics.errors.inc(1);
                LOG.warn("reading the live group's offsets failed: {}", failed.toString());
            }
        }
        if (!current.isEmpty()) {
            Map<TopicPartition, OffsetSpec> query = new HashMap<>();
            current.keySet().forEach(tp -> query.put(tp, OffsetSpec.latest()));
            try {
                Map<TopicPartition, Long> found = new HashMap<>();
                admin.listOffsets(query, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
                        .all()
                        .get(15, TimeUnit.SECONDS)
                        .forEach((tp, info) -> found.put(tp, info.offset()));
                // For the lag metrics only: no finish is decided on an end offset (HANDOVER.md section 5.5).
                current.forEach((tp, position) -> {
                    Long high = found.get(tp);
                    Long endOffset = book.endOffset(tp);
                    if (high != null && position != null) {
                        metrics.partition(
                                tp.topic(),
                                tp.partition(),
                                position,
                                endOffset == null ? high : Math.min(high, endOffset),
                                null);
                    }
                });
            } catch (Exception failed) {
                LOG.debug("reading end offsets failed: {}", failed.toString());
            }
        }
    }

    /** The committed position of partitions that moved (at most every PROGRESS_INTERVAL s): advisory. */
    private void report() {
        if ((System.nanoTime() - lastReport) / 1e9 < PROGRESS_INTERVAL) {
            return;
        }
        lastReport = System.nanoTime();
        List<HandoverRecord> records = new ArrayList<>();
        for (ReplayBook.Progress p : book.progress()) {
            records.add(new HandoverRecord.Progress(
                    settings.replayId(),
                    p.partition().topic(),
                    p.partition().partition(),
                    p.committed(),
                    p.atEnd(),
                    settings.memberName(),
                    System.currentTimeMillis()));
        }
        if (records.isEmpty()) {
            return;
        }
        try {
            handover.publish(records);
        } catch (RuntimeException failed) {
            book.progressFailed(); // advisory: the next report says it again
            LOG.warn("publishing progress failed: {}", failed.toString());
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
