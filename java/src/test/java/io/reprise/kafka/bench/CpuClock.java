package io.reprise.kafka.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumMap;
import java.util.Map;

/**
 * CPU time for the benchmarks: this JVM's (every thread), by kind of thread, and another process's (the broker's),
 * from /proc.
 */
public final class CpuClock {
    private CpuClock() {}

    /**
     * What a JVM thread works for, by its name (/proc/self/task/TID/comm, 15 characters): the JIT compilers' CPU is
     * a warm-up cost of the process (it falls wherever the compiler happens to run, not on the run whose code it
     * compiles), the garbage collector's is a per-record cost of what the loop allocated, the guard's threads (the
     * handover topic's tail, its producer) cost per second, not per record.
     */
    public enum Kind {
        JIT,
        GC,
        GUARD,
        OTHER;

        static Kind of(String name) {
            if (name.startsWith("C1 Compiler") || name.startsWith("C2 Compiler")) {
                return JIT;
            }
            if (name.startsWith("GC Thread") || name.startsWith("G1 ") || name.equals("VM Thread")) {
                return GC;
            }
            if (name.startsWith("reprise-")) {
                return GUARD;
            }
            return OTHER;
        }
    }

    /** CPU seconds of this JVM, every thread (the clients', GC, JIT). */
    public static double jvmSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                        .getProcessCpuTime()
                / 1e9;
    }

    /**
     * CPU seconds of this JVM's live threads by {@link Kind} (clock ticks, 10 ms each: a run's share of JIT or GC is
     * read to about a hundredth of a second). A thread that ended between two readings drops out of the later one:
     * the JIT, GC and guard threads live as long as the JVM or the run.
     */
    public static Map<Kind, Double> byKind() {
        Map<Kind, Double> out = new EnumMap<>(Kind.class);
        for (Kind kind : Kind.values()) {
            out.put(kind, 0.0);
        }
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path task : tasks) {
                try {
                    String name = Files.readString(task.resolve("comm")).strip();
                    out.merge(Kind.of(name), statSeconds(Files.readString(task.resolve("stat"))), Double::sum);
                } catch (IOException | RuntimeException gone) {
                    // the thread ended meanwhile
                }
            }
        } catch (IOException unreadable) {
            // no /proc: every kind stays 0
        }
        return out;
    }

    /** User + system seconds of another process, from /proc/PID/stat; 0 when it cannot be read. */
    public static double processSeconds(long pid) {
        if (pid <= 0) {
            return 0;
        }
        try {
            return statSeconds(Files.readString(Path.of("/proc/" + pid + "/stat")));
        } catch (IOException | RuntimeException unreadable) {
            return 0;
        }
    }

    private static double statSeconds(String stat) {
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) / 100.0; // utime, stime in USER_HZ
    }
}
