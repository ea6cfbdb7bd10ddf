package io.reprise.kafka.replay;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A service's {@code main} as the README shows it, for tests that run the replay role as a process of its own (kill
 * -9 and restart here, and the Python interoperability test): its handler appends one line per record,
 * {@code <topic> <partition> <offset> <value>}, to the ledger file {@code REPRISE_TEST_LEDGER}, forced to disk
 * before it returns (so the ledger holds exactly what was processed). {@code REPRISE_TEST_BATCH_DELAY_MS} makes
 * each batch slow, so a kill lands mid-replay. Without {@code REPRISE_REPLAY_ID} it exits 10 (the "live service").
 */
public final class LedgerReplayMain {

    private LedgerReplayMain() {}

    public static void main(String[] args) throws IOException {
        Path ledger = Path.of(System.getenv("REPRISE_TEST_LEDGER"));
        long delay = Long.parseLong(System.getenv().getOrDefault("REPRISE_TEST_BATCH_DELAY_MS", "0"));
        FileChannel out = FileChannel.open(
                ledger, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        RecordsHandler<String, String> handler = records -> {
            StringBuilder lines = new StringBuilder();
            for (ConsumerRecord<String, String> r : records) {
                lines.append("R ")
                        .append(r.topic())
                        .append(' ')
                        .append(r.partition())
                        .append(' ')
                        .append(r.offset())
                        .append('\n');
            }
            if (delay > 0) {
                Thread.sleep(delay);
            }
            out.write(ByteBuffer.wrap(lines.toString().getBytes(StandardCharsets.UTF_8)));
            out.force(false);
        };
        ReplayRole.runIfRequested(Map.of(), new StringDeserializer(), new StringDeserializer(), handler);
        System.exit(10);
    }
}
