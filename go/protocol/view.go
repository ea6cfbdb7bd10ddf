// The state the handover topic's records add up to, per replay and per partition (HandoverView), and what a
// guard takes from it: the active Handover-mode replay of each of its partitions.
package protocol

import (
	"errors"
	"sort"
)

// Partition states, as the operator reports them.
const (
	StatePending      = "pending"
	StateReplaying    = "replaying"
	StateHandedOver   = "handed-over"
	StateAcknowledged = "acknowledged"
)

// PartitionHandover is everything the topic says about one partition of one replay.
type PartitionHandover struct {
	Topic     string
	Partition int32
	Start     *StartInfo
	Handover  *HandoverInfo
	Guard     *GuardInfo
	Ack       *AckInfo
	Progress  *ProgressInfo
}

// Acknowledged: the live side confirmed it owns p from H on (the ack names the current H).
func (p *PartitionHandover) Acknowledged() bool {
	return p.Ack != nil && p.Handover != nil && p.Ack.Offset == p.Handover.Offset
}

// State is pending, replaying, handed-over or acknowledged.
func (p *PartitionHandover) State() string {
	switch {
	case p.Acknowledged():
		return StateAcknowledged
	case p.Handover != nil:
		return StateHandedOver
	case p.Start != nil:
		return StateReplaying
	}
	return StatePending
}

func (p *PartitionHandover) empty() bool {
	return p.Start == nil && p.Handover == nil && p.Guard == nil && p.Ack == nil && p.Progress == nil
}

// ReplayHandover is everything the topic says about one replay id.
type ReplayHandover struct {
	ReplayID   string
	Replay     *ReplayInfo
	Partitions map[TopicPartition]*PartitionHandover
	Result     *ResultInfo
	// LiveKeys: every key that currently has a value (what a cleanup tombstones).
	LiveKeys map[string]struct{}
	// Order: position of the `replay` record; the earliest replay wins when two target one partition.
	Order int
	// Unreadable: keys of governing kinds (replay, start, handover) whose latest value could not be read,
	// with the reason (a wire error code). Such a key hides what it held: nobody acts on a value a reader
	// cannot see.
	Unreadable map[KeySlot]string
}

// KeySlot is (kind, topic, partition) of a record key; Topic is "" and HasPartition false for replay-wide kinds.
type KeySlot struct {
	Kind         string
	HasPartition bool
	Topic        string
	Partition    int32
}

// governingKinds: an unreadable value of these stops the guard from acting on the replay (others are advisory).
var governingKinds = map[string]bool{KindReplay: true, KindStart: true, KindHandover: true}

func newReplayHandover(id string, order int) *ReplayHandover {
	return &ReplayHandover{ReplayID: id, Partitions: map[TopicPartition]*PartitionHandover{},
		LiveKeys: map[string]struct{}{}, Order: order, Unreadable: map[KeySlot]string{}}
}

// Bootstrapped: the replay and start records exist (they come in one transaction).
func (r *ReplayHandover) Bootstrapped() bool {
	if r.Replay == nil {
		return false
	}
	for _, p := range r.Partitions {
		if p.Start != nil {
			return true
		}
	}
	return false
}

// StartOffsets returns S(p) of every planned partition.
func (r *ReplayHandover) StartOffsets() map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	for k, p := range r.Partitions {
		if p.Start != nil {
			out[k] = p.Start.Offset
		}
	}
	return out
}

// HandoverOffsets returns H(p) of every partition that has one.
func (r *ReplayHandover) HandoverOffsets() map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	for k, p := range r.Partitions {
		if p.Handover != nil {
			out[k] = p.Handover.Offset
		}
	}
	return out
}

// AllHandedOver: every planned partition has H.
func (r *ReplayHandover) AllHandedOver() bool {
	planned := 0
	for _, p := range r.Partitions {
		if p.Start != nil {
			planned++
			if p.Handover == nil {
				return false
			}
		}
	}
	return planned > 0
}

// Complete: all handed over, and in Handover mode all acknowledged.
func (r *ReplayHandover) Complete() bool {
	if !r.AllHandedOver() {
		return false
	}
	if r.Replay != nil && r.Replay.Mode == ModeHandover {
		for _, p := range r.Partitions {
			if p.Start != nil && !p.Acknowledged() {
				return false
			}
		}
	}
	return true
}

func (r *ReplayHandover) apply(key RecordKey, rawKey []byte, record Record) {
	delete(r.Unreadable, KeySlot{key.Kind, key.HasPartition, key.Topic, key.Partition})
	if record == nil {
		delete(r.LiveKeys, string(rawKey))
	} else {
		r.LiveKeys[string(rawKey)] = struct{}{}
	}
	switch key.Kind {
	case KindReplay:
		if record == nil {
			r.Replay = nil
		} else if v, ok := record.(ReplayInfo); ok {
			r.Replay = &v
		}
		return
	case KindResult:
		if record == nil {
			r.Result = nil
		} else if v, ok := record.(ResultInfo); ok {
			r.Result = &v
		}
		return
	}
	if !key.HasPartition {
		return
	}
	tp := TopicPartition{key.Topic, key.Partition}
	part := r.Partitions[tp]
	if part == nil {
		part = &PartitionHandover{Topic: key.Topic, Partition: key.Partition}
		r.Partitions[tp] = part
	}
	switch key.Kind {
	case KindStart:
		part.Start = nil
		if v, ok := record.(StartInfo); ok {
			part.Start = &v
		}
	case KindHandover:
		part.Handover = nil
		if v, ok := record.(HandoverInfo); ok {
			part.Handover = &v
		}
	case KindGuard:
		part.Guard = nil
		if v, ok := record.(GuardInfo); ok {
			part.Guard = &v
		}
	case KindAck:
		part.Ack = nil
		if v, ok := record.(AckInfo); ok {
			part.Ack = &v
		}
	case KindProgress:
		part.Progress = nil
		if v, ok := record.(ProgressInfo); ok {
			part.Progress = &v
		}
	}
	if part.empty() {
		delete(r.Partitions, tp)
	}
}

// ActiveHandover is what a guard needs of the Handover-mode replay covering one of its partitions. With
// Problem set the guard cannot follow this replay on the partition (a record it cannot read, a filter it
// cannot evaluate): it skips nothing for it and reports the problem; Start and Filter may then be unset.
type ActiveHandover struct {
	ReplayID string
	Start    *int64
	// Handover is nil while H is unknown.
	Handover *int64
	Filter   *RecordFilter
	// Problem: `<what>:<code>`, e.g. `unreadable-handover-record:newer-version`.
	Problem string
}

// HandoverView is the state of every replay, built by applying the topic's records in log order.
type HandoverView struct {
	Replays map[string]*ReplayHandover
	// Malformed counts records skipped because they do not follow the format (never fatal).
	Malformed int
	applied   int
	filters   map[string]cachedFilter
}

type cachedFilter struct {
	spec   string
	filter *RecordFilter
	err    error
}

// NewHandoverView returns an empty view.
func NewHandoverView() *HandoverView {
	return &HandoverView{Replays: map[string]*ReplayHandover{}, filters: map[string]cachedFilter{}}
}

// Apply adds one message of the topic (a nil value is a tombstone). A malformed record is counted, and a
// governing one replaces what its key held (see Unreadable); the error is returned for the caller's log.
func (v *HandoverView) Apply(rawKey, rawValue []byte) error {
	key, record, err := Decode(rawKey, rawValue)
	if err != nil {
		v.Malformed++
		var fe *FormatError
		if errors.As(err, &fe) {
			v.unreadable(rawKey, fe.Code)
		}
		return err
	}
	v.applied++
	replay := v.Replays[key.ReplayID]
	if replay == nil {
		if record == nil {
			return nil
		}
		replay = newReplayHandover(key.ReplayID, v.applied)
		v.Replays[key.ReplayID] = replay
	}
	if key.Kind == KindReplay && record != nil && replay.Replay == nil {
		replay.Order = v.applied
	}
	replay.apply(key, rawKey, record)
	if len(replay.LiveKeys) == 0 {
		delete(v.Replays, key.ReplayID)
	}
	return nil
}

// unreadable: a governing record that cannot be read replaces what its key held. A record whose key
// cannot be read belongs to no replay and is only counted.
func (v *HandoverView) unreadable(rawKey []byte, code string) {
	key, err := DecodeKey(rawKey)
	if err != nil || !governingKinds[key.Kind] || (key.Kind == KindReplay) == key.HasPartition {
		return
	}
	v.applied++
	replay := v.Replays[key.ReplayID]
	if replay == nil {
		replay = newReplayHandover(key.ReplayID, v.applied)
		v.Replays[key.ReplayID] = replay
	}
	replay.Unreadable[KeySlot{key.Kind, key.HasPartition, key.Topic, key.Partition}] = code
	replay.LiveKeys[string(rawKey)] = struct{}{}
}

// Replay returns one replay's state (empty when unknown).
func (v *HandoverView) Replay(id string) *ReplayHandover {
	if r := v.Replays[id]; r != nil {
		return r
	}
	return newReplayHandover(id, 0)
}

func (v *HandoverView) filterOf(info *ReplayInfo) (*RecordFilter, error) {
	spec := string(Dumps(info.Filter))
	cached, ok := v.filters[info.ReplayID]
	if !ok || cached.spec != spec {
		compiled, err := PublishedFilter(info.Filter)
		cached = cachedFilter{spec, compiled, err}
		v.filters[info.ReplayID] = cached
	}
	return cached.filter, cached.err
}

// ActiveFor returns, per partition, the Handover-mode replay whose guard is liveGroup (the earliest one if
// several). A replay the guard cannot follow (an unreadable replay, start or handover record, or a filter
// it cannot evaluate) still holds its partitions, as an entry with Problem set: the guard skips nothing for
// it, and a later replay does not take those partitions over.
func (v *HandoverView) ActiveFor(liveGroup string) map[TopicPartition]ActiveHandover {
	replays := make([]*ReplayHandover, 0, len(v.Replays))
	for _, r := range v.Replays {
		replays = append(replays, r)
	}
	sort.Slice(replays, func(i, j int) bool { return replays[i].Order < replays[j].Order })
	out := map[TopicPartition]ActiveHandover{}
	for _, replay := range replays {
		info := replay.Replay
		notOurs := info == nil || info.Mode != ModeHandover || info.LiveGroup == nil || *info.LiveGroup != liveGroup
		var filter *RecordFilter
		problem := ""
		if code, ok := replay.Unreadable[KeySlot{Kind: KindReplay}]; ok {
			// Whose replay it is cannot be read: it may be this group's, unless an earlier readable value said
			// it is not.
			if info != nil && notOurs {
				continue
			}
			problem = "unreadable-replay-record:" + code
		} else if notOurs {
			continue
		} else {
			var err error
			filter, err = v.filterOf(info)
			if err != nil {
				var fe *FilterSpecError
				code := "invalid"
				if errors.As(err, &fe) {
					code = fe.Code
				}
				problem = "unevaluable-filter:" + code
				filter = nil
			}
		}
		slots := map[TopicPartition]bool{}
		var keys []TopicPartition
		add := func(k TopicPartition) {
			if !slots[k] {
				slots[k] = true
				keys = append(keys, k)
			}
		}
		for k, p := range replay.Partitions {
			if p.Start != nil {
				add(k)
			}
		}
		for slot := range replay.Unreadable {
			if slot.HasPartition {
				add(TopicPartition{slot.Topic, slot.Partition})
			}
		}
		for _, k := range keys {
			if _, taken := out[k]; taken {
				continue
			}
			part := replay.Partitions[k]
			var start *int64
			if part != nil && part.Start != nil {
				start = Int64(part.Start.Offset)
			}
			partProblem := problem
			for _, kind := range []string{KindStart, KindHandover} {
				if code, ok := replay.Unreadable[KeySlot{kind, true, k.Topic, k.Partition}]; ok && partProblem == "" {
					partProblem = "unreadable-" + kind + "-record:" + code
				}
			}
			switch {
			case partProblem != "":
				out[k] = ActiveHandover{ReplayID: replay.ReplayID, Start: start, Problem: partProblem}
			case start != nil && filter != nil:
				active := ActiveHandover{ReplayID: replay.ReplayID, Start: start, Filter: filter}
				if part.Handover != nil {
					active.Handover = Int64(part.Handover.Offset)
				}
				out[k] = active
			}
		}
	}
	return out
}
