package io.reprise.kafka.spring;

import io.reprise.kafka.guard.GuardSettings;
import io.reprise.kafka.guard.GuardedConsumer;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.springframework.kafka.core.ConsumerPostProcessor;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;

/**
 * Spring Kafka in one line: every consumer of a {@link DefaultKafkaConsumerFactory} is wrapped in the handover guard.
 *
 * <pre>{@code
 * @Bean
 * ConsumerFactory<String, Order> consumerFactory(KafkaProperties properties) {
 *     return GuardPostProcessor.install(new DefaultKafkaConsumerFactory<>(properties.buildConsumerProperties()));
 * }
 * }</pre>
 *
 * <p>The guard judges records by their bytes (the replay's filter reads headers, keys and JSON values), so the
 * factory's consumers are made to read bytes, and each guarded consumer deserializes the records it hands to the
 * listener with the factory's own deserializers (configured by class, or set as instances). The live group is the
 * consumer's own ({@code group.id}, or a listener's {@code groupId}); the guard's own clients reuse the factory's
 * connection settings. Spring's listener container turns automatic commits off unless the factory's config turns
 * them on; with them on, the guard refuses, since the consumer would commit without the guard's marks.
 *
 * <p>The handover topic is the settings' ({@link GuardSettings#handoverTopic()}), by default the environment
 * variable {@code REPRISE_HANDOVER_TOPIC}: one topic per namespace, which the live Deployment names with
 * {@code POD_NAMESPACE} from the downward API and {@code REPRISE_HANDOVER_TOPIC=reprise.handover.$(POD_NAMESPACE)},
 * the topic the operator gives the replay pods (docs/security.md section 8b).
 */
public final class GuardPostProcessor<K, V> implements ConsumerPostProcessor<K, V> {

    private final GuardSettings settings;
    private final Supplier<Deserializer<K>> keys;
    private final Supplier<Deserializer<V>> values;

    private GuardPostProcessor(
            GuardSettings settings, Supplier<Deserializer<K>> keys, Supplier<Deserializer<V>> values) {
        this.settings = settings;
        this.keys = keys;
        this.values = values;
    }

    /** Guards every consumer the factory makes from now on; returns the factory. */
    public static <K, V> DefaultKafkaConsumerFactory<K, V> install(DefaultKafkaConsumerFactory<K, V> factory) {
        return install(factory, UnaryOperator.identity());
    }

    /** As {@link #install(DefaultKafkaConsumerFactory)}, with settings changed (the handover topic, the member name). */
    @SuppressWarnings("unchecked")
    public static <K, V> DefaultKafkaConsumerFactory<K, V> install(
            DefaultKafkaConsumerFactory<K, V> factory, UnaryOperator<GuardSettings> customize) {
        Map<String, Object> config = new HashMap<>(factory.getConfigurationProperties());
        Object auto = config.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
        if (auto != null && Boolean.parseBoolean(auto.toString())) {
            throw new IllegalStateException(
                    "the consumer factory sets enable.auto.commit=true: the consumers would commit "
                            + "without the guard's marks. Remove it (Spring's listener container commits itself) before "
                            + "installing the handover guard");
        }
        // Spring's container turns automatic commits off when the factory does not set them.
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        GuardSettings settings = customize.apply(GuardSettings.from(config).withGroupId(null));
        Supplier<Deserializer<K>> keys = original(factory.getKeyDeserializer(), config, true);
        Supplier<Deserializer<V>> values = original(factory.getValueDeserializer(), config, false);
        factory.setKeyDeserializerSupplier(() -> (Deserializer<K>) (Deserializer<?>) new ByteArrayDeserializer());
        factory.setValueDeserializerSupplier(() -> (Deserializer<V>) (Deserializer<?>) new ByteArrayDeserializer());
        factory.addPostProcessor(new GuardPostProcessor<>(settings, keys, values));
        return factory;
    }

    /** The factory's deserializer: its instance (shared, as Spring shares it), or a new one per consumer from the config. */
    @SuppressWarnings("unchecked")
    private static <T> Supplier<Deserializer<T>> original(
            Deserializer<T> instance, Map<String, Object> config, boolean isKey) {
        if (instance != null) {
            instance.configure(config, isKey);
            return () -> instance;
        }
        String name =
                isKey ? ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG : ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG;
        Object configured = config.get(name);
        if (configured == null) {
            throw new IllegalStateException("the consumer factory has no " + name + " and no deserializer instance: "
                    + "the guard deserializes the records it hands to the listener with it");
        }
        return () -> {
            try {
                Class<?> type = configured instanceof Class<?> c
                        ? c
                        : Class.forName(
                                configured.toString().strip(),
                                true,
                                Thread.currentThread().getContextClassLoader());
                Deserializer<T> made =
                        (Deserializer<T>) type.getDeclaredConstructor().newInstance();
                made.configure(config, isKey);
                return made;
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(name + " " + configured + " cannot be made: " + e, e);
            }
        };
    }

    @Override
    @SuppressWarnings("unchecked")
    public Consumer<K, V> apply(Consumer<K, V> consumer) {
        // The factory makes consumers of bytes (see install): the guard reads those and deserializes what it hands.
        Consumer<byte[], byte[]> bytes = (Consumer<byte[], byte[]>) (Consumer<?, ?>) consumer;
        return new GuardedConsumer<>(bytes, keys.get(), values.get(), settings);
    }
}
