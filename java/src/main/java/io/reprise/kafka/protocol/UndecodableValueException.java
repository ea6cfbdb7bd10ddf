package io.reprise.kafka.protocol;

/**
 * A record value that is not the JSON a filter's JSON condition needs (a poison record). The replay
 * dead-letters it, so for the guard such a record counts as matching (HANDOVER.md section 4).
 */
public class UndecodableValueException extends Exception {
    private static final long serialVersionUID = 1L;

    public UndecodableValueException(String message) {
        super(message, null, false, false);
    }
}
