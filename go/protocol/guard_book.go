// The guard's bookkeeping (port of replay_worker/guard/guard_book.py): per assigned partition, the rules plus
// what the service was handed and has stored, and from that what the guard stores and commits, with which
// mark.
//
//   - A partition is held from its assignment until the handover view is current (its ticket), then released.
//   - With automatic offset storing (the service's enable.auto.offset.store, default true) every handed
//     record is stored as librdkafka would; otherwise the service stores what it processed.
//   - Skipped records at the tail of a batch are stored, with the mark saying they were skipped, once the
//     service has stored everything it was handed; the guard commits those itself, because a service that
//     commits only after handling records would never commit them.
//   - librdkafka commits a stored offset only above the committed one. After a seek back the re-read's
//     progress is below what was committed, and at the end of a re-read the offset is equal but the mark
//     changes: the guard commits those stores itself too, explicitly.
//   - A quiet partition past H gets the floor commit, so that it can be acknowledged.
package protocol

import "sort"

// Store is an offset to store or commit for one partition, with its metadata (nil: none).
type Store struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  *string
}

// SkipReport is what a `guard` record says.
type SkipReport struct {
	ReplayID     string
	Topic        string
	Partition    int32
	FirstSkipped int64
	SeenUntil    int64
}

// PendingAck names the H to acknowledge for one partition.
type PendingAck struct {
	ReplayID string
	Handover int64
}

// PartitionBook is the guard's book of one assigned partition.
type PartitionBook struct {
	Rules *GuardPartition
	// Ticket the handover view must reach before the partition is released; 0 once released.
	Ticket int64
	// HandedUntil: offset after the last record handed to the service.
	HandedUntil *int64
	// StoredUntil: highest offset stored or committed (by the service or the guard).
	StoredUntil *int64
	// GuardCommit: a store the guard commits itself.
	GuardCommit *Store
	// HighWater: highest offset stored in this session (at first the committed one).
	HighWater       *int64
	reportedSeen    *int64
	reportedProblem *Problem
}

// ProblemReport is what a `guard` record with `problem` says: the guard cannot follow a replay on a
// partition and skips nothing for it.
type ProblemReport struct {
	ReplayID     string
	Topic        string
	Partition    int32
	Problem      string
	FirstSkipped *int64
	SeenUntil    *int64
}

// Held says whether the partition waits for the handover view.
func (p *PartitionBook) Held() bool { return p.Ticket != 0 }

// GuardBook holds every assigned partition of one guarded consumer.
type GuardBook struct {
	AutoStore bool
	Parts     map[TopicPartition]*PartitionBook
}

// NewGuardBook returns an empty book.
func NewGuardBook(autoStore bool) *GuardBook {
	return &GuardBook{AutoStore: autoStore, Parts: map[TopicPartition]*PartitionBook{}}
}

func storeOf(key TopicPartition, offset int64, mark *CommitMark) Store {
	s := Store{Topic: key.Topic, Partition: key.Partition, Offset: offset}
	if mark != nil {
		m := mark.Encode()
		s.Metadata = &m
	}
	return s
}

func maxOr(p *int64, fallback int64) int64 {
	if p == nil {
		return fallback
	}
	return *p
}

// Assign records a new partition with its committed offset and mark, held until ticket is served.
func (b *GuardBook) Assign(key TopicPartition, committed *int64, mark *CommitMark, ticket int64) {
	rules := NewGuardPartition(key.Topic, key.Partition)
	rules.Restore(committed, mark)
	var stored, high *int64
	if committed != nil {
		stored, high = Int64(*committed), Int64(*committed)
	}
	b.Parts[key] = &PartitionBook{Rules: rules, Ticket: ticket, StoredUntil: stored, HighWater: high}
}

// Drop forgets a revoked or lost partition.
func (b *GuardBook) Drop(key TopicPartition) { delete(b.Parts, key) }

// Release: the view is current for this partition; apply it. Returns an offset to seek to, or nil.
func (b *GuardBook) Release(key TopicPartition, active *ActiveHandover) *int64 {
	part := b.Parts[key]
	part.Ticket = 0
	return b.update(part, active)
}

// Apply: the view changed; apply it to every released partition. Returns the seeks to do.
func (b *GuardBook) Apply(snapshot map[TopicPartition]ActiveHandover) map[TopicPartition]int64 {
	seeks := map[TopicPartition]int64{}
	for _, key := range b.sortedKeys() {
		part := b.Parts[key]
		if part.Held() {
			continue
		}
		var active *ActiveHandover
		if a, ok := snapshot[key]; ok {
			active = &a
		}
		if target := b.update(part, active); target != nil {
			seeks[key] = *target
		}
	}
	return seeks
}

func (b *GuardBook) update(part *PartitionBook, active *ActiveHandover) *int64 {
	target := part.Rules.Update(active)
	if target != nil {
		// Reading again from target: what is stored from now on starts there and carries the re-read mark.
		part.StoredUntil = Int64(*target)
		part.HandedUntil = nil
		part.GuardCommit = nil
	}
	return target
}

// Guarded says whether some partition needs per-record decisions (else a batch is handed as it is).
func (b *GuardBook) Guarded() bool {
	for _, p := range b.Parts {
		if p.Held() || p.Rules.Start != nil || p.Rules.RereadUntil != nil {
			return true
		}
	}
	return false
}

// Judge decides one record; true when it goes to the service.
func (b *GuardBook) Judge(key TopicPartition, offset int64, recordKey []byte, headers []Header, value []byte) bool {
	part := b.Parts[key]
	if part.Rules.Verdict(offset, recordKey, headers, value) == Process {
		part.HandedUntil = Int64(offset + 1)
		return true
	}
	return false
}

// HandedUnguarded: no replay active, every record was handed. positions are the consumer's positions;
// with automatic storing, those that moved are stored.
func (b *GuardBook) HandedUnguarded(positions map[TopicPartition]int64) []Store {
	var stores []Store
	for _, key := range sortedKeysOf(positions) {
		position := positions[key]
		part := b.Parts[key]
		if part == nil || position < 0 || (part.HandedUntil != nil && position == *part.HandedUntil) {
			continue
		}
		part.HandedUntil = Int64(position)
		part.Rules.SeenUntil = Int64(position)
		if b.AutoStore {
			part.StoredUntil = Int64(position)
			stores = append(stores, Store{Topic: key.Topic, Partition: key.Partition, Offset: position})
		}
	}
	return stores
}

// AfterBatch is what to store for a partition the batch touched (nil: nothing).
func (b *GuardBook) AfterBatch(key TopicPartition) *Store {
	part := b.Parts[key]
	rules := part.Rules
	seen := rules.SeenUntil
	if b.AutoStore && part.HandedUntil != nil {
		part.StoredUntil = Int64(max(maxOr(part.StoredUntil, 0), *part.HandedUntil))
	}
	everythingStored := part.HandedUntil == nil || maxOr(part.StoredUntil, 0) >= *part.HandedUntil
	target := part.StoredUntil
	tail := false
	if everythingStored && seen != nil && (target == nil || *seen > *target) {
		target, tail = Int64(*seen), true
	}
	if target == nil || (!b.AutoStore && !tail) {
		return nil
	}
	store := storeOf(key, *target, rules.CommitMark(*target))
	b.note(part, store, tail)
	part.StoredUntil = Int64(*target)
	return &store
}

// note records a store; makes it a guard commit when the service's commit would not carry it.
func (b *GuardBook) note(part *PartitionBook, store Store, tail bool) {
	below := part.HighWater != nil && store.Offset <= *part.HighWater
	if tail || below {
		s := store
		part.GuardCommit = &s
	} else {
		part.GuardCommit = nil
	}
	if part.HighWater == nil {
		part.HighWater = Int64(store.Offset)
	} else {
		part.HighWater = Int64(max(*part.HighWater, store.Offset))
	}
}

// ServiceStore is an offset the service stores or commits, with the guard's mark attached.
func (b *GuardBook) ServiceStore(topic string, partition int32, offset int64, metadata *string) Store {
	key := TopicPartition{topic, partition}
	part := b.Parts[key]
	if part == nil || offset < 0 {
		return Store{Topic: topic, Partition: partition, Offset: offset, Metadata: metadata}
	}
	mark := part.Rules.CommitMark(offset)
	part.StoredUntil = Int64(max(maxOr(part.StoredUntil, 0), offset))
	store := Store{Topic: topic, Partition: partition, Offset: offset, Metadata: metadata}
	if mark != nil {
		m := mark.Encode()
		store.Metadata = &m
	}
	b.note(part, store, false)
	return store
}

// StoredOffsets is what a plain Commit() of the service commits: every partition's stored offset with its
// mark, explicitly (librdkafka would skip those not above its committed offset).
func (b *GuardBook) StoredOffsets() []Store {
	var stores []Store
	for _, key := range b.sortedKeys() {
		part := b.Parts[key]
		if part.StoredUntil == nil || part.Held() {
			continue
		}
		stores = append(stores, storeOf(key, *part.StoredUntil, part.Rules.CommitMark(*part.StoredUntil)))
		part.GuardCommit = nil
		part.HighWater = Int64(max(maxOr(part.HighWater, 0), *part.StoredUntil))
	}
	return stores
}

// TakeGuardCommits returns (and clears) the stores the guard commits itself. By calling for records again
// the service is done with what it was handed before.
func (b *GuardBook) TakeGuardCommits() []Store {
	var commits []Store
	for _, key := range b.sortedKeys() {
		part := b.Parts[key]
		if part.GuardCommit != nil {
			commits = append(commits, *part.GuardCommit)
			part.GuardCommit = nil
		}
	}
	return commits
}

// FloorCommits: partitions past H whose committed offset may still be below H (quiet ones): commit the
// position. Call FloorDone for each once the commit succeeded.
func (b *GuardBook) FloorCommits(positionOf func(TopicPartition) *int64) []Store {
	var out []Store
	for _, key := range b.sortedKeys() {
		part := b.Parts[key]
		if part.Held() || part.Rules.Handover == nil || part.Rules.FloorCommitted {
			continue
		}
		if part.HandedUntil != nil && maxOr(part.StoredUntil, 0) < *part.HandedUntil {
			continue // the service still works on records it was handed
		}
		position := part.Rules.SeenUntil
		if position == nil {
			position = positionOf(key)
		}
		if target := part.Rules.FloorCommit(position); target != nil {
			out = append(out, Store{Topic: key.Topic, Partition: key.Partition, Offset: *target})
		}
	}
	return out
}

// FloorDone records a floor commit that succeeded.
func (b *GuardBook) FloorDone(store Store) {
	part := b.Parts[TopicPartition{store.Topic, store.Partition}]
	if part == nil {
		return
	}
	part.StoredUntil = Int64(max(maxOr(part.StoredUntil, 0), store.Offset))
	part.HighWater = Int64(max(maxOr(part.HighWater, 0), store.Offset))
	part.Rules.FloorCommitted = true
}

// SkipReports: partitions being skipped whose seen-until moved since the last report.
func (b *GuardBook) SkipReports() []SkipReport {
	var reports []SkipReport
	for _, key := range b.sortedKeys() {
		part := b.Parts[key]
		r := part.Rules
		if part.Held() || r.Handover != nil || r.FirstSkipped == nil || r.ReplayID == nil || r.SeenUntil == nil {
			continue
		}
		if part.reportedSeen != nil && *part.reportedSeen == *r.SeenUntil {
			continue
		}
		reports = append(reports, SkipReport{*r.ReplayID, key.Topic, key.Partition, *r.FirstSkipped, *r.SeenUntil})
		part.reportedSeen = Int64(*r.SeenUntil)
	}
	return reports
}

// ProblemReports: released partitions whose problem appeared or changed since the last report.
func (b *GuardBook) ProblemReports() []ProblemReport {
	var reports []ProblemReport
	for _, key := range b.sortedKeys() {
		part := b.Parts[key]
		problem := part.Rules.CurrentProblem()
		if part.Held() || equalProblem(problem, part.reportedProblem) {
			continue
		}
		part.reportedProblem = problem
		if problem != nil {
			reports = append(reports, ProblemReport{problem.ReplayID, key.Topic, key.Partition, problem.Problem,
				copyInt(part.Rules.FirstSkipped), copyInt(part.Rules.SeenUntil)})
		}
	}
	return reports
}

func equalProblem(a, b *Problem) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func copyInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	return Int64(*p)
}

// PendingAcks: partitions whose H is known, to acknowledge once committed past H.
func (b *GuardBook) PendingAcks() map[TopicPartition]PendingAck {
	out := map[TopicPartition]PendingAck{}
	for key, part := range b.Parts {
		if !part.Held() && part.Rules.PendingAck() {
			out[key] = PendingAck{*part.Rules.ReplayID, *part.Rules.Handover}
		}
	}
	return out
}

func (b *GuardBook) sortedKeys() []TopicPartition { return sortedKeysOf(b.Parts) }

func sortedKeysOf[V any](m map[TopicPartition]V) []TopicPartition {
	keys := make([]TopicPartition, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	return keys
}
