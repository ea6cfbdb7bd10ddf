package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Token buckets of records and bytes per second, as replay_worker/replay/throttle.py. */
class ThrottleTest {

    @Test
    void unlimitedNeverWaits() {
        Throttle throttle = new Throttle(0, 0);
        assertTrue(throttle.unlimited());
        assertEquals(0.0, throttle.delaySeconds(1_000_000, 1L << 40, 0));
    }

    @Test
    void aBatchOverTheBudgetWaitsForItsExcess() {
        Throttle throttle = new Throttle(100, 0);
        assertEquals(0.0, throttle.delaySeconds(100, 0, 10.0)); // one second of budget to start with
        assertEquals(0.5, throttle.delaySeconds(50, 0, 10.0), 1e-9);
        // Half a second later the debt is paid: the next 100 records owe one second.
        assertEquals(1.0, throttle.delaySeconds(100, 0, 10.5), 1e-9);
    }

    @Test
    void theSlowerLimitWins() {
        Throttle throttle = new Throttle(1000, 1000);
        assertEquals(2.0, throttle.delaySeconds(10, 3000, 0), 1e-9);
    }

    @Test
    void anIdlePauseIsNoBurst() {
        Throttle throttle = new Throttle(10, 0);
        throttle.delaySeconds(10, 0, 0);
        assertEquals(1.0, throttle.delaySeconds(20, 0, 1000), 1e-9); // at most one second saved up
    }
}
