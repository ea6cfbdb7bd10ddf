package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.reprise.kafka.protocol.CommitMark;
import org.junit.jupiter.api.Test;

/** The finished mark is stored as the Python worker stores its marks (JSON and one NUL), and read either way. */
class FinishMarkTest {

    @Test
    void theMarkEndsWithOneNulLikeConfluentKafkaPythonsMetadata() {
        String metadata = FinishMark.metadata("ns/fix/1", "caught-up");
        assertEquals("{\"reprise\":1,\"replay\":\"ns/fix/1\",\"finished\":\"caught-up\"}\u0000", metadata);
        CommitMark mark = FinishMark.decode(metadata);
        assertEquals("ns/fix/1", mark.replayId());
        assertEquals("caught-up", mark.finished());
    }

    @Test
    void marksWithoutTheNulAndForeignMetadataAreRead() {
        assertEquals(
                "end-bound",
                FinishMark.decode("{\"reprise\":1,\"replay\":\"r\",\"finished\":\"end-bound\"}")
                        .finished());
        assertNull(FinishMark.decode(""));
        assertNull(FinishMark.decode(null));
        assertNull(FinishMark.decode("\u0000"));
        assertNull(FinishMark.decode("checkpoint-7"));
        assertTrue(FinishMark.decode("{\"reprise\":1,\"replay\":\"r\"}\u0000\u0000")
                        .finished()
                == null);
    }
}
