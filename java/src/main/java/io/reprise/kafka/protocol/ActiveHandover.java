package io.reprise.kafka.protocol;

/**
 * What a guard needs of the Handover-mode replay that covers one of its partitions.
 *
 * <p>With {@code problem} set the guard cannot follow this replay on the partition (a record it cannot read, a filter
 * it cannot evaluate): it skips nothing for it and reports the problem; {@code start} and {@code filter} may then be
 * null. The problem reads {@code <what>:<code>}, e.g. {@code unreadable-handover-record:newer-version} or
 * {@code unevaluable-filter:unknown-field}.
 *
 * @param handover H, or null while unknown
 */
public record ActiveHandover(String replayId, Long start, Long handover, RecordFilter filter, String problem) {

    public ActiveHandover(String replayId, long start, Long handover, RecordFilter filter) {
        this(replayId, start, handover, filter, null);
    }
}
