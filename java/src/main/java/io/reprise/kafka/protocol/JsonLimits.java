package io.reprise.kafka.protocol;

/**
 * The size and nesting limits of handover records and of the record values a filter parses (HANDOVER.md section
 * 2, "Limits", and section 4, steps 5 and 8). Every JSON parser has a nesting limit of its own (Jackson 1000,
 * Python about 1000, Go's encoding/json 10 000), so a record between them was data in one language and
 * undecodable, or a crash, in another; the protocol's limits are far below all of them, and this port sets them
 * on its own parser ({@link CompactJson#parseRecord}), so every port agrees at the boundary.
 */
public final class JsonLimits {

    /** Deepest nesting of a key, a handover value or a filtered value: {@code 1} is depth 0, {@code []} depth 1. */
    public static final int MAX_DEPTH = 64;

    /** Longest handover-record key (bytes). */
    public static final int MAX_RECORD_KEY_BYTES = 4096;

    /** Longest handover-record value (bytes): Kafka's default {@code max.message.bytes}. */
    public static final int MAX_RECORD_VALUE_BYTES = 1 << 20;

    /** Longest record value a JSON filter reads (bytes); longer is undecodable before any other test. */
    public static final int MAX_FILTER_VALUE_BYTES = 1 << 20;

    /**
     * Longest integer literal (digits, without the sign) the protocol reads; longer makes the value not JSON the
     * protocol reads. Python's own default limit; Jackson's default (1000 characters for any number) and Go (none)
     * disagreed with it.
     */
    public static final int MAX_INTEGER_DIGITS = 4300;

    private JsonLimits() {}
}
