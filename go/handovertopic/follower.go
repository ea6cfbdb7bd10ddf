package handovertopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"reprise.io/kafka/protocol"
)

// Follower tails the handover topic in a goroutine and keeps a HandoverView current.
//
//   - Snapshot/Version: what derive(view) returned after the last change, swapped in whole.
//   - RequestSync/Synced: a barrier. Synced(ticket) turns true once the view includes everything that was
//     readable when the ticket was taken. The guard takes one on every assignment, so a live replica never
//     acts on an older view than the replica before it had (HANDOVER.md invariant 7).
//   - OnTick runs in the goroutine about every Interval (acknowledgements, slow checks).
type Follower[T any] struct {
	topic    *Topic
	derive   func(*protocol.HandoverView) T
	Interval time.Duration
	OnTick   func()
	Log      *slog.Logger

	mu        sync.Mutex
	view      *protocol.HandoverView
	snapshot  atomic.Pointer[T]
	version   atomic.Int64
	requested int64
	served    atomic.Int64
	stop      chan struct{}
	done      chan struct{}
	// Err is the last error of the tail ("" once it reads again).
	err atomic.Pointer[string]
	// failures counts the records not applied, by reason (a wire code, or apply-error); under mu.
	failures map[string]int64
}

// NewFollower returns a follower (not started) of the handover topic.
func NewFollower[T any](base kafka.ConfigMap, topic string, derive func(*protocol.HandoverView) T) *Follower[T] {
	f := &Follower[T]{topic: New(base, topic), derive: derive, Interval: 100 * time.Millisecond,
		view: protocol.NewHandoverView(), stop: make(chan struct{}), done: make(chan struct{}), Log: slog.Default(),
		failures: map[string]int64{}}
	s := derive(f.view)
	f.snapshot.Store(&s)
	return f
}

// Start runs the tail.
func (f *Follower[T]) Start() *Follower[T] {
	go f.run()
	return f
}

// Stop ends the tail and closes its clients.
func (f *Follower[T]) Stop() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	f.topic.Close()
}

// Snapshot returns the derived state of the current view.
func (f *Follower[T]) Snapshot() T { return *f.snapshot.Load() }

// Version changes whenever the view changed.
func (f *Follower[T]) Version() int64 { return f.version.Load() }

// WithView runs fn with the view, under the follower's lock.
func (f *Follower[T]) WithView(fn func(*protocol.HandoverView)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.view)
}

// RequestSync takes a ticket (see the type's doc).
func (f *Follower[T]) RequestSync() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requested++
	return f.requested
}

// Synced says whether the view includes everything readable when the ticket was taken.
func (f *Follower[T]) Synced(ticket int64) bool { return f.served.Load() >= ticket }

// WaitSynced waits for a ticket; false on timeout or stop.
func (f *Follower[T]) WaitSynced(ctx context.Context, ticket int64) bool {
	for !f.Synced(ticket) {
		select {
		case <-ctx.Done():
			return false
		case <-f.stop:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// Failures returns how many records the follower could not apply, by reason: the wire code of a malformed
// record (malformed-key, too-large, malformed-value, ...) or apply-error. The records after them were applied.
func (f *Follower[T]) Failures() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int64, len(f.failures))
	for reason, n := range f.failures {
		out[reason] = n
	}
	return out
}

// apply applies one record on its own: whatever it holds, and whatever goes wrong applying it (a panic
// included), the records after it are applied, so no record can hide a later `handover` from the guard.
func (f *Follower[T]) apply(key, value []byte, offset int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			f.failures["apply-error"]++
			f.Log.Warn("handover record not applied", "offset", offset, "error", fmt.Sprint(r))
		}
	}()
	if err := f.view.Apply(key, value); err != nil {
		reason := "apply-error"
		var fe *protocol.FormatError
		if errors.As(err, &fe) {
			reason = fe.Code
		}
		f.failures[reason]++
		f.Log.Warn("skipped a malformed handover record", "offset", offset, "error", err)
	}
}

// Err returns the last error of the tail, or "".
func (f *Follower[T]) Err() string {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return ""
}

type syncTarget struct {
	ticket int64
	offset int64
}

func (f *Follower[T]) run() {
	defer close(f.done)
	var consumer *kafka.Consumer
	defer func() {
		if consumer != nil {
			consumer.Close()
		}
	}()
	position := int64(0)
	assigned := false
	var targets []syncTarget
	var lastTick, lastLook time.Time
	name := f.topic.Name
	ctx := context.Background()
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		serve := func() {
			kept := targets[:0]
			for _, t := range targets {
				if position >= t.offset {
					if t.ticket > f.served.Load() {
						f.served.Store(t.ticket)
					}
				} else {
					kept = append(kept, t)
				}
			}
			targets = kept
		}
		err := func() error {
			if consumer == nil {
				c, err := kafka.NewConsumer(ReaderConfig(f.topic.base))
				if err != nil {
					return err
				}
				consumer = c
			}
			assign := func() error {
				err := AssignFromStart(consumer, name, f.topic.Timeout)
				assigned = err == nil
				return err
			}
			f.mu.Lock()
			requested := f.requested
			f.mu.Unlock()
			if requested > f.served.Load() && (len(targets) == 0 || targets[len(targets)-1].ticket != requested) {
				end, err := f.topic.ReadableEnd(ctx)
				switch {
				case errors.Is(err, ErrMissing):
					targets = append(targets, syncTarget{requested, 0}) // no topic: no replay; the empty view is current
				case err != nil:
					return err
				default:
					targets = append(targets, syncTarget{requested, end})
					if !assigned {
						if err := assign(); err != nil {
							return err
						}
					}
				}
			}
			if !assigned && time.Since(lastLook) >= 5*time.Second {
				// No handover topic yet (no replay ever ran): look again now and then.
				lastLook = time.Now()
				if _, err := f.topic.ReadableEnd(ctx); err == nil {
					if err := assign(); err != nil {
						return err
					}
				}
			}
			// A ticket whose target the view already includes is served at once, before waiting for records.
			serve()
			changed := false
			if assigned {
				deadline := time.Now().Add(f.Interval)
				for n := 0; n < 1000; n++ {
					left := time.Until(deadline)
					if left <= 0 {
						break
					}
					ev := consumer.Poll(int(max(1, left.Milliseconds())))
					if ev == nil {
						break
					}
					switch e := ev.(type) {
					case *kafka.Message:
						if e.TopicPartition.Error != nil {
							continue
						}
						f.apply(e.Key, e.Value, int64(e.TopicPartition.Offset))
						changed = true
						position = max(position, int64(e.TopicPartition.Offset)+1)
					case kafka.PartitionEOF:
						position = max(position, int64(e.Offset))
					case kafka.Error:
						if e.Code() != kafka.ErrUnknownTopicOrPart {
							f.Log.Warn("handover topic read error", "error", e)
						}
					}
					if changed && position >= lastTarget(targets) {
						break
					}
				}
			} else {
				select {
				case <-f.stop:
				case <-time.After(f.Interval):
				}
			}
			if changed {
				f.mu.Lock()
				s := f.derive(f.view)
				f.snapshot.Store(&s)
				f.version.Add(1)
				f.mu.Unlock()
			}
			serve()
			f.err.Store(nil)
			if f.OnTick != nil && time.Since(lastTick) >= f.Interval {
				lastTick = time.Now()
				f.OnTick()
			}
			return nil
		}()
		if err != nil {
			msg := err.Error()
			f.err.Store(&msg)
			f.Log.Warn("handover follower error, retrying", "error", err)
			select {
			case <-f.stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

func lastTarget(targets []syncTarget) int64 {
	if len(targets) == 0 {
		return 1 << 62
	}
	return targets[len(targets)-1].offset
}
