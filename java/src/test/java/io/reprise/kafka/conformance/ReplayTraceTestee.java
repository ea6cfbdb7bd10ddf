package io.reprise.kafka.conformance;

import io.reprise.kafka.replay.ReplayBookTestee;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * The Java testee of replay_traces.json, as the one trace runner starts it (conformance/REPLAY_TRACES.md,
 * "Testees"): one JSON step per line on stdin, one JSON line of outputs on stdout.
 */
public final class ReplayTraceTestee {

    private ReplayTraceTestee() {}

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        ReplayBookTestee.serve(in, out);
    }
}
