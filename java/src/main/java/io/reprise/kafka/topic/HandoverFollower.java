package io.reprise.kafka.topic;

import io.reprise.kafka.protocol.HandoverView;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

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
    private volatile T snapshot;
    private volatile long version;
    private long requested;
    private volatile long served;
    private volatile boolean stopping;
    private volatile String error;
    private Thread thread;
    private volatile KafkaConsumer<byte[], byte[]> reader;

    /** A sync ticket and the readable end it must reach. */
    private record Target(long ticket, long end) {
    }

    public HandoverFollower(Map<String, Object> connection, String topic, Function<HandoverView, T> derive,
                            Duration interval, Runnable onTick, String clientId) {
        this.connection = Map.copyOf(connection);
        this.topic = topic;
        this.derive = derive;
        this.interval = interval;
        this.onTick = onTick;
        this.clientId = clientId;
        this.snapshot = derive.apply(view);
    }

    public HandoverFollower<T> start() {
        thread = new Thread(this::run, "reprise-handover-follower");
        thread.setDaemon(true);
        thread.start();
        return this;
    }

    @Override
    public void close() {
        stopping = true;
        KafkaConsumer<byte[], byte[]> r = reader;
        if (r != null) {
            r.wakeup();
        }
        if (thread != null) {
            try {
                thread.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            thread = null;
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

    private void run() {
        TopicPartition tp = new TopicPartition(topic, 0);
        Deque<Target> targets = new ArrayDeque<>();
        boolean assigned = false;
        long lastTick = 0;
        long lastLook = 0;
        Duration metadataTimeout = Duration.ofSeconds(15);
        while (!stopping) {
            try {
                if (reader == null) {
                    reader = new KafkaConsumer<>(KafkaConnection.readerConfig(connection, clientId));
                    assigned = false;
                }
                KafkaConsumer<byte[], byte[]> consumer = reader;
                long wanted;
                synchronized (lock) {
                    wanted = requested;
                }
                if (wanted > served && (targets.isEmpty() || targets.peekLast().ticket() != wanted)) {
                    Long end = HandoverTopic.readableEnd(consumer, topic, metadataTimeout);
                    // No handover topic: no replay exists, so an empty view is current.
                    targets.addLast(new Target(wanted, end == null ? 0 : end));
                    if (end != null && !assigned) {
                        assign(consumer, tp);
                        assigned = true;
                    }
                }
                if (!assigned && System.nanoTime() - lastLook >= 5_000_000_000L) {
                    // No handover topic yet (no replay ever ran): look again now and then.
                    lastLook = System.nanoTime();
                    if (HandoverTopic.readableEnd(consumer, topic, metadataTimeout) != null) {
                        assign(consumer, tp);
                        assigned = true;
                    }
                }
                long position = 0;
                if (assigned) {
                    boolean changed = false;
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(interval)) {
                        synchronized (lock) {
                            view.apply(record.key(), record.value());
                        }
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
