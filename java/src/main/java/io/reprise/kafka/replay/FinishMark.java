package io.reprise.kafka.replay;

import io.reprise.kafka.protocol.CommitMark;
import io.reprise.kafka.protocol.CommitMetadata;

/**
 * The {@code finished} mark as the replay group's commit metadata, stored and read as every Reprise reader does
 * (a C string: see {@link CommitMetadata} and HANDOVER.md section 3).
 */
final class FinishMark {

    private FinishMark() {}

    /** The commit metadata of p finished for {@code replayId} with {@code reason}. */
    static String metadata(String replayId, String reason) {
        return CommitMetadata.store(CommitMark.finished(replayId, reason));
    }

    /** The mark in committed metadata (written by any side), or null when there is none. */
    static CommitMark decode(String metadata) {
        return CommitMetadata.read(metadata);
    }
}
