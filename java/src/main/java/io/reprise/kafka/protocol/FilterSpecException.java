package io.reprise.kafka.protocol;

/**
 * A filter spec that cannot be understood. {@link #field()} names the part at fault ({@code filter.json[0].in}) and
 * {@link #code()} says what is wrong, in words every implementation shares (the conformance vectors).
 */
public class FilterSpecException extends Exception {
    private static final long serialVersionUID = 1L;

    private final String field;
    private final String code;

    public FilterSpecException(String message, String field, String code) {
        super(message);
        this.field = field;
        this.code = code;
    }

    public String field() {
        return field;
    }

    public String code() {
        return code;
    }
}
