package io.reprise.kafka.protocol;

/**
 * A handover-topic record that does not follow the format (HANDOVER.md section 2). {@link #code()} is the reason in
 * words every implementation shares (the conformance vectors): {@code malformed-key}, {@code malformed-value},
 * {@code newer-version}, {@code kind-mismatch}, {@code unknown-kind}, {@code key-mismatch}, {@code bad-field}.
 */
public class HandoverFormatException extends Exception {
    private static final long serialVersionUID = 1L;

    private final String code;

    public HandoverFormatException(String message, String code) {
        super(message);
        this.code = code;
    }

    public String code() {
        return code;
    }
}
