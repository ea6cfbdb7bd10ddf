package io.reprise.kafka.protocol;

/** A filter spec that cannot be understood; the message names the field and what was expected. */
public class FilterSpecException extends Exception {
    private static final long serialVersionUID = 1L;

    public FilterSpecException(String message) {
        super(message);
    }
}
