// Commit marks (HANDOVER.md section 3): what each group did, recorded in the metadata of the offset it
// commits, so that the record of it is atomic with the offset.
package protocol

import (
	"encoding/json"
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

// DecodeMark returns the mark in a committed offset's metadata; nil when there is none or the metadata is
// someone else's (anything not a JSON object with `reprise` and a string `replay`).
func DecodeMark(text string) *CommitMark {
	if text == "" || !strings.HasPrefix(text, "{") {
		return nil
	}
	parsed, err := ParseOrdered([]byte(text))
	if err != nil {
		return nil
	}
	body, ok := parsed.(*Object)
	if !ok {
		return nil
	}
	if _, has := body.Get("reprise"); !has {
		return nil
	}
	id, ok := body.Values["replay"].(string)
	if !ok {
		return nil
	}
	mark := &CommitMark{ReplayID: id}
	if finished, ok := body.Get("finished"); ok && finished != nil {
		s := pyStr(finished)
		mark.Finished = &s
	}
	mark.SkipFrom = optMarkInt(body, "skip_from")
	mark.RereadUntil = optMarkInt(body, "reread_until")
	return mark
}

func optMarkInt(body *Object, name string) *int64 {
	raw, ok := body.Get(name)
	if !ok || raw == nil {
		return nil
	}
	if n, ok := pyIntOf(raw); ok {
		return &n
	}
	return nil
}

// AckDue says whether the live group owns the partition from H on: committed >= H with no skip pending.
func AckDue(handover int64, committed *int64, mark *CommitMark) bool {
	if committed == nil || *committed < handover {
		return false
	}
	return mark == nil || (mark.SkipFrom == nil && mark.RereadUntil == nil)
}

// Int64 returns a pointer to n (for the optional fields).
func Int64(n int64) *int64 { return &n }

// String returns a pointer to s.
func String(s string) *string { return &s }

var _ = json.Number("")
