package io.reprise.kafka.protocol;

/** What the guard does with one record: hand it to the service, or skip it (the replay covers it). */
public enum Verdict {
    PROCESS,
    SKIP
}
