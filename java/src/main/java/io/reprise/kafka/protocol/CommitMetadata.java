package io.reprise.kafka.protocol;

/**
 * A mark as it travels in a committed offset's metadata string. confluent-kafka (the Python worker, guard and
 * operator) writes metadata as a C string, the text and one NUL byte, and reads it back up to the first NUL, so a
 * mark stored without the NUL is read past its end there. Java writes its marks the same way and reads any
 * metadata up to its first NUL, so marks written by either language read the same on both sides.
 */
public final class CommitMetadata {
    private CommitMetadata() {}

    /** The metadata string a mark is committed as: its JSON and one NUL. */
    public static String store(CommitMark mark) {
        return mark.encode() + '\u0000';
    }

    /** The text of committed metadata as a C string reads it: up to the first NUL (null stays null). */
    public static String text(String metadata) {
        if (metadata == null) {
            return null;
        }
        int nul = metadata.indexOf('\u0000');
        return nul < 0 ? metadata : metadata.substring(0, nul);
    }

    /** The mark in committed metadata written by any side; null when there is none (or it is someone else's). */
    public static CommitMark read(String metadata) {
        return CommitMark.decode(text(metadata));
    }
}
