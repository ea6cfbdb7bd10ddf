package io.reprise.examples.accounts;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The accounts service's record of what it processed: one line {@code <side> <topic> <partition> <offset> <group>}
 * per record, where side is {@code L} (the live group) or {@code R} (a replay group), so that a reader that knows
 * nothing of Kafka or Reprise can check that each record was processed once.
 *
 * <p>Each process appends to a file of its own, {@code <side>-<host>-<pid>.log}, with one write per batch on a
 * file opened for append: a {@code kill -9} leaves at most a torn last line, which readers skip. A batch is in the
 * ledger before its offsets are committed, so a record is in it at least once (the service is at-least-once,
 * like any Kafka consumer; the guard and the replay role make the two groups exactly-once between them).
 */
final class Ledger implements AutoCloseable {

    private final Path file;
    private final String side;
    private final String group;
    private FileOutputStream out;

    private Ledger(Path file, String side, String group) {
        this.file = file;
        this.side = side;
        this.group = group;
    }

    /**
     * The ledger of this process in {@code folder}, for the live group or a replay group. The file is made at the
     * first record, so a process that never processes one leaves none.
     */
    static Ledger of(Path folder, boolean replay, String group) {
        String side = replay ? "R" : "L";
        String host = System.getenv().getOrDefault("HOSTNAME", "local");
        return new Ledger(folder.resolve(side + "-" + host + "-" + ProcessHandle.current().pid() + ".log"), side,
                group);
    }

    /** Records a processed batch; returns only once the lines are written to the file. */
    synchronized void record(List<? extends ConsumerRecord<?, ?>> records) {
        if (records.isEmpty()) {
            return;
        }
        StringBuilder lines = new StringBuilder(records.size() * 48);
        for (ConsumerRecord<?, ?> record : records) {
            lines.append(side).append(' ').append(record.topic()).append(' ').append(record.partition())
                    .append(' ').append(record.offset()).append(' ').append(group).append('\n');
        }
        try {
            if (out == null) {
                Files.createDirectories(file.getParent());
                out = new FileOutputStream(file.toFile(), true);
            }
            out.write(lines.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the ledger " + file, e);
        }
    }

    @Override
    public synchronized void close() throws IOException {
        if (out != null) {
            out.close();
        }
    }
}
