package io.reprise.kafka.replay;

/**
 * Throttling in records per second and bytes per second: two token buckets, as {@code replay_worker/replay/throttle.py}.
 * Pure (the clock is passed in). The loop asks {@link #delaySeconds} after reading a batch and waits that long
 * before handing it on, so a replay never pushes the handler or the brokers harder than asked. A bucket holds at
 * most one second of budget, so an idle pause does not turn into a burst afterwards.
 */
final class Throttle {

    private final Bucket records;
    private final Bucket bytes;

    /** Limits; 0 (or less) means unlimited. */
    Throttle(double recordsPerSecond, double bytesPerSecond) {
        this.records = recordsPerSecond > 0 ? new Bucket(recordsPerSecond) : null;
        this.bytes = bytesPerSecond > 0 ? new Bucket(bytesPerSecond) : null;
    }

    boolean unlimited() {
        return records == null && bytes == null;
    }

    /** Accounts for a batch of {@code count} records of {@code size} bytes; seconds to wait before passing it on. */
    double delaySeconds(int count, long size, double nowSeconds) {
        double wait = 0;
        if (records != null) {
            wait = Math.max(wait, records.take(count, nowSeconds));
        }
        if (bytes != null) {
            wait = Math.max(wait, bytes.take(size, nowSeconds));
        }
        return wait;
    }

    private static final class Bucket {
        private final double rate;
        private double tokens;
        private double updated = Double.NaN;

        Bucket(double rate) {
            this.rate = rate;
        }

        double take(double amount, double now) {
            tokens = Double.isNaN(updated) ? rate : Math.min(rate, tokens + (now - updated) * rate);
            updated = now;
            tokens -= amount;
            return tokens >= 0 ? 0.0 : -tokens / rate;
        }
    }
}
