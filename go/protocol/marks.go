// Commit marks (HANDOVER.md section 3): what each group did, recorded in the metadata of the offset it
// commits, so that the record of it is atomic with the offset.
package protocol

import (
	"strings"
)

// CommitMark is Reprise's part of a committed offset's metadata.
//   - replay group, Finished: the partition is finished for this replay at exactly the committed offset;
//   - live group, SkipFrom F: matching records in [F, committed) were skipped, not processed;
//   - live group, RereadUntil U: records in [committed, U) that do not match were processed already.
type CommitMark struct {
	ReplayID    string
	Finished    *string
	SkipFrom    *int64
	RereadUntil *int64
	// Problem: why a Reprise mark cannot be used (newer-version, malformed); "" for a usable mark.
	Problem string
}

// Encode is the metadata string: `{"reprise":1,"replay":"<id>",...}`, compact.
func (m CommitMark) Encode() string {
	body := NewObject().Set("reprise", FormatVersion).Set("replay", m.ReplayID)
	if m.Finished != nil {
		body.Set("finished", *m.Finished)
	}
	if m.SkipFrom != nil {
		body.Set("skip_from", *m.SkipFrom)
	}
	if m.RereadUntil != nil {
		body.Set("reread_until", *m.RereadUntil)
	}
	return string(Dumps(body))
}

// Committed is the metadata string a mark is stored as: its JSON and one NUL. Metadata travels as a C string
// (HANDOVER.md section 3): confluent-kafka-python appends the NUL when it writes and reads only up to the first
// NUL, while confluent-kafka-go stores the string's bytes as they are, so a Go writer appends the NUL itself.
func (m CommitMark) Committed() string {
	return StoredMetadata(m.Encode())
}

// StoredMetadata is any metadata text as it is committed: the text and one NUL.
func StoredMetadata(text string) string {
	return text + "\x00"
}

// MetadataText is committed metadata as a C string reads it: up to the first NUL.
func MetadataText(metadata string) string {
	if i := strings.IndexByte(metadata, 0); i >= 0 {
		return metadata[:i]
	}
	return metadata
}

// Problems of a Reprise mark this reader cannot use.
const (
	MarkNewerVersion = "newer-version"
	MarkMalformed    = "malformed"
)

// DecodeMark returns the mark in a committed offset's metadata; nil when there is none or the metadata is
// someone else's (anything but a JSON object with a `reprise` member). A Reprise mark this reader cannot
// use comes back with Problem set and no fields. The text ends at its first NUL.
func DecodeMark(text string) *CommitMark {
	text = MetadataText(text)
	if text == "" || !strings.HasPrefix(text, "{") || BeyondLimits([]byte(text)) {
		return nil // deeper than the protocol reads (HANDOVER.md section 2, Limits): like text that is not JSON
	}
	parsed, err := ParseOrdered([]byte(text))
	if err != nil {
		return nil
	}
	body, ok := parsed.(*Object)
	if !ok {
		return nil
	}
	rawVersion, has := body.Get("reprise")
	if !has {
		return nil
	}
	replay, replayIsStr := body.Values["replay"].(string)
	version, isInt := jsonInt(rawVersion)
	if !isInt || version < 1 {
		return &CommitMark{ReplayID: replay, Problem: MarkMalformed}
	}
	if version > FormatVersion {
		return &CommitMark{ReplayID: replay, Problem: MarkNewerVersion}
	}
	mark := &CommitMark{ReplayID: replay}
	good := replayIsStr
	if raw, _ := body.Get("finished"); raw != nil {
		s, isStr := raw.(string)
		good = good && isStr
		mark.Finished = &s
	}
	for name, target := range map[string]**int64{"skip_from": &mark.SkipFrom, "reread_until": &mark.RereadUntil} {
		if raw, _ := body.Get(name); raw != nil {
			n, isInt := jsonInt(raw)
			good = good && isInt
			*target = &n
		}
	}
	if !good {
		return &CommitMark{ReplayID: replay, Problem: MarkMalformed}
	}
	return mark
}

// Usable is false for a Reprise mark this reader cannot read: it says nothing reliable about what was
// skipped or processed below the offset.
func (m *CommitMark) Usable() bool { return m.Problem == "" }

// AckDue says whether the live group owns the partition from H on: committed >= H with no skip pending.
func AckDue(handover int64, committed *int64, mark *CommitMark) bool {
	if committed == nil || *committed < handover {
		return false
	}
	return mark == nil || (mark.Usable() && mark.SkipFrom == nil && mark.RereadUntil == nil)
}

// Int64 returns a pointer to n (for the optional fields).
func Int64(n int64) *int64 { return &n }

// String returns a pointer to s.
func String(s string) *string { return &s }
