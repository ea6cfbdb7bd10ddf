package io.reprise.kafka.topic;

import io.reprise.kafka.protocol.HandoverView;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tails the handover topic in a thread; keeps a {@link HandoverView} and a snapshot derived from it.
 * <ul>
 * <li>{@link #snapshot()} / {@link #version()}: what {@code derive(view)} returned after the last change.</li>
 * <li>{@link #requestSync()} / {@link #synced(long)}: a barrier. {@code synced} turns true once the view includes
 * everything that was readable in the topic when the ticket was taken. The guard takes one on every assignment,
 * so a live replica never acts on an older view than the replica before it had (HANDOVER.md invariant 7).</li>
 * <li>{@code onTick}: called in the thread about every {@code interval} (the guard checks acknowledgements).</li>
 * </ul>
 */
public final class HandoverFollower<T> implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(HandoverFollower.class);

    private final Map<String, Object> connection;
    private final String topic;
    private final Function<HandoverView, T> derive;
    private final Duration interval;
    private final Runnable onTick;
    private final String clientId;
    private final Object lock = new Object();
    private final HandoverView view = new HandoverView();
    private final java.util.concurrent.ConcurrentHashMap<String, Long> failures =
            new java.util.concurrent.ConcurrentHashMap<>();
    private volatile T snapshot;
    private volatile long version;
    private long requested;
    private volatile long served;
    private volatile boolean stopping;
    private volatile String error;
    private Thread thread;
    private volatile KafkaConsumer<byte[], byte[]> reader;
    /** The reader is assigned the topic's partition (the topic exists); by the thread that reads, one at a time. */
    private boolean assigned;

    private volatile boolean started;

    /** A sync ticket and the readable end it must reach. */
    private record Target(long ticket, long end) {}

    public HandoverFollower(
            Map<String, Object> connection,
            String topic,
            Function<HandoverView, T> derive,
            Duration interval,
            Runnable onTick,
            String clientId) {
        this.connection = Map.copyOf(connection);
        this.topic = topic;
        this.derive = derive;
        this.interval = interval;
        this.onTick = onTick;
        this.clientId = clientId;
        this.snapshot = derive.apply(view);
    }

    public HandoverFollower<T> start() {
        started = true;
        thread = new Thread(this::run, "reprise-handover-follower");
        thread.setDaemon(true);
        thread.start();
        return this;
    }

    @Override
    public void close() {
        stopping = true;
        KafkaConsumer<byte[], byte[]> r = reader;
        if (r != null && started) {
            r.wakeup();
        }
        if (thread != null) {
            try {
                thread.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            thread = null;
        } else if (!started) {
            // Never started: the reader of a catch-up is closed here, not by the thread.
            KafkaConsumer<byte[], byte[]> unused = reader;
            reader = null;
            if (unused != null) {
                unused.close(Duration.ofSeconds(5));
            }
        }
    }

    public T snapshot() {
        return snapshot;
    }

    public long version() {
        return version;
    }

    /** The last error of the tail (it retries), or null while it reads fine. */
    public String error() {
        return error;
    }

    /** Runs {@code action} on the current view, under the follower's lock. */
    public <R> R withView(Function<HandoverView, R> action) {
        synchronized (lock) {
            return action.apply(view);
        }
    }

    public long requestSync() {
        synchronized (lock) {
            return ++requested;
        }
    }

    public boolean synced(long ticket) {
        return served >= ticket;
    }

    public boolean waitSynced(long ticket, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!synced(ticket)) {
            if (System.nanoTime() > deadline || thread == null) {
                return false;
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    /**
     * The handover topic's partitions as the cluster lists them now (none when the topic does not exist). In the
     * caller's thread, before {@link #start}: so a replica checks the topic with the reader it keeps, not a client
     * of its own.
     */
    public List<PartitionInfo> partitionsNow(Duration timeout) {
        notStarted("partitionsNow");
        KafkaConsumer<byte[], byte[]> consumer = reader();
        List<PartitionInfo> partitions = consumer.listTopics(timeout).get(topic);
        if (partitions == null || partitions.isEmpty()) {
            return List.of();
        }
        if (!assigned) {
            // The topic exists: the catch-up that follows need not list the topics again.
            assign(consumer, new TopicPartition(topic, 0));
            assigned = true;
        }
        return partitions;
    }

    /**
     * Reads, in the caller's thread and before {@link #start}, every record readable now ({@code read_committed},
     * up to the last stable offset), from where the previous catch-up stopped (the beginning at first), then
     * applies {@code read} to the view. The view is the one a read from the beginning gives (records are applied
     * in log order, and compaction only drops records a later one of the same key replaces). The thread started
     * later goes on from there, so the replay role reads the topic once for its bootstrap and its tail.
     */
    public <R> R catchUp(Duration timeout, Function<HandoverView, R> read) {
        notStarted("catchUp");
        KafkaConsumer<byte[], byte[]> consumer = reader();
        TopicPartition tp = new TopicPartition(topic, 0);
        if (!assigned) {
            if (!HandoverTopic.exists(consumer, topic, timeout)) {
                synchronized (lock) {
                    return read.apply(view); // no handover topic: no replay exists
                }
            }
            assign(consumer, tp);
            assigned = true;
        }
        long end = consumer.endOffsets(List.of(tp), timeout).get(tp);
        long deadline = System.nanoTime() + timeout.toNanos();
        boolean changed = false;
        while (consumer.position(tp, timeout) < end) {
            if (System.nanoTime() > deadline) {
                throw new HandoverTopicException("reading handover topic " + topic + " to offset " + end + " took over "
                        + timeout.toSeconds() + "s (reached " + consumer.position(tp) + ")");
            }
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                applyOne(record);
                changed = true;
            }
        }
        synchronized (lock) {
            if (changed) {
                snapshot = derive.apply(view);
                version++;
            }
            return read.apply(view);
        }
    }

    /**
     * Applies one record on its own: the consumer has moved past the whole batch, so an error that escaped here
     * would lose every record after this one (a {@code handover} among them: a guard that never learns H). A
     * malformed record is the view's to judge (HANDOVER.md section 2); an error while applying one is logged
     * and counted, and the next record is applied.
     */
    private void applyOne(ConsumerRecord<byte[], byte[]> record) {
        String reason;
        try {
            synchronized (lock) {
                reason = view.apply(record.key(), record.value()) ? null : view.lastMalformedCode();
            }
        } catch (RuntimeException | StackOverflowError e) {
            reason = "apply-error";
            log.warn("handover record at offset {} not applied: {}", record.offset(), e.toString());
        }
        if (reason != null) {
            failures.merge(reason, 1L, Long::sum);
        }
    }

    /**
     * How many records the follower could not apply, by reason: the wire code of a malformed record
     * ({@code malformed-key}, {@code too-large}, {@code malformed-value}, ...) or {@code apply-error}. The
     * records after them were applied.
     */
    public Map<String, Long> failures() {
        return Map.copyOf(failures);
    }

    private void notStarted(String what) {
        if (started) {
            throw new IllegalStateException(what + " reads in the caller's thread: only before start()");
        }
    }

    private KafkaConsumer<byte[], byte[]> reader() {
        if (reader == null) {
            reader = new KafkaConsumer<>(KafkaConnection.readerConfig(connection, clientId));
            assigned = false;
        }
        return reader;
    }

    private void run() {
        TopicPartition tp = new TopicPartition(topic, 0);
        Deque<Target> targets = new ArrayDeque<>();
        long lastTick = 0;
        long lastLook = 0;
        Duration metadataTimeout = Duration.ofSeconds(15);
        while (!stopping) {
            try {
                KafkaConsumer<byte[], byte[]> consumer = reader();
                long wanted;
                synchronized (lock) {
                    wanted = requested;
                }
                if (wanted > served && (targets.isEmpty() || targets.peekLast().ticket() != wanted)) {
                    if (!assigned && HandoverTopic.exists(consumer, topic, metadataTimeout)) {
                        assign(consumer, tp);
                        assigned = true;
                    }
                    // No handover topic: no replay exists, so an empty view is current.
                    long end = assigned
                            ? consumer.endOffsets(List.of(tp), metadataTimeout).get(tp)
                            : 0;
                    targets.addLast(new Target(wanted, end));
                }
                if (!assigned && System.nanoTime() - lastLook >= 5_000_000_000L) {
                    // No handover topic yet (no replay ever ran): look again now and then.
                    lastLook = System.nanoTime();
                    if (HandoverTopic.exists(consumer, topic, metadataTimeout)) {
                        assign(consumer, tp);
                        assigned = true;
                    }
                }
                long position = 0;
                if (assigned) {
                    boolean changed = false;
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(interval)) {
                        applyOne(record);
                        changed = true;
                    }
                    if (changed) {
                        synchronized (lock) {
                            snapshot = derive.apply(view);
                            version++;
                        }
                    }
                    position = consumer.position(tp, metadataTimeout);
                } else {
                    Thread.sleep(interval.toMillis());
                }
                while (!targets.isEmpty() && position >= targets.peekFirst().end()) {
                    served = Math.max(served, targets.pollFirst().ticket());
                }
                error = null;
                if (onTick != null && System.nanoTime() - lastTick >= interval.toNanos()) {
                    lastTick = System.nanoTime();
                    onTick.run();
                }
            } catch (WakeupException | InterruptException e) {
                if (!stopping) {
                    log.debug("handover follower woken up");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            } catch (Exception e) {
                // The tail must survive broker restarts and transient errors; the partitions it holds wait meanwhile.
                error = e.getClass().getSimpleName() + ": " + e.getMessage();
                log.warn("handover follower error, retrying: {}", error);
                try {
                    Thread.sleep(500);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        KafkaConsumer<byte[], byte[]> r = reader;
        reader = null;
        if (r != null) {
            r.close(Duration.ofSeconds(5));
        }
    }

    private static void assign(KafkaConsumer<byte[], byte[]> consumer, TopicPartition tp) {
        consumer.assign(List.of(tp));
        consumer.seekToBeginning(List.of(tp));
    }
}
