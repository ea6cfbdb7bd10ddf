package io.reprise.kafka.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** Marks in committed metadata as either language writes them: Python's with one NUL, read up to the first NUL. */
class CommitMetadataTest {

    @Test
    void storedAsACString() {
        assertEquals(
                "{\"reprise\":1,\"replay\":\"r\",\"skip_from\":3}\u0000",
                CommitMetadata.store(CommitMark.skipFrom("r", 3)));
    }

    @Test
    void readUpToTheFirstNul() {
        CommitMark mark = CommitMark.rereadUntil("ns/fix/1", 12);
        assertEquals(mark, CommitMetadata.read(mark.encode() + "\u0000"), "as confluent-kafka-python writes it");
        assertEquals(mark, CommitMetadata.read(mark.encode()), "without the NUL");
        assertEquals(mark, CommitMetadata.read(mark.encode() + "\u0000garbage"), "a C string ends at its NUL");
        assertNull(CommitMetadata.read("\u0000"));
        assertNull(CommitMetadata.read(null));
        assertNull(CommitMetadata.read("someone else's\u0000"));
    }
}
