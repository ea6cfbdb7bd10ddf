// When the replay stops a partition (HANDOVER.md sections 1 and 5): the finish decision per mode, and the
// end bound of bounded replays.
package protocol

import "fmt"

// Finish reasons, as published in `handover` records and `finished` marks.
const (
	ReasonEndBound       = "end-bound"
	ReasonEndOfPartition = "end-of-partition"
	ReasonLiveOffset     = "live-offset"
	ReasonCaughtUp       = "caught-up"
	ReasonForced         = "forced"
	ReasonNotInPlan      = "not-in-plan"
)

// FinishInput is what the replay knows about one partition when it decides.
type FinishInput struct {
	// Position is the next offset the replay would process; every record below it is processed.
	Position       int64
	EndOffset      *int64
	EndTimestampMs *int64
	// AtEnd: the consumer reported the end of the partition and everything before it is processed.
	AtEnd bool
	// LiveCommitted is the live side's position: its committed offset, or the guard's seen-until.
	LiveCommitted *int64
}

// ReplayFinish returns the reason the replay stops the partition now, or "" to keep reading.
func ReplayFinish(mode string, in FinishInput) (string, error) {
	if in.EndOffset != nil && in.Position >= *in.EndOffset {
		return ReasonEndBound, nil
	}
	bounded := in.EndOffset != nil || in.EndTimestampMs != nil
	caught := in.LiveCommitted != nil && in.Position >= *in.LiveCommitted
	switch mode {
	case ModeDrain:
		if in.AtEnd && !bounded {
			return ReasonEndOfPartition, nil
		}
		return "", nil
	case ModeParallel:
		if caught {
			return ReasonLiveOffset, nil
		}
		if in.AtEnd && !bounded {
			return ReasonEndOfPartition, nil
		}
		return "", nil
	case ModeHandover:
		if caught {
			return ReasonCaughtUp, nil
		}
		if in.AtEnd {
			return ReasonEndOfPartition, nil
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown mode %q", mode)
}

// RecordEndsPartition says whether a bounded replay stops before this record: at the end offset, or at
// the first record at or after the end time. timestampMs is nil when the record has none.
func RecordEndsPartition(endOffset, endTimestampMs *int64, offset int64, timestampMs *int64) bool {
	if endOffset != nil && offset >= *endOffset {
		return true
	}
	return endTimestampMs != nil && timestampMs != nil && *timestampMs >= *endTimestampMs
}
