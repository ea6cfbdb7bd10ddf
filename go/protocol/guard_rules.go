// The guard's rules for one partition of the live group (HANDOVER.md section 6): the verdict per record,
// the seek back when H becomes known, the re-read window, and the mark every commit carries.
package protocol

// Verdict of the guard on one record.
type Verdict int

const (
	// Process: the record goes to the service.
	Process Verdict = iota
	// Skip: the replay covers it (or it was processed before a seek back).
	Skip
)

func (v Verdict) String() string {
	if v == Skip {
		return "skip"
	}
	return "process"
}

// covers says whether the replay covers a record; a nil filter (none known, or one this side cannot
// evaluate) covers everything, and so does a value the filter cannot decode.
func covers(filter *RecordFilter, hasFilter bool, key []byte, headers []Header, value []byte) bool {
	if !hasFilter || filter == nil {
		return true
	}
	return filter.Matches(key, headers, value)
}

// GuardPartition is the guard's state for one assigned partition, and its rules.
type GuardPartition struct {
	Topic     string
	Partition int32

	ReplayID *string
	Start    *int64
	Handover *int64
	filter   *RecordFilter
	// hasFilter: a replay is adopted (its filter, possibly nil = everything, applies).
	hasFilter bool

	FirstSkipped *int64
	SeenUntil    *int64

	RereadUntil     *int64
	RereadReplay    *string
	rereadFilter    *RecordFilter
	rereadHasFilter bool

	// FloorCommitted: the guard committed H itself (a quiet partition) or saw it committed.
	FloorCommitted bool
	// Skipped counts records skipped since the assignment.
	Skipped int64
	// ViewProblem: the handover view says this guard cannot follow the partition's replay.
	ViewProblem *Problem
	// MarkProblem: the commit mark found at assignment could not be used.
	MarkProblem *Problem
	// UnknownSkips: the committed mark could not be read, so the previous owner may have skipped any covered
	// record below the committed offset; the first replay adopted counts as skipped from its start (F := S).
	UnknownSkips bool
}

// Problem is (replay id, problem) to report for a partition: the guard skips nothing for that replay there.
type Problem struct {
	ReplayID string
	Problem  string
}

// CurrentProblem is the problem to report for this partition, or nil.
func (g *GuardPartition) CurrentProblem() *Problem {
	if g.ViewProblem != nil {
		return g.ViewProblem
	}
	return g.MarkProblem
}

// NewGuardPartition returns the state of a newly assigned partition.
func NewGuardPartition(topic string, partition int32) *GuardPartition {
	return &GuardPartition{Topic: topic, Partition: partition}
}

// Restore resumes from the live group's committed offset and the mark the previous owner left on it.
func (g *GuardPartition) Restore(committed *int64, mark *CommitMark) {
	if committed != nil && *committed >= 0 {
		g.SeenUntil = Int64(*committed)
	}
	if mark == nil {
		return
	}
	if !mark.Usable() {
		// A newer (or broken) guard wrote it: what it skipped below C is unknown. Assume the worst the replay
		// can cover (everything from S), so that H brings a re-read instead of a loss.
		g.MarkProblem = &Problem{mark.ReplayID, "unusable-commit-mark:" + mark.Problem}
		g.UnknownSkips = committed != nil && *committed > 0
		return
	}
	if mark.SkipFrom != nil && committed != nil && *committed > *mark.SkipFrom {
		g.ReplayID = String(mark.ReplayID)
		g.FirstSkipped = Int64(*mark.SkipFrom)
	}
	if mark.RereadUntil != nil && committed != nil && *committed < *mark.RereadUntil {
		g.RereadUntil = Int64(*mark.RereadUntil)
		g.RereadReplay = String(mark.ReplayID)
	}
}

// Update applies what the handover topic now says (nil: no active replay); returns an offset to seek back
// to, or nil.
func (g *GuardPartition) Update(active *ActiveHandover) *int64 {
	g.ViewProblem = nil
	if active != nil && active.Problem != "" {
		// A replay the guard cannot follow covers nothing as far as it can prove: as if it were gone.
		g.ViewProblem = &Problem{active.ReplayID, active.Problem}
		active = nil
	}
	if g.RereadUntil != nil && !g.rereadHasFilter && active != nil && g.RereadReplay != nil &&
		active.ReplayID == *g.RereadReplay {
		g.rereadFilter, g.rereadHasFilter = active.Filter, true
	}
	if active != nil && g.ReplayID != nil && active.ReplayID != *g.ReplayID {
		// A different replay took over this partition: the old one is gone as far as this guard knows.
		seek := g.abandon()
		g.adopt(active)
		return seek
	}
	if active == nil {
		return g.abandon()
	}
	g.adopt(active)
	if active.Handover != nil && g.Handover == nil {
		g.Handover = Int64(*active.Handover)
		skippedFrom := g.FirstSkipped
		g.FirstSkipped = nil
		if skippedFrom != nil {
			target := max(*active.Handover, *skippedFrom)
			if g.SeenUntil != nil && *g.SeenUntil > target {
				return g.reread(target, *g.SeenUntil, g.ReplayID, g.filter, g.hasFilter)
			}
		}
	}
	return nil
}

func (g *GuardPartition) adopt(active *ActiveHandover) {
	g.ReplayID = String(active.ReplayID)
	g.Start = Int64(*active.Start)
	g.filter, g.hasFilter = active.Filter, true
	if active.Handover == nil {
		g.Handover = nil
	}
	if g.UnknownSkips {
		g.UnknownSkips = false
		if g.FirstSkipped == nil && g.SeenUntil != nil && *g.SeenUntil > *active.Start {
			g.FirstSkipped = Int64(*active.Start)
		}
	}
}

// abandon: the replay went away. If it went before publishing H, nobody covers what was skipped: re-read it.
func (g *GuardPartition) abandon() *int64 {
	var seek *int64
	if g.Handover == nil && g.FirstSkipped != nil && g.SeenUntil != nil && *g.SeenUntil > *g.FirstSkipped {
		seek = g.reread(*g.FirstSkipped, *g.SeenUntil, g.ReplayID, g.filter, g.hasFilter)
	}
	g.ReplayID, g.Start, g.Handover, g.FirstSkipped = nil, nil, nil, nil
	g.filter, g.hasFilter = nil, false
	g.FloorCommitted = false
	return seek
}

func (g *GuardPartition) reread(target, until int64, replayID *string, filter *RecordFilter, hasFilter bool) *int64 {
	if g.RereadUntil != nil {
		until = max(until, *g.RereadUntil)
	}
	g.RereadUntil = Int64(until)
	g.RereadReplay = replayID
	g.rereadFilter, g.rereadHasFilter = filter, hasFilter
	g.SeenUntil = Int64(target)
	return Int64(target)
}

func (g *GuardPartition) clearReread() {
	g.RereadUntil, g.RereadReplay, g.rereadFilter, g.rereadHasFilter = nil, nil, nil, false
}

// Verdict decides one record at offset (in order); the guard's seen-until becomes offset+1.
func (g *GuardPartition) Verdict(offset int64, key []byte, headers []Header, value []byte) Verdict {
	g.SeenUntil = Int64(offset + 1)
	if g.RereadUntil != nil {
		if offset < *g.RereadUntil {
			verdict := Process
			// Non-matching records here were processed the first time round. Without the replay's filter
			// (it vanished before this guard learned it) every record is processed again: at-least-once
			// rather than loss.
			if g.rereadHasFilter && !covers(g.rereadFilter, true, key, headers, value) {
				verdict = Skip
			} else if g.Start != nil && g.Handover != nil && *g.Start <= offset && offset < *g.Handover {
				verdict = Skip
			}
			if offset+1 >= *g.RereadUntil {
				g.clearReread() // read to its end (a quiet partition may have nothing after it)
			}
			if verdict == Skip {
				g.Skipped++
			}
			return verdict
		}
		g.clearReread()
	}
	if g.Start == nil || offset < *g.Start {
		return Process
	}
	if g.Handover == nil {
		if covers(g.filter, g.hasFilter, key, headers, value) {
			if g.FirstSkipped == nil {
				g.FirstSkipped = Int64(offset)
			}
			g.Skipped++
			return Skip
		}
		return Process
	}
	if offset < *g.Handover && covers(g.filter, g.hasFilter, key, headers, value) {
		g.Skipped++
		return Skip
	}
	return Process
}

// CommitMark is the mark a commit of offset must carry now (nil: a plain commit).
func (g *GuardPartition) CommitMark(offset int64) *CommitMark {
	if g.RereadUntil != nil && offset < *g.RereadUntil && g.RereadReplay != nil {
		return &CommitMark{ReplayID: *g.RereadReplay, RereadUntil: Int64(*g.RereadUntil)}
	}
	if g.Handover == nil && g.FirstSkipped != nil && offset > *g.FirstSkipped && g.ReplayID != nil {
		return &CommitMark{ReplayID: *g.ReplayID, SkipFrom: Int64(*g.FirstSkipped)}
	}
	return nil
}

// FloorCommit: in a quiet partition no record past H may come for a long time; once everything below the
// guard's position is processed or covered, the guard may commit that position itself. Returns it, or nil.
func (g *GuardPartition) FloorCommit(position *int64) *int64 {
	if g.Handover == nil || g.FloorCommitted || g.RereadUntil != nil {
		return nil
	}
	if position == nil || *position < *g.Handover {
		return nil
	}
	return Int64(*position)
}

// PendingAck: H is known, so the partition is to be acknowledged once L has committed past it.
func (g *GuardPartition) PendingAck() bool { return g.Handover != nil && g.ReplayID != nil }
