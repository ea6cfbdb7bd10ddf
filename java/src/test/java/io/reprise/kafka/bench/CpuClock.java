package io.reprise.kafka.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;

/** CPU time for the benchmarks: this JVM's (every thread) and another process's, the broker's, from /proc. */
public final class CpuClock {
    private CpuClock() {
    }

    /** CPU seconds of this JVM, every thread (the clients', GC, JIT). */
    public static double jvmSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime() / 1e9;
    }

    /** User + system seconds of another process, from /proc/PID/stat; 0 when it cannot be read. */
    public static double processSeconds(long pid) {
        if (pid <= 0) {
            return 0;
        }
        try {
            String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) / 100.0; // utime, stime in USER_HZ
        } catch (IOException | RuntimeException unreadable) {
            return 0;
        }
    }
}
