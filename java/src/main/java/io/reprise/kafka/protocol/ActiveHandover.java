package io.reprise.kafka.protocol;

/**
 * What a guard needs of the Handover-mode replay that covers one of its partitions.
 *
 * @param handover H, or null while unknown
 * @param filter   the replay's compiled filter; null when this side cannot evaluate it ({@code problem} says
 *                 why): then the guard skips nothing for this replay, since it cannot prove what is covered
 */
public record ActiveHandover(String replayId, long start, Long handover, RecordFilter filter, String problem) {
}
