package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.FilterSpecException;
import io.reprise.kafka.protocol.RecordFilter;
import io.reprise.kafka.protocol.ReplayHandover;
import io.reprise.kafka.protocol.StartDecision;
import io.reprise.kafka.topic.HandoverFollower;
import io.reprise.kafka.topic.HandoverTopic;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The replay role of a JVM service: when the operator starts the service's own image with the {@code REPRISE_*}
 * environment (a Reconsume or a LakeReplay drain that runs the service's image), the service's handler runs under
 * the replay protocol of HANDOVER.md instead of the service's live consumer:
 *
 * <pre>{@code
 * public static void main(String[] args) {
 *     ReplayRole.runIfRequested(consumerConfig, new StringDeserializer(), new StringDeserializer(), Orders::apply);
 *     // ... the service's usual start: not reached when the replay role ran
 * }
 * }</pre>
 *
 * <p>It bootstraps the replay (S resolved once, in a transaction), consumes in the replay group from committed
 * offsets with no seek on rebalance, calls the handler per batch and commits after it returned, finishes each
 * partition per mode (the {@code finished} commit mark, then H published), publishes progress records, throttles,
 * dead-letters poison records, serves {@code /metrics} and {@code /healthz}, and on SIGTERM finishes the batch,
 * commits and leaves the group. It is the Java twin of {@code python -m replay_worker} (role {@code replay}): the
 * same settings, records, marks and exit codes, so Java and Python replicas of one replay work together.
 *
 * <p>Exit codes (as the Python worker's): 0 done or stopped; 2 bad settings or Kafka config folder; 3 the start
 * cannot be honoured (older than retention without clamping, or an impossible offset); 1 anything else
 * (Kubernetes restarts the pod, which resumes from committed offsets).
 *
 * @param <K> the service's key type
 * @param <V> the service's value type
 */
public final class ReplayRole<K, V> {

    private static final Logger LOG = LoggerFactory.getLogger(ReplayRole.class);

    /** The variable whose presence asks for the replay role (the operator always sets it). */
    public static final String REQUEST_VARIABLE = "REPRISE_REPLAY_ID";

    public static final int EXIT_OK = 0;
    public static final int EXIT_FAILED = 1;
    public static final int EXIT_BAD_SETTINGS = 2;
    public static final int EXIT_START_NOT_AVAILABLE = 3;

    private final ReplaySettings settings;
    private final Map<String, ?> serviceConfig;
    private final Deserializer<K> keys;
    private final Deserializer<V> values;
    private final RecordsHandler<K, V> handler;
    private final ReplayMetrics metrics;
    private final CountDownLatch finished = new CountDownLatch(1);
    private volatile boolean stopRequested;
    private volatile ReplayConsumer<K, V> consumer;
    private volatile ReplayMetrics.Endpoint endpoint;

    private ReplayRole(
            ReplaySettings settings,
            Map<String, ?> serviceConfig,
            Deserializer<K> keys,
            Deserializer<V> values,
            RecordsHandler<K, V> handler) {
        this.settings = settings;
        this.serviceConfig = serviceConfig == null ? Map.of() : Map.copyOf(serviceConfig);
        this.keys = keys;
        this.values = values;
        this.handler = handler;
        this.metrics = new ReplayMetrics(settings.replayId(), settings.memberName());
    }

    /** Whether this process was started as a replay consumer ({@value #REQUEST_VARIABLE} is set). */
    public static boolean requested() {
        return requested(System.getenv());
    }

    public static boolean requested(Map<String, String> env) {
        String id = env.get(REQUEST_VARIABLE);
        return id != null && !id.isBlank();
    }

    /**
     * The one line a service adds to its {@code main}: when the replay role is requested, runs it and exits the JVM
     * with its exit code (it never returns then); otherwise returns at once and the service starts as usual.
     *
     * @param consumerConfig the service's consumer settings (security settings are reused; its group, client id
     *     and deserializers are not); {@code REPRISE_BOOTSTRAP_SERVERS} and the files of
     *     {@code REPRISE_KAFKA_CONFIG_DIR} win over them
     * @param keyDeserializer the service's key deserializer (a record it refuses is poison)
     * @param valueDeserializer the service's value deserializer
     * @param handler what the service does with a batch of records
     */
    public static <K, V> void runIfRequested(
            Map<String, ?> consumerConfig,
            Deserializer<K> keyDeserializer,
            Deserializer<V> valueDeserializer,
            RecordsHandler<K, V> handler) {
        if (!requested()) {
            return;
        }
        ReplayRole<K, V> role;
        try {
            role = create(System.getenv(), consumerConfig, keyDeserializer, valueDeserializer, handler);
        } catch (ReplaySettings.SettingsException bad) {
            LOG.error("reprise replay role: {}", bad.getMessage());
            System.err.println("reprise replay role: " + bad.getMessage());
            System.exit(EXIT_BAD_SETTINGS);
            return;
        }
        role.stopOnSignals();
        int code = role.run();
        System.exit(code);
    }

    /** A role from {@code env} (the {@code REPRISE_*} variables); throws on bad settings, naming the variable. */
    public static <K, V> ReplayRole<K, V> create(
            Map<String, String> env,
            Map<String, ?> consumerConfig,
            Deserializer<K> keyDeserializer,
            Deserializer<V> valueDeserializer,
            RecordsHandler<K, V> handler) {
        return new ReplayRole<>(
                ReplaySettings.fromEnv(env), consumerConfig, keyDeserializer, valueDeserializer, handler);
    }

    public ReplaySettings settings() {
        return settings;
    }

    /** Ready: bootstrapped and consuming (what {@code /readyz} answers). */
    public boolean ready() {
        ReplayConsumer<K, V> running = consumer;
        return running != null && running.ready();
    }

    /** The port {@code /metrics} and {@code /healthz} are served on (0 when off or not started). */
    public int metricsPort() {
        ReplayMetrics.Endpoint served = endpoint;
        return served == null ? 0 : served.port();
    }

    /** Finish the current batch, commit, leave the group; {@link #run} then returns 0. Any thread. */
    public void stop() {
        stopRequested = true;
    }

    /** Stops and waits up to {@code seconds} for {@link #run} to return. */
    public boolean stopAndWait(long seconds) throws InterruptedException {
        stop();
        return finished.await(seconds, TimeUnit.SECONDS);
    }

    /** Bootstraps the replay and consumes until stopped (or, with {@code REPRISE_EXIT_WHEN_DONE}, done). */
    public int run() {
        ReplayConsumer<K, V> running = null;
        HandoverTopic handover = null;
        DeadLetters deadLetters = null;
        KafkaConsumer<byte[], byte[]> groupConsumer = null;
        HandoverFollower<ReplayConsumer.ReplayFacts> follower = null;
        try {
            if (settings.metricsPort() > 0) {
                // Served from the start: alive (not ready) while the bootstrap retries against a Kafka that is away.
                endpoint = new ReplayMetrics.Endpoint(settings.metricsPort(), metrics, this::ready);
            }
            Map<String, String> folder = KafkaClientConfig.loadFolder(settings.kafkaConfigDir());
            KafkaClientConfig clients = KafkaClientConfig.of(settings.bootstrapServers(), serviceConfig, folder);
            if (!clients.unknownKeys().isEmpty()) {
                LOG.warn(
                        "Kafka settings in REPRISE_KAFKA_CONFIG_DIR that Java clients do not know, left out: {}",
                        clients.unknownKeys());
            }
            RecordFilter filter = RecordFilter.compile(settings.filter());
            LOG.info("replay role starting: {}; Kafka config keys {}", settings.described(), folder.keySet());
            handover = new HandoverTopic(clients.connection(), settings.handoverTopic());
            // The bootstrap asks its questions with the clients the replica keeps (the group's consumer before it
            // subscribes, the handover topic's tail before it starts): each made and connected once.
            groupConsumer = ReplayConsumer.newConsumer(settings, clients);
            follower = ReplayConsumer.newFollower(settings, clients);
            ReplayHandover state =
                    ReplayBootstrap.run(settings, clients, handover, follower, groupConsumer, () -> stopRequested);
            if (stopRequested) {
                return EXIT_OK;
            }
            deadLetters = new DeadLetters(
                    settings.replayId(),
                    settings.deadLetters() ? settings.dlqTopic() : null,
                    withLinger(clients.producer("reprise-" + settings.memberName() + "-dlq")));
            HandlerDelivery<K, V> delivery =
                    new HandlerDelivery<>(filter, keys, values, handler, deadLetters, settings.handlerRetries(), 200);
            running = new ReplayConsumer<>(
                    settings,
                    clients,
                    delivery,
                    deadLetters,
                    metrics,
                    state,
                    handover,
                    groupConsumer,
                    follower,
                    () -> stopRequested);
            consumer = running;
            groupConsumer = null; // the replay consumer closes them now
            follower = null;
            running.run();
            return EXIT_OK;
        } catch (KafkaClientConfig.KafkaConfigException | ReplaySettings.SettingsException bad) {
            LOG.error("{}", bad.getMessage());
            return EXIT_BAD_SETTINGS;
        } catch (FilterSpecException bad) {
            LOG.error("REPRISE_FILTER: {}", bad.getMessage());
            return EXIT_BAD_SETTINGS;
        } catch (StartDecision.OlderThanRetention | StartDecision.SpecException unavailable) {
            LOG.error("StartNotAvailable: {}", unavailable.getMessage());
            return EXIT_START_NOT_AVAILABLE;
        } catch (IOException | RuntimeException failed) {
            LOG.error("replay role failed", failed);
            return EXIT_FAILED;
        } finally {
            if (follower != null) {
                follower.close();
            }
            if (groupConsumer != null) {
                groupConsumer.close(CloseOptions.timeout(ReplayConsumer.CLOSE_WAIT));
            }
            if (deadLetters != null) {
                deadLetters.close();
            }
            if (handover != null) {
                handover.close();
            }
            ReplayMetrics.Endpoint served = endpoint;
            if (served != null) {
                served.close();
            }
            finished.countDown();
        }
    }

    private static Map<String, Object> withLinger(Map<String, Object> config) {
        config.put("linger.ms", 5);
        return config;
    }

    /**
     * SIGTERM and SIGINT finish the batch, commit and leave the group, then {@link #run} returns 0. Handled as
     * signals (not a shutdown hook), because a JVM that shuts down on SIGTERM exits with 143 whatever the hook does.
     */
    @SuppressWarnings("removal")
    private void stopOnSignals() {
        for (String name : new String[] {"TERM", "INT"}) {
            try {
                sun.misc.Signal.handle(new sun.misc.Signal(name), signal -> {
                    LOG.info("stop requested (SIG{})", name);
                    stop();
                });
            } catch (IllegalArgumentException | UnsupportedOperationException unavailable) {
                Runtime.getRuntime()
                        .addShutdownHook(new Thread(
                                () -> {
                                    try {
                                        stopAndWait(25);
                                    } catch (InterruptedException interrupted) {
                                        Thread.currentThread().interrupt();
                                    }
                                },
                                "reprise-replay-stop"));
                return;
            }
        }
    }
}
