package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.CommitMark;

/**
 * The {@code finished} mark as the replay group's commit metadata, written so that every Reprise reader can read it.
 *
 * <p>confluent-kafka-python (the Python worker, guard and operator) writes commit metadata with a trailing NUL byte
 * and reads it back as a C string: metadata without that byte is read past its end (garbage after the JSON, or a
 * {@code UnicodeDecodeError} that stops the reader). So the Java role writes the mark the way the Python worker's
 * marks are stored, JSON plus one NUL, and strips trailing NULs before decoding (marks written by either).
 */
final class FinishMark {

    private FinishMark() {
    }

    /** The commit metadata of p finished for {@code replayId} with {@code reason}. */
    static String metadata(String replayId, String reason) {
        return CommitMark.finished(replayId, reason).encode() + '\u0000';
    }

    /** The mark in committed metadata (Java- or Python-written), or null when there is none. */
    static CommitMark decode(String metadata) {
        if (metadata == null) {
            return null;
        }
        int end = metadata.length();
        while (end > 0 && metadata.charAt(end - 1) == '\u0000') {
            end--;
        }
        return CommitMark.decode(metadata.substring(0, end));
    }
}
