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
}

func newReplayHandover(id string, order int) *ReplayHandover {
	return &ReplayHandover{ReplayID: id, Partitions: map[TopicPartition]*PartitionHandover{},
		LiveKeys: map[string]struct{}{}, Order: order}
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

// ActiveHandover is what a guard needs of the Handover-mode replay covering one of its partitions.
type ActiveHandover struct {
	ReplayID string
	Start    int64
	// Handover is nil while H is unknown.
	Handover *int64
	Filter   *RecordFilter
}

// HandoverView is the state of every replay, built by applying the topic's records in log order.
type HandoverView struct {
	Replays map[string]*ReplayHandover
	// Malformed counts records skipped because they do not follow the format (never fatal).
	Malformed int
	// FilterErrors names replays whose published filter this side cannot evaluate.
	FilterErrors map[string]error
	applied      int
	filters      map[string]cachedFilter
}

type cachedFilter struct {
	spec   string
	filter *RecordFilter
	err    error
}

// NewHandoverView returns an empty view.
func NewHandoverView() *HandoverView {
	return &HandoverView{Replays: map[string]*ReplayHandover{}, FilterErrors: map[string]error{},
		filters: map[string]cachedFilter{}}
}

// Apply adds one message of the topic (a nil value is a tombstone). A malformed record is counted and
// skipped, and so is returned as an error for the caller's log.
func (v *HandoverView) Apply(rawKey, rawValue []byte) error {
	key, record, err := Decode(rawKey, rawValue)
	if err != nil {
		v.Malformed++
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

// Replay returns one replay's state (empty when unknown).
func (v *HandoverView) Replay(id string) *ReplayHandover {
	if r := v.Replays[id]; r != nil {
		return r
	}
	return newReplayHandover(id, 0)
}

// ErrFilterUnsupported wraps a published filter this side cannot evaluate.
var ErrFilterUnsupported = errors.New("the replay's filter cannot be evaluated here")

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
// several). A replay whose filter cannot be evaluated here covers its partitions with a nil Filter, which
// the guard treats as "every record matches": it never processes what the replay may cover.
func (v *HandoverView) ActiveFor(liveGroup string) map[TopicPartition]ActiveHandover {
	replays := make([]*ReplayHandover, 0, len(v.Replays))
	for _, r := range v.Replays {
		replays = append(replays, r)
	}
	sort.Slice(replays, func(i, j int) bool { return replays[i].Order < replays[j].Order })
	out := map[TopicPartition]ActiveHandover{}
	for _, replay := range replays {
		info := replay.Replay
		if info == nil || info.Mode != ModeHandover || info.LiveGroup == nil || *info.LiveGroup != liveGroup {
			continue
		}
		filter, err := v.filterOf(info)
		if err != nil {
			v.FilterErrors[replay.ReplayID] = err
		} else {
			delete(v.FilterErrors, replay.ReplayID)
		}
		keys := make([]TopicPartition, 0, len(replay.Partitions))
		for k := range replay.Partitions {
			keys = append(keys, k)
		}
		for _, key := range keys {
			part := replay.Partitions[key]
			if part.Start == nil {
				continue
			}
			if _, taken := out[key]; taken {
				continue
			}
			active := ActiveHandover{ReplayID: replay.ReplayID, Start: part.Start.Offset, Filter: filter}
			if part.Handover != nil {
				h := part.Handover.Offset
				active.Handover = &h
			}
			out[key] = active
		}
	}
	return out
}
