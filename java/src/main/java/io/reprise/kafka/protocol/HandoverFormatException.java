package io.reprise.kafka.protocol;

/** A handover-topic record or commit mark that does not follow the format (HANDOVER.md sections 2 and 3). */
public class HandoverFormatException extends Exception {
    private static final long serialVersionUID = 1L;

    public HandoverFormatException(String message) {
        super(message);
    }
}
