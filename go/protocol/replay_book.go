// The replay side's bookkeeping (port of replay_worker/replay/replay_book.py): per partition one replica of the
// replay group holds, what it has read, processed and committed, and from that what to commit with which
// mark, when a partition finishes and with which H, when a finished mark is committed again, which
// `progress` records to publish, and what a revoke drops. The rules: HANDOVER.md sections 1 and 5; every
// step: conformance/REPLAY_TRACES.md, held by replay_traces.json (run through cmd/reprise-replay-testee).
//
//   - A batch's positions are committed once its records are durable: asynchronously while no commit is
//     unanswered and none failed, else synchronously. A forward whose producer still sends may leave one
//     batch for the next commit.
//   - A partition finishes when ReplayFinish says so, on what the batch held (its end-of-partition event)
//     and the live offsets last known, never on an end offset read after the handler ran (it moves on under
//     steady traffic). Its position is committed with the `finished` mark before H is published.
//   - An asynchronous commit unanswered at a finish may land after it and erase the mark: the mark is
//     committed again (re-sealed) once every commit sent before it is answered, or with the revoke's commit
//     when the partition is revoked first.
//   - Records of a partition revoked or lost while the batch was in hand are dropped: its position was
//     committed without them, and the next owner reads them again.
package protocol

import (
	"slices"
	"sort"
)

// MaxUncommittedBatches is how many batches a forward may run ahead of its commit while its producer sends.
const MaxUncommittedBatches = 2

// ConsumedItem is what the consumer returned: a record, or an end-of-partition event. The book reads only
// this.
type ConsumedItem interface {
	Where() TopicPartition
	At() int64
	// TimestampMs is the record's timestamp; ok false when it has none.
	TimestampMs() (ms int64, ok bool)
	// EndOfPartition: an end-of-partition event, At() the offset after the last readable record.
	EndOfPartition() bool
}

// PlannedPartition is a partition of the replay's plan (its `start` record): where it starts, its end bound.
type PlannedPartition struct {
	Start          int64
	EndOffset      *int64
	EndTimestampMs *int64
}

// BookCommit is a commit the book asks for. ID: 1, 2, ... in the order the book made them. Offsets are
// sorted by topic and partition; Metadata is a mark's Encode() (without the NUL a client adds), or nil.
type BookCommit struct {
	ID      int
	Sync    bool
	Offsets []Store
}

// Handover is a `handover` record to publish: H of a finished partition, and why it finished.
type Handover struct {
	TopicPartition
	Offset int64
	Reason string
}

// Progress is a `progress` record to publish.
type Progress struct {
	TopicPartition
	Committed int64
	AtEnd     bool
}

// ReplayPartition is this replica's view of one assigned partition.
type ReplayPartition struct {
	TopicPartition
	// Position: next offset to process; nil until the committed offset is known.
	Position       *int64
	Committed      *int64
	EndOffset      *int64
	EndTimestampMs *int64
	// Finished: the reason, "" while the partition is read.
	Finished string
	// AtEnd: the consumer reported the end of the partition and nothing newer was read since.
	AtEnd bool
	// EndEvent: offset of that end-of-partition event (past any trailing transaction markers).
	EndEvent *int64
	// EndMet: a bounded replay met its end record at this offset.
	EndMet *int64
}

func (p *ReplayPartition) bounded() bool { return p.EndOffset != nil || p.EndTimestampMs != nil }

// Assigned is what an assignment of one partition asks for.
type Assigned struct {
	// StartCommit: the planned start committed again (the group's offset had expired), synchronously.
	StartCommit *BookCommit
	// Handover: H published again for a partition whose committed offset carries this replay's mark.
	Handover *Handover
	// Pause: not read (not in the plan, or finished).
	Pause bool
}

// Finishing is partitions that finish together: commit Commit (synchronously), then Finished.
type Finishing struct {
	Commit  *BookCommit
	reasons []finishReason
}

type finishReason struct {
	key    TopicPartition
	reason string
}

// ReplayBook holds every partition one replica of the replay group holds.
type ReplayBook struct {
	ReplayID string
	Mode     string
	Plan     map[TopicPartition]PlannedPartition
	// Follow: a shadow hold (REPRISE_FOLLOW): no partition finishes here.
	Follow bool
	// Transactional: a transactional forward commits offsets inside its transaction, never asynchronously.
	Transactional bool
	// Parts in assignment order (the order the reference iterates them), and by key.
	order []*ReplayPartition
	parts map[TopicPartition]*ReplayPartition
	// Live and Guards: the live group's committed offsets and the guards' seen_until, as last read;
	// Published: H published for this replay, as the handover topic says.
	Live, Guards, Published  map[TopicPartition]int64
	inHand                   [][]ConsumedItem
	uncommittedBatches       int
	commitFailed             bool
	asyncSent, asyncAnswered int
	reseal                   map[TopicPartition]Store
	resealOrder              []TopicPartition
	resealAfter              int
	reported                 map[TopicPartition]Progress
	commitsMade              int
}

// NewReplayBook returns an empty book.
func NewReplayBook(replayID, mode string, plan map[TopicPartition]PlannedPartition, follow, transactional bool) *ReplayBook {
	return &ReplayBook{
		ReplayID: replayID, Mode: mode, Plan: plan, Follow: follow, Transactional: transactional,
		parts: map[TopicPartition]*ReplayPartition{}, reseal: map[TopicPartition]Store{},
		reported: map[TopicPartition]Progress{},
	}
}

// Part returns the held partition's book, or nil.
func (b *ReplayBook) Part(tp TopicPartition) *ReplayPartition { return b.parts[tp] }

// Parts returns the held partitions in assignment order.
func (b *ReplayBook) Parts() []*ReplayPartition { return b.order }

func (b *ReplayBook) commit(offsets []Store, sync bool) *BookCommit {
	b.commitsMade++
	sortStores(offsets)
	return &BookCommit{ID: b.commitsMade, Sync: sync, Offsets: offsets}
}

func sortStores(s []Store) {
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Topic != s[j].Topic {
			return s[i].Topic < s[j].Topic
		}
		return s[i].Partition < s[j].Partition
	})
}

func (b *ReplayBook) forget(tp TopicPartition) {
	if _, held := b.parts[tp]; !held {
		return
	}
	delete(b.parts, tp)
	b.order = slices.DeleteFunc(b.order, func(p *ReplayPartition) bool { return p.TopicPartition == tp })
}

// Assign: a rebalance gave this partition, with the group's committed offset (nil: none) and its metadata.
func (b *ReplayBook) Assign(tp TopicPartition, committed *int64, metadata string) Assigned {
	part := &ReplayPartition{TopicPartition: tp}
	if old := b.parts[tp]; old != nil {
		// Replaced in place: the partition keeps its place in the order.
		b.order[slices.Index(b.order, old)] = part
	} else {
		b.order = append(b.order, part)
	}
	b.parts[tp] = part
	start, planned := b.Plan[tp]
	if !planned {
		// Not in the replay's plan (a partition added after the start was resolved): the live group owns it.
		part.Finished = ReasonNotInPlan
		return Assigned{Pause: true}
	}
	var out Assigned
	if committed == nil {
		// Planned, but the group's offset expired: resume at the published start. Duplicates, never a loss.
		committed = Int64(start.Start)
		out.StartCommit = b.commit([]Store{{Topic: tp.Topic, Partition: tp.Partition, Offset: start.Start}}, true)
	}
	part.Position, part.Committed = Int64(*committed), Int64(*committed)
	part.EndOffset, part.EndTimestampMs = start.EndOffset, start.EndTimestampMs
	if mark := DecodeMark(metadata); mark != nil && mark.Usable() && mark.Finished != nil && mark.ReplayID == b.ReplayID {
		part.Finished = *mark.Finished
		// The previous owner may have died between its commit and its publish: the same H again (idempotent).
		out.Handover = &Handover{TopicPartition: tp, Offset: *committed, Reason: *mark.Finished}
		out.Pause = true
	}
	return out
}

// Revoke: partitions taken away in a rebalance. Their positions to commit (synchronously, nil: none), and
// the records of the batch in hand that are dropped. Forgets them whatever the commit's result.
func (b *ReplayBook) Revoke(tps []TopicPartition) (*BookCommit, []ConsumedItem) {
	var pending []Store
	for _, tp := range tps {
		if p := b.parts[tp]; p != nil && p.Finished == "" && p.Position != nil {
			pending = append(pending, Store{Topic: tp.Topic, Partition: tp.Partition, Offset: *p.Position})
		}
	}
	// A finished mark still to be re-sealed goes with the revoke's commit: an asynchronous commit may have
	// erased it, and once the partition is gone no re-seal would come (the next owner would read on past H).
	for _, tp := range tps {
		if mark, has := b.reseal[tp]; has {
			pending = append(pending, mark)
			b.dropReseal(tp)
		}
	}
	var c *BookCommit
	if len(pending) > 0 {
		c = b.commit(pending, true)
	}
	return c, b.Lost(tps)
}

func (b *ReplayBook) dropReseal(tp TopicPartition) {
	if _, has := b.reseal[tp]; has {
		delete(b.reseal, tp)
		b.resealOrder = slices.DeleteFunc(b.resealOrder, func(k TopicPartition) bool { return k == tp })
	}
}

// Lost: partitions lost (someone else's already): forgotten, nothing committed. Returns the records of the
// batch in hand that are dropped; their end events go too.
func (b *ReplayBook) Lost(tps []TopicPartition) []ConsumedItem {
	gone := map[TopicPartition]bool{}
	for _, tp := range tps {
		gone[tp] = true
		b.forget(tp)
		delete(b.reported, tp)
		b.dropReseal(tp) // someone else's now: never re-sealed from here
	}
	var dropped []ConsumedItem
	for i, items := range b.inHand {
		kept := items[:0:0]
		for _, item := range items {
			if gone[item.Where()] {
				if !item.EndOfPartition() {
					dropped = append(dropped, item)
				}
			} else {
				kept = append(kept, item)
			}
		}
		b.inHand[i] = kept
	}
	return dropped
}

// Read puts what the consumer returned into the batch in hand (taken at the end of the turn).
func (b *ReplayBook) Read(items []ConsumedItem) { b.inHand = append(b.inHand, items) }

// ReadOne adds one item to the batch in hand, for a loop that polls item by item (a revoke inside a poll
// then drops what was read before it).
func (b *ReplayBook) ReadOne(item ConsumedItem) {
	if len(b.inHand) == 0 {
		b.inHand = append(b.inHand, nil)
	}
	last := len(b.inHand) - 1
	b.inHand[last] = append(b.inHand[last], item)
}

// Take returns the records of the batch in hand to process and those dropped (partition not held,
// finished, or past its end bound), and empties the batch in hand. End events mark their partitions.
func (b *ReplayBook) Take() (taken, dropped []ConsumedItem) {
	size := 0
	for _, items := range b.inHand {
		size += len(items)
	}
	taken = make([]ConsumedItem, 0, size)
	for _, items := range b.inHand {
		var last TopicPartition
		var part *ReplayPartition
		inRun, take := false, false
		for _, item := range items {
			tp := item.Where()
			if item.EndOfPartition() {
				if ended := b.parts[tp]; ended != nil && ended.Finished == "" {
					ended.AtEnd = true
					ended.EndEvent = Int64(item.At())
				}
				inRun = false
				continue
			}
			if !inRun || last != tp {
				last, inRun = tp, true
				part = b.parts[tp]
				// Not ours (any more), or finished: never processed past the stop offset.
				take = part != nil && part.Finished == "" && part.EndMet == nil
				if take {
					part.AtEnd = false
				}
			}
			if !take {
				dropped = append(dropped, item)
				continue
			}
			offset := item.At()
			if part.bounded() {
				ms, has := item.TimestampMs()
				var ts *int64
				if has {
					ts = &ms
				}
				if RecordEndsPartition(part.EndOffset, part.EndTimestampMs, offset, ts) {
					part.EndMet = Int64(offset)
					take = false
					dropped = append(dropped, item)
					continue
				}
			}
			if part.Position != nil {
				*part.Position = offset + 1 // the partition's own pointer (never shared): no allocation per record
			} else {
				part.Position = Int64(offset + 1)
			}
			taken = append(taken, item)
		}
	}
	if len(b.inHand) > 0 {
		// The first read's array is kept for ReadOne's next batch.
		clear(b.inHand[0])
		b.inHand = append(b.inHand[:0], b.inHand[0][:0])
	}
	return taken, dropped
}

// AnythingToDeliver says whether the turn delivers and checkpoints: records taken, or a partition at its
// end or its bound.
func (b *ReplayBook) AnythingToDeliver(taken int) bool {
	if taken > 0 {
		return true
	}
	for _, p := range b.order {
		if p.AtEnd || p.EndMet != nil {
			return true
		}
	}
	return false
}

// EndPositions, after the delivery: a partition at its end bound moves to it; one at its end moves past
// the end event (past trailing transaction markers: committing it makes the replay group's lag zero).
func (b *ReplayBook) EndPositions() {
	for _, p := range b.order {
		if p.EndMet != nil && p.Finished == "" {
			if p.Position == nil || *p.Position < *p.EndMet {
				p.Position = Int64(*p.EndMet)
			}
		} else if p.AtEnd && p.EndEvent != nil && p.Position != nil && *p.EndEvent > *p.Position {
			p.Position = Int64(*p.EndEvent)
		}
	}
}

// Checkpoint says what to commit after a delivery: a commit; or nil with flush true (make the delivery
// durable, nothing to commit); or nil, false (nothing now: a forward's batch waits for the next commit).
// inFlight: a forward's producer still sends (asked only when it matters). force (a stop): every position,
// synchronously.
func (b *ReplayBook) Checkpoint(inFlight func() bool, force bool) (c *BookCommit, flush bool) {
	var moving []Store
	for _, p := range b.order {
		if p.Finished == "" && p.Position != nil && (force || p.Committed == nil || *p.Position != *p.Committed) {
			moving = append(moving, Store{Topic: p.Topic, Partition: p.Partition, Offset: *p.Position})
		}
	}
	if !force && len(moving) > 0 && b.uncommittedBatches+1 < MaxUncommittedBatches && inFlight != nil && inFlight() {
		b.uncommittedBatches++
		return nil, false
	}
	if len(moving) == 0 {
		return nil, true
	}
	// At most one commit on its way; a transaction commits the offsets itself: no answer ever comes.
	async := !force && !b.Transactional && b.asyncSent == b.asyncAnswered && !b.commitFailed
	b.commitFailed = false
	if async {
		b.asyncSent++
	}
	return b.commit(moving, !async), false
}

// Committed: a commit was made (asynchronous: sent; its answer goes to Answered). ok false: the group
// refused a synchronous one (not a member any more). Every commit but an assignment's start commit comes here.
func (b *ReplayBook) Committed(c *BookCommit, ok bool) {
	if !ok {
		return
	}
	b.uncommittedBatches = 0
	for _, o := range c.Offsets {
		if p := b.parts[TopicPartition{o.Topic, o.Partition}]; p != nil {
			p.Committed = Int64(o.Offset)
		}
	}
}

// Answered is the answer to an asynchronous commit; failed: its partitions that failed (none: it landed).
func (b *ReplayBook) Answered(failed []TopicPartition) {
	b.asyncAnswered++
	if len(failed) == 0 {
		return
	}
	b.commitFailed = true
	for _, tp := range failed {
		if p := b.parts[tp]; p != nil && p.Finished == "" {
			p.Committed = nil
		}
	}
}

// CommitsInFlight is the asynchronous commits not answered yet.
func (b *ReplayBook) CommitsInFlight() int { return b.asyncSent - b.asyncAnswered }

// Decide returns the partitions that finish now and their finishing commit (with the `finished` mark), or
// nil.
func (b *ReplayBook) Decide() (*Finishing, error) {
	if b.Follow {
		return nil, nil // a shadow hold: the operator stops the workers at the cutover
	}
	var finishing []finishReason
	var offsets []Store
	for _, p := range b.order {
		if p.Finished != "" || p.Position == nil {
			continue
		}
		reason := ""
		if p.EndMet != nil {
			reason = ReasonEndBound
		} else {
			var live *int64
			if v, has := b.Live[p.TopicPartition]; has {
				live = Int64(v)
			}
			if g, has := b.Guards[p.TopicPartition]; has && (live == nil || g > *live) {
				live = Int64(g)
			}
			var err error
			reason, err = ReplayFinish(b.Mode, FinishInput{Position: *p.Position, EndOffset: p.EndOffset,
				EndTimestampMs: p.EndTimestampMs, AtEnd: p.AtEnd, LiveCommitted: live})
			if err != nil {
				return nil, err
			}
		}
		if reason == "" {
			continue
		}
		finishing = append(finishing, finishReason{p.TopicPartition, reason})
		mark := CommitMark{ReplayID: b.ReplayID, Finished: String(reason)}.Encode()
		offsets = append(offsets, Store{Topic: p.Topic, Partition: p.Partition, Offset: *p.Position, Metadata: &mark})
	}
	if len(finishing) == 0 {
		return nil, nil
	}
	return &Finishing{Commit: b.commit(offsets, true), reasons: finishing}, nil
}

// Finished is the finishing commit's result (after Committed): ok, the partitions are finished; the H to
// publish (then pause them), sorted. Not ok (not a member any more): nothing; the next owner decides again.
func (b *ReplayBook) Finished(f *Finishing, ok bool) []Handover {
	if !ok {
		return nil
	}
	if b.CommitsInFlight() > 0 {
		// An asynchronous commit of the same positions, without the mark, is still on its way; librdkafka
		// retries it across a broker restart, so it may land after this commit and erase the mark.
		for _, o := range f.Commit.Offsets {
			tp := TopicPartition{o.Topic, o.Partition}
			if _, has := b.reseal[tp]; !has {
				b.resealOrder = append(b.resealOrder, tp)
			}
			b.reseal[tp] = o
		}
		b.resealAfter = b.asyncSent
	}
	handovers := make([]Handover, 0, len(f.reasons))
	for _, r := range f.reasons {
		p := b.parts[r.key]
		p.Finished = r.reason
		handovers = append(handovers, Handover{TopicPartition: r.key, Offset: *p.Position, Reason: r.reason})
	}
	sort.Slice(handovers, func(i, j int) bool { return lessTP(handovers[i].TopicPartition, handovers[j].TopicPartition) })
	return handovers
}

func lessTP(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// Resealing returns the finished marks to commit again once every asynchronous commit sent before them is
// answered (synchronously), or nil.
func (b *ReplayBook) Resealing() *BookCommit {
	if len(b.reseal) == 0 || b.asyncAnswered < b.resealAfter {
		return nil
	}
	var offsets []Store
	for _, tp := range b.resealOrder {
		if _, held := b.parts[tp]; held {
			offsets = append(offsets, b.reseal[tp])
		}
	}
	clear(b.reseal)
	b.resealOrder = b.resealOrder[:0]
	if len(offsets) == 0 {
		return nil
	}
	return b.commit(offsets, true)
}

// Done says whether every planned partition is finished: here or as the handover topic says.
func (b *ReplayBook) Done() bool {
	if len(b.Plan) == 0 {
		return false
	}
	for tp := range b.Plan {
		if _, published := b.Published[tp]; published {
			continue
		}
		if p := b.parts[tp]; p == nil || p.Finished == "" {
			return false
		}
	}
	return true
}

// Progress returns the partitions whose committed position (or being at the end) changed since the last
// report, sorted, and remembers them.
func (b *ReplayBook) Progress() []Progress {
	var records []Progress
	for _, p := range b.order {
		if p.Committed == nil {
			continue
		}
		now := Progress{TopicPartition: p.TopicPartition, Committed: *p.Committed, AtEnd: p.AtEnd}
		if last, has := b.reported[p.TopicPartition]; !has || last != now {
			records = append(records, now)
			b.reported[p.TopicPartition] = now
		}
	}
	sort.Slice(records, func(i, j int) bool { return lessTP(records[i].TopicPartition, records[j].TopicPartition) })
	return records
}

// ProgressFailed: publishing them failed; the next report says everything again.
func (b *ReplayBook) ProgressFailed() { clear(b.reported) }
