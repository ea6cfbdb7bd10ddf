// Where a replay starts and ends (port of replay_worker/protocol/start_position.py): the specs and the pure
// decisions. The I/O (watermarks, offsets for times) is the replay role's.
//
//   - A timestamp start is the earliest offset whose timestamp is >= T; when no record is that new (-1) the
//     partition's start is its end offset.
//   - A start older than the log-start offset is an error unless clamping is allowed: records the replay
//     was asked for are gone, and a replay must say so.
//   - The start is resolved once; a duration back from now becomes a timestamp at that moment.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrSpec is wrapped by every error about a start or end spec that cannot be understood or honoured.
var ErrSpec = errors.New("bad start or end")

// StartOlderThanRetention: the asked-for start is below the log-start offset.
type StartOlderThanRetention struct {
	Topic     string
	Partition int32
	Requested *int64
	LogStart  int64
	What      string
}

func (e *StartOlderThanRetention) Error() string {
	asked := e.What
	if e.Requested != nil {
		asked = fmt.Sprintf("offset %d", *e.Requested)
	}
	return fmt.Sprintf("start of %s[%d] (%s) is older than the partition's log-start offset %d: those records "+
		"were deleted by retention. Replay them from the lake (a LakeReplay), or allow clamping "+
		"(REPRISE_ALLOW_CLAMP=true) to start at offset %d instead", e.Topic, e.Partition, asked, e.LogStart, e.LogStart)
}

// SpecError is a start or end spec that cannot be understood or honoured: Field names the part at fault,
// Code what is wrong, the same in every language.
type SpecError struct {
	Field   string
	Code    string
	Message string
}

func (e *SpecError) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrSpec) true.
func (e *SpecError) Unwrap() error { return ErrSpec }

func specErr(field, code, format string, args ...any) error {
	return &SpecError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Code of a StartOlderThanRetention.
func (e *StartOlderThanRetention) Code() string { return "start-older-than-retention" }

// PartitionOffsets: per topic, per partition, an offset.
type PartitionOffsets map[string]map[int32]int64

// StartSpec is earliest, a timestamp, a duration back from now, or explicit offsets.
type StartSpec struct {
	Kind        string // earliest | timestamp | duration | offsets
	TimestampMs int64
	DurationS   float64
	Offsets     PartitionOffsets
}

// EndSpec is an optional bound: snapshot (end offsets at the start), a timestamp, or explicit offsets.
type EndSpec struct {
	Kind        string // snapshot | timestamp | offsets
	TimestampMs int64
	Offsets     PartitionOffsets
}

var isoLayouts = []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04Z07:00",
	"2006-01-02T15:04", "2006-01-02"}

var digitsOnly = regexp.MustCompile(`^-?\d+$`)

func msFrom(value any, what string) (int64, error) {
	switch v := value.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, specErr(what, "bad-time", "%s: expected epoch milliseconds or an ISO-8601 time, got %s", what, v)
		}
		return int64(f), nil
	case string:
		text := strings.TrimSpace(v)
		if digitsOnly.MatchString(text) {
			n, _ := strconv.ParseInt(text, 10, 64)
			return n, nil
		}
		text = strings.Replace(text, "Z", "+00:00", 1)
		for _, layout := range isoLayouts {
			if t, err := time.Parse(layout, text); err == nil {
				return t.UnixMilli(), nil
			}
		}
		return 0, specErr(what, "bad-time", "%s: %q is not an ISO-8601 time (e.g. 2024-05-01T12:00:00Z) nor epoch milliseconds", what, v)
	}
	return 0, specErr(what, "bad-time", "%s: expected epoch milliseconds or an ISO-8601 time, got %s", what, Dumps(value))
}

var durationUnits = map[string]float64{"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
var isoDuration = regexp.MustCompile(`^P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)
var plainSeconds = regexp.MustCompile(`^\d+(?:\.\d+)?$`)
var durationPiece = regexp.MustCompile(`(\d+(?:\.\d+)?)(ms|s|m|h|d|w)`)

// ParseDuration returns seconds from a number, `90s`/`15m`/`2h`/`7d`/`1h30m`, or ISO-8601 `PT2H`/`P1D`.
func ParseDuration(value any, what string) (float64, error) {
	var seconds float64
	switch v := value.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, specErr(what, "bad-duration", "%s: %s is not a duration", what, v)
		}
		seconds = f
	case float64:
		seconds = v
	case string:
		text := strings.TrimSpace(v)
		upper := strings.ToUpper(text)
		matched := false
		if strings.HasPrefix(upper, "P") {
			if m := isoDuration.FindStringSubmatch(upper); m != nil {
				units := []string{"w", "d", "h", "m", "s"}
				for i, u := range units {
					if m[i+1] != "" {
						matched = true
						f, _ := strconv.ParseFloat(m[i+1], 64)
						seconds += f * durationUnits[u]
					}
				}
			}
		}
		if !matched {
			if plainSeconds.MatchString(text) {
				seconds, _ = strconv.ParseFloat(text, 64)
			} else {
				pieces := durationPiece.FindAllStringSubmatch(text, -1)
				joined := ""
				for _, p := range pieces {
					joined += p[1] + p[2]
				}
				if len(pieces) == 0 || joined != text {
					return 0, specErr(what, "bad-duration", "%s: %q is not a duration (use e.g. 90s, 15m, 2h, 7d, 1h30m or PT2H)", what, v)
				}
				for _, p := range pieces {
					f, _ := strconv.ParseFloat(p[1], 64)
					seconds += f * durationUnits[p[2]]
				}
			}
		}
	default:
		return 0, specErr(what, "bad-duration", "%s: %s is not a duration", what, Dumps(value))
	}
	if seconds <= 0 {
		return 0, specErr(what, "duration-not-positive", "%s: must be positive, got %s", what, Dumps(value))
	}
	return seconds, nil
}

func parseOffsets(value any, what string) (PartitionOffsets, error) {
	out := PartitionOffsets{}
	bad := func() error {
		return specErr(what, "bad-offsets", `%s: expected {"topic": {"0": 12}} or a list of {topic, partition, offset}, got %s`, what, Dumps(value))
	}
	switch v := value.(type) {
	case *Object:
		for _, topic := range v.Keys {
			parts, ok := v.Values[topic].(*Object)
			if !ok {
				return nil, bad()
			}
			out[topic] = map[int32]int64{}
			for _, p := range parts.Keys {
				pn, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
				on, ok := pyIntOf(parts.Values[p])
				if err != nil || !ok {
					return nil, bad()
				}
				out[topic][int32(pn)] = on
			}
		}
	case []any:
		for _, item := range v {
			obj, ok := item.(*Object)
			if !ok {
				return nil, bad()
			}
			topic, hasTopic := obj.Get("topic")
			p, ok1 := pyIntOf(obj.Values["partition"])
			o, ok2 := pyIntOf(obj.Values["offset"])
			if !hasTopic || !ok1 || !ok2 {
				return nil, bad()
			}
			name := pyStr(topic)
			if out[name] == nil {
				out[name] = map[int32]int64{}
			}
			out[name][int32(p)] = o
		}
	default:
		return nil, bad()
	}
	for topic, parts := range out {
		for p, o := range parts {
			if p < 0 || o < 0 {
				return nil, specErr(what, "negative-offset", "%s: %s[%d]=%d: partitions and offsets are >= 0", what, topic, p, o)
			}
		}
	}
	return out, nil
}

func oneOf(obj any, kinds []string, what string) (string, any, error) {
	if s, ok := obj.(string); ok {
		for _, k := range kinds {
			if s == k {
				return k, nil, nil
			}
		}
		return "", nil, specErr(what, "unknown-type", "%s: %q is not one of %s", what, s, strings.Join(kinds, ", "))
	}
	body, ok := obj.(*Object)
	if !ok {
		return "", nil, specErr(what, "not-an-object", "%s: expected a JSON object, got %s", what, Dumps(obj))
	}
	if kind, has := body.Get("type"); has {
		s, _ := kind.(string)
		for _, k := range kinds {
			if s == k {
				v, _ := body.Get(k)
				return k, v, nil
			}
		}
		return "", nil, specErr(what, "unknown-type", "%s: type %s is not one of %s", what, Dumps(kind), strings.Join(kinds, ", "))
	}
	var present []string
	for _, k := range kinds {
		if _, has := body.Get(k); has {
			present = append(present, k)
		}
	}
	if len(present) != 1 {
		keys := append([]string{}, body.Keys...)
		sort.Strings(keys)
		return "", nil, specErr(what, "ambiguous-type", "%s: give exactly one of %s (got %v)", what, strings.Join(kinds, ", "), keys)
	}
	return present[0], body.Values[present[0]], nil
}

func specInput(obj any, what string) (any, error) {
	if s, ok := obj.(string); ok {
		t := strings.TrimSpace(s)
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") || strings.HasPrefix(t, `"`) {
			parsed, err := ParseOrdered([]byte(t))
			if err != nil {
				return nil, specErr(what, "not-json", "%s: not valid JSON (%v)", what, err)
			}
			return parsed, nil
		}
	}
	return obj, nil
}

// ParseStartSpec reads `{"earliest":true}`, `{"timestamp":...}`, `{"duration":"2h"}`, `{"offsets":{...}}`,
// the `{"type": K, K: v}` form or a bare kind; JSON text or a parsed value.
func ParseStartSpec(obj any, what string) (StartSpec, error) {
	if what == "" {
		what = "start"
	}
	obj, err := specInput(obj, what)
	if err != nil {
		return StartSpec{}, err
	}
	kind, value, err := oneOf(obj, []string{"earliest", "timestamp", "duration", "offsets"}, what)
	if err != nil {
		return StartSpec{}, err
	}
	switch kind {
	case "earliest":
		return StartSpec{Kind: kind}, nil
	case "timestamp":
		ms, err := msFrom(value, what+".timestamp")
		return StartSpec{Kind: kind, TimestampMs: ms}, err
	case "duration":
		s, err := ParseDuration(value, what+".duration")
		return StartSpec{Kind: kind, DurationS: s}, err
	}
	offsets, err := parseOffsets(value, what+".offsets")
	return StartSpec{Kind: kind, Offsets: offsets}, err
}

// ParseEndSpec reads `{"snapshot":true}`, `{"timestamp":...}` or `{"offsets":{...}}`.
func ParseEndSpec(obj any, what string) (EndSpec, error) {
	if what == "" {
		what = "end"
	}
	obj, err := specInput(obj, what)
	if err != nil {
		return EndSpec{}, err
	}
	kind, value, err := oneOf(obj, []string{"snapshot", "timestamp", "offsets"}, what)
	if err != nil {
		return EndSpec{}, err
	}
	switch kind {
	case "snapshot":
		return EndSpec{Kind: kind}, nil
	case "timestamp":
		ms, err := msFrom(value, what+".timestamp")
		return EndSpec{Kind: kind, TimestampMs: ms}, err
	}
	offsets, err := parseOffsets(value, what+".offsets")
	return EndSpec{Kind: kind, Offsets: offsets}, err
}

// LookupTimestamp is the timestamp to look up with OffsetsForTimes (false when not time-based).
func (s StartSpec) LookupTimestamp(nowMs int64) (int64, bool) {
	switch s.Kind {
	case "timestamp":
		return s.TimestampMs, true
	case "duration":
		return nowMs - int64(s.DurationS*1000), true
	}
	return 0, false
}

// PartitionFacts is what Kafka said about one partition at bootstrap.
type PartitionFacts struct {
	Topic     string
	Partition int32
	LogStart  int64
	End       int64
	// TimeLookup: OffsetsForTimes(T) for a time-based start (-1: no record that new); nil when not asked.
	TimeLookup    *int64
	EndTimeLookup *int64
}

// StartDecision is the start (and optional end) of one partition, decided once and published.
type StartDecision struct {
	Topic          string
	Partition      int32
	Offset         int64
	Clamped        bool
	EndOffset      *int64
	EndTimestampMs *int64
}

// DecideStart returns the start offset of one partition, or a *StartOlderThanRetention / ErrSpec error.
func DecideStart(spec StartSpec, f PartitionFacts, allowClamp bool) (StartDecision, error) {
	t, p := f.Topic, f.Partition
	switch spec.Kind {
	case "earliest":
		return StartDecision{Topic: t, Partition: p, Offset: f.LogStart}, nil
	case "offsets":
		wanted, ok := spec.Offsets[t][p]
		if !ok {
			return StartDecision{}, specErr("start.offsets", "missing-partition-offset", "start.offsets has no offset for %s[%d]: give one for every partition of the topics", t, p)
		}
		if wanted > f.End {
			return StartDecision{}, specErr("start.offsets", "offset-beyond-end", "start.offsets: %s[%d]=%d is beyond the partition's end offset %d", t, p, wanted, f.End)
		}
		if wanted < f.LogStart {
			if !allowClamp {
				return StartDecision{}, &StartOlderThanRetention{t, p, Int64(wanted), f.LogStart, "explicit offset"}
			}
			return StartDecision{Topic: t, Partition: p, Offset: f.LogStart, Clamped: true}, nil
		}
		return StartDecision{Topic: t, Partition: p, Offset: wanted}, nil
	}
	found := f.TimeLookup
	if found == nil || *found < 0 {
		return StartDecision{Topic: t, Partition: p, Offset: f.End}, nil
	}
	if *found == f.LogStart && f.LogStart > 0 {
		if !allowClamp {
			return StartDecision{}, &StartOlderThanRetention{t, p, nil, f.LogStart, "the start time"}
		}
		return StartDecision{Topic: t, Partition: p, Offset: *found, Clamped: true}, nil
	}
	return StartDecision{Topic: t, Partition: p, Offset: max(*found, f.LogStart)}, nil
}

// DecideEnd returns (end offset, end timestamp) of one partition; both nil when unbounded.
func DecideEnd(spec *EndSpec, f PartitionFacts, nowMs int64) (*int64, *int64, error) {
	if spec == nil {
		return nil, nil, nil
	}
	switch spec.Kind {
	case "snapshot":
		return Int64(f.End), nil, nil
	case "offsets":
		o, ok := spec.Offsets[f.Topic][f.Partition]
		if !ok {
			return nil, nil, specErr("end.offsets", "missing-partition-offset", "end.offsets has no offset for %s[%d]: give one for every partition of the topics", f.Topic, f.Partition)
		}
		return Int64(o), nil, nil
	}
	if f.EndTimeLookup != nil && *f.EndTimeLookup >= 0 {
		return Int64(*f.EndTimeLookup), nil, nil
	}
	if spec.TimestampMs <= nowMs {
		return Int64(f.End), nil, nil
	}
	return nil, Int64(spec.TimestampMs), nil
}

// DecidePartition is start and end of one partition. A partition with a committed offset in the replay
// group keeps it: the replay resumes there, and that is what the published start must say.
func DecidePartition(start StartSpec, end *EndSpec, f PartitionFacts, allowClamp bool, nowMs int64,
	committed *int64) (StartDecision, error) {
	var decision StartDecision
	if committed != nil && *committed >= 0 {
		decision = StartDecision{Topic: f.Topic, Partition: f.Partition, Offset: *committed}
	} else {
		d, err := DecideStart(start, f, allowClamp)
		if err != nil {
			return StartDecision{}, err
		}
		decision = d
	}
	endOffset, endTs, err := DecideEnd(end, f, nowMs)
	if err != nil {
		return StartDecision{}, err
	}
	if endOffset != nil && *endOffset < decision.Offset {
		endOffset = Int64(decision.Offset)
	}
	decision.EndOffset, decision.EndTimestampMs = endOffset, endTs
	return decision, nil
}
