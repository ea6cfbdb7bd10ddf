// Throttling in records and bytes per second: two token buckets, each holding at most one second of
// budget (an idle pause does not turn into a burst). Pure: the clock is passed in.
package protocol

type bucket struct {
	rate    float64
	tokens  float64
	started bool
	updated float64
}

func (b *bucket) take(amount, now float64) float64 {
	if !b.started {
		b.tokens, b.started = b.rate, true
	} else {
		b.tokens = min(b.rate, b.tokens+(now-b.updated)*b.rate)
	}
	b.updated = now
	b.tokens -= amount
	if b.tokens >= 0 {
		return 0
	}
	return -b.tokens / b.rate
}

// Throttle limits records and bytes per second; 0 or less means unlimited.
type Throttle struct {
	records *bucket
	bytes   *bucket
}

// NewThrottle returns a throttle of the given rates.
func NewThrottle(recordsPerSecond, bytesPerSecond float64) *Throttle {
	t := &Throttle{}
	if recordsPerSecond > 0 {
		t.records = &bucket{rate: recordsPerSecond}
	}
	if bytesPerSecond > 0 {
		t.bytes = &bucket{rate: bytesPerSecond}
	}
	return t
}

// Unlimited says whether no limit is set.
func (t *Throttle) Unlimited() bool { return t.records == nil && t.bytes == nil }

// Delay accounts for a batch and returns the seconds to wait before passing it on (now in seconds).
func (t *Throttle) Delay(records int, size int64, now float64) float64 {
	wait := 0.0
	if t.records != nil {
		wait = max(wait, t.records.take(float64(records), now))
	}
	if t.bytes != nil {
		wait = max(wait, t.bytes.take(float64(size), now))
	}
	return wait
}
