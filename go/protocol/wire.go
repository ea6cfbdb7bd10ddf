// Package protocol is the Reprise handover protocol (replay_worker/HANDOVER.md) as pure Go: the records of
// the handover topic, the commit marks, the filter, the guard's rules and bookkeeping, the replay's start
// and finish decisions. Nothing here talks to Kafka; the guard and the replay role are the thin I/O around
// it. The shared conformance vectors hold it to the Python reference.
//
// This file owns the wire format of the handover topic (HANDOVER.md section 2): keys, values, tombstones.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FormatVersion is the `v` this implementation writes and the newest it reads.
const FormatVersion = 1

// Record kinds of the handover topic.
const (
	KindReplay   = "replay"
	KindStart    = "start"
	KindHandover = "handover"
	KindGuard    = "guard"
	KindAck      = "ack"
	KindProgress = "progress"
	KindResult   = "result"
)

// Modes of a replay (HANDOVER.md section 1).
const (
	ModeParallel = "Parallel"
	ModeHandover = "Handover"
	ModeDrain    = "Drain"
)

// ErrFormat is wrapped by every error about a record that does not follow the format.
var ErrFormat = errors.New("not a handover record")

// Reasons a record is malformed, the same in every language (checked in this order).
const (
	CodeMalformedKey   = "malformed-key"
	CodeTooLarge       = "too-large"
	CodeMalformedValue = "malformed-value"
	CodeNewerVersion   = "newer-version"
	CodeKindMismatch   = "kind-mismatch"
	CodeUnknownKind    = "unknown-kind"
	CodeKeyMismatch    = "key-mismatch"
	CodeBadField       = "bad-field"
)

// FormatError is a handover-topic record that does not follow the format; Code names the reason.
type FormatError struct {
	Code    string
	Message string
}

func (e *FormatError) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Unwrap() error { return ErrFormat }

func formatError(code, format string, args ...any) error {
	return &FormatError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// TopicPartition names one partition of a source topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition) }

// RecordKey is a decoded key: `[id, kind]` or `[id, kind, topic, partition]`.
type RecordKey struct {
	ReplayID string
	Kind     string
	// HasPartition is false for the replay-wide kinds (replay, result).
	HasPartition bool
	Topic        string
	Partition    int32
}

// Record is one kind of handover-topic value.
type Record interface {
	ID() string
	Kind() string
}

// ReplayInfo is the `replay` record: what the replay is (written once, in the bootstrap transaction).
type ReplayInfo struct {
	ReplayID    string
	Mode        string
	ReplayGroup string
	LiveGroup   *string
	Topics      []string
	// Filter is the replay's filter with its key set inlined, as published (order kept).
	Filter *Object
	AtMs   int64
}

// StartInfo is the `start` record: S(p) and the end bound when there is one.
type StartInfo struct {
	ReplayID       string
	Topic          string
	Partition      int32
	Offset         int64
	EndOffset      *int64
	EndTimestampMs *int64
	Clamped        bool
	AtMs           int64
}

// HandoverInfo is the `handover` record: H(p).
type HandoverInfo struct {
	ReplayID  string
	Topic     string
	Partition int32
	Offset    int64
	Reason    string
	By        string
	AtMs      int64
}

// GuardInfo is the advisory `guard` record: the live side is skipping p.
type GuardInfo struct {
	ReplayID     string
	Topic        string
	Partition    int32
	FirstSkipped *int64
	SeenUntil    *int64
	Member       string
	AtMs         int64
	// Problem is set when the guard cannot follow the replay on this partition (it skips nothing then).
	Problem *string
}

// AckInfo is the `ack` record: the live group's committed offset is >= H with no mark.
type AckInfo struct {
	ReplayID  string
	Topic     string
	Partition int32
	Offset    int64
	Committed int64
	Member    string
	AtMs      int64
}

// ProgressInfo is the advisory `progress` record: the replay group's committed position.
type ProgressInfo struct {
	ReplayID  string
	Topic     string
	Partition int32
	Position  int64
	AtEnd     bool
	Member    string
	AtMs      int64
}

// ResultInfo is the `result` record of a run-to-completion worker.
type ResultInfo struct {
	ReplayID string
	Body     *Object
	AtMs     int64
}

func (r ReplayInfo) ID() string   { return r.ReplayID }
func (r StartInfo) ID() string    { return r.ReplayID }
func (r HandoverInfo) ID() string { return r.ReplayID }
func (r GuardInfo) ID() string    { return r.ReplayID }
func (r AckInfo) ID() string      { return r.ReplayID }
func (r ProgressInfo) ID() string { return r.ReplayID }
func (r ResultInfo) ID() string   { return r.ReplayID }

func (ReplayInfo) Kind() string   { return KindReplay }
func (StartInfo) Kind() string    { return KindStart }
func (HandoverInfo) Kind() string { return KindHandover }
func (GuardInfo) Kind() string    { return KindGuard }
func (AckInfo) Kind() string      { return KindAck }
func (ProgressInfo) Kind() string { return KindProgress }
func (ResultInfo) Kind() string   { return KindResult }

// EncodeKey is `["<replay id>","<kind>"]` or, with a partition, `[..., "<topic>", <partition>]`.
func EncodeKey(replayID, kind string, tp *TopicPartition) []byte {
	parts := []any{replayID, kind}
	if tp != nil {
		parts = append(parts, tp.Topic, int64(tp.Partition))
	}
	return Dumps(parts)
}

// KeyOf is the key a record is written under.
func KeyOf(r Record) []byte {
	switch v := r.(type) {
	case ReplayInfo, ResultInfo:
		return EncodeKey(v.ID(), v.Kind(), nil)
	case StartInfo:
		return EncodeKey(v.ReplayID, KindStart, &TopicPartition{v.Topic, v.Partition})
	case HandoverInfo:
		return EncodeKey(v.ReplayID, KindHandover, &TopicPartition{v.Topic, v.Partition})
	case GuardInfo:
		return EncodeKey(v.ReplayID, KindGuard, &TopicPartition{v.Topic, v.Partition})
	case AckInfo:
		return EncodeKey(v.ReplayID, KindAck, &TopicPartition{v.Topic, v.Partition})
	case ProgressInfo:
		return EncodeKey(v.ReplayID, KindProgress, &TopicPartition{v.Topic, v.Partition})
	}
	panic(fmt.Sprintf("protocol.KeyOf: %T", r))
}

// Encode returns the key and the compact JSON value of a record.
func Encode(r Record) (key, value []byte) {
	body := NewObject().Set("v", FormatVersion).Set("replay_id", r.ID())
	switch v := r.(type) {
	case ReplayInfo:
		var live any
		if v.LiveGroup != nil {
			live = *v.LiveGroup
		}
		filter := v.Filter
		if filter == nil {
			filter = NewObject()
		}
		topics := v.Topics
		if topics == nil {
			topics = []string{}
		}
		body.Set("kind", KindReplay).Set("mode", v.Mode).Set("replay_group", v.ReplayGroup).
			Set("live_group", live).Set("topics", topics).Set("filter", filter)
		body.Set("at_ms", v.AtMs)
	case StartInfo:
		body.Set("kind", KindStart).Set("topic", v.Topic).Set("partition", v.Partition).Set("offset", v.Offset).
			Set("end_offset", v.EndOffset).Set("end_timestamp_ms", v.EndTimestampMs).Set("clamped", v.Clamped)
		body.Set("at_ms", v.AtMs)
	case HandoverInfo:
		body.Set("kind", KindHandover).Set("topic", v.Topic).Set("partition", v.Partition).Set("offset", v.Offset).
			Set("reason", v.Reason).Set("by", v.By)
		body.Set("at_ms", v.AtMs)
	case GuardInfo:
		body.Set("kind", KindGuard).Set("topic", v.Topic).Set("partition", v.Partition).
			Set("first_skipped", v.FirstSkipped).Set("seen_until", v.SeenUntil).Set("member", v.Member)
		if v.Problem != nil {
			body.Set("problem", *v.Problem)
		}
		body.Set("at_ms", v.AtMs)
	case AckInfo:
		body.Set("kind", KindAck).Set("topic", v.Topic).Set("partition", v.Partition).Set("offset", v.Offset).
			Set("committed", v.Committed).Set("member", v.Member)
		body.Set("at_ms", v.AtMs)
	case ProgressInfo:
		body.Set("kind", KindProgress).Set("topic", v.Topic).Set("partition", v.Partition).
			Set("position", v.Position).Set("at_end", v.AtEnd).Set("member", v.Member)
		body.Set("at_ms", v.AtMs)
	case ResultInfo:
		result := v.Body
		if result == nil {
			result = NewObject()
		}
		body.Set("kind", KindResult).Set("result", result)
		body.Set("at_ms", v.AtMs)
	default:
		panic(fmt.Sprintf("protocol.Encode: %T", r))
	}
	return KeyOf(r), Dumps(body)
}

// DecodeKey parses a handover-topic key (code malformed-key when it is not one).
func DecodeKey(raw []byte) (RecordKey, error) {
	bad := func() (RecordKey, error) {
		shown := raw // a key may be megabytes, and the message reaches the logs
		if len(shown) > 200 {
			shown = shown[:200]
		}
		return RecordKey{}, formatError(CodeMalformedKey, "not a handover key (%d bytes): %q", len(raw), shown)
	}
	if raw == nil || len(raw) > MaxRecordKeyBytes || BeyondLimits(raw) || !validUTF8(raw) {
		return bad() // the limits first: the token reader has no depth limit of its own
	}
	parsed, err := ParseOrdered(raw)
	parts, ok := parsed.([]any)
	if err != nil || !ok || (len(parts) != 2 && len(parts) != 4) {
		return bad()
	}
	id, ok1 := parts[0].(string)
	kind, ok2 := parts[1].(string)
	if !ok1 || !ok2 {
		return bad()
	}
	key := RecordKey{ReplayID: id, Kind: kind}
	if len(parts) == 4 {
		topic, ok := parts[2].(string)
		partition, isInt := jsonInt(parts[3])
		if !ok || !isInt {
			return bad()
		}
		key.HasPartition, key.Topic, key.Partition = true, topic, int32(partition)
	}
	return key, nil
}

// jsonInt accepts a JSON integer only: not true/false, not 1.5 or 1.0.
func jsonInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

var recordKinds = map[string]bool{KindReplay: true, KindStart: true, KindHandover: true, KindGuard: true,
	KindAck: true, KindProgress: true, KindResult: true}

// Decode returns the record of one handover-topic message; a nil Record for a tombstone. A *FormatError
// says why a record is malformed.
func Decode(rawKey, rawValue []byte) (RecordKey, Record, error) {
	key, err := DecodeKey(rawKey)
	if err != nil {
		return key, nil, err
	}
	if rawValue == nil {
		return key, nil, nil
	}
	where := describeKey(key)
	if len(rawValue) > MaxRecordValueBytes {
		return key, nil, formatError(CodeTooLarge, "value of %s is %d bytes, more than the limit of %d", where,
			len(rawValue), MaxRecordValueBytes)
	}
	if BeyondLimits(rawValue) {
		// The code of any value that is not JSON: a value can be both, and every port must agree.
		return key, nil, formatError(CodeMalformedValue,
			"value of %s is nested deeper than %d or has an integer of more than %d digits", where, MaxDepth, MaxIntegerDigits)
	}
	parsed, err := ParseOrdered(rawValue)
	if err != nil || !validUTF8(rawValue) {
		return key, nil, formatError(CodeMalformedValue, "value of %s is not JSON", where)
	}
	v, ok := parsed.(*Object)
	version := int64(0)
	if ok {
		if raw, has := v.Get("v"); has {
			version, ok = jsonInt(raw)
		}
	}
	if !ok {
		return key, nil, formatError(CodeMalformedValue, "value of %s is not a handover record", where)
	}
	if version > FormatVersion {
		return key, nil, formatError(CodeNewerVersion, "%s has format version %d, newer than %d", where, version, FormatVersion)
	}
	if kind, _ := v.Get("kind"); kind != key.Kind {
		return key, nil, formatError(CodeKindMismatch, "value of %s does not say kind %q", where, key.Kind)
	}
	if !recordKinds[key.Kind] {
		return key, nil, formatError(CodeUnknownKind, "unknown record kind %q", key.Kind)
	}
	replayWide := key.Kind == KindReplay || key.Kind == KindResult
	if key.HasPartition == replayWide {
		return key, nil, formatError(CodeKeyMismatch, "a %s record has no key of this shape: %s", key.Kind, where)
	}
	f := fieldReader{obj: v}
	id := key.ReplayID
	at := f.intOr("at_ms", 0)
	var record Record
	switch key.Kind {
	case KindReplay:
		info := ReplayInfo{ReplayID: id, AtMs: at}
		topics := f.listOr("topics")
		for _, t := range topics {
			s, isStr := t.(string)
			if !isStr {
				f.fail("topics", "list of strings")
			}
			info.Topics = append(info.Topics, s)
		}
		info.Mode = f.str("mode")
		info.ReplayGroup = f.str("replay_group")
		info.LiveGroup = f.optStr("live_group")
		info.Filter = f.objOr("filter")
		record = info
	case KindResult:
		record = ResultInfo{ReplayID: id, Body: f.objOr("result"), AtMs: at}
	default:
		topic := f.str("topic")
		partition := int32(f.int("partition"))
		if f.err != nil {
			return key, nil, formatError(CodeBadField, "value of %s is missing or has a bad field: %v", where, f.err)
		}
		if topic != key.Topic || partition != key.Partition {
			return key, nil, formatError(CodeKeyMismatch, "value of %s names %s[%d]", where, topic, partition)
		}
		switch key.Kind {
		case KindStart:
			record = StartInfo{id, topic, partition, f.int("offset"), f.optInt("end_offset"),
				f.optInt("end_timestamp_ms"), f.boolOr("clamped"), at}
		case KindHandover:
			record = HandoverInfo{id, topic, partition, f.int("offset"), f.strOr("reason", ""),
				f.strOr("by", "replay"), at}
		case KindGuard:
			record = GuardInfo{id, topic, partition, f.optInt("first_skipped"), f.optInt("seen_until"),
				f.strOr("member", ""), at, f.optStr("problem")}
		case KindProgress:
			record = ProgressInfo{id, topic, partition, f.int("position"), f.boolOr("at_end"),
				f.strOr("member", ""), at}
		default:
			record = AckInfo{id, topic, partition, f.int("offset"), f.int("committed"), f.strOr("member", ""), at}
		}
	}
	if f.err != nil {
		return key, nil, formatError(CodeBadField, "value of %s is missing or has a bad field: %v", where, f.err)
	}
	return key, record, nil
}

func describeKey(k RecordKey) string {
	if k.HasPartition {
		return fmt.Sprintf("%s/%s/%s[%d]", k.ReplayID, k.Kind, k.Topic, k.Partition)
	}
	return fmt.Sprintf("%s/%s", k.ReplayID, k.Kind)
}

// fieldReader reads fields with their JSON types; an absent or null field gives the default, or fails
// when required. It remembers the first failure.
type fieldReader struct {
	obj *Object
	err error
}

func (f *fieldReader) fail(name, what string) {
	if f.err == nil {
		f.err = fmt.Errorf("%s is not a JSON %s", name, what)
	}
}

func (f *fieldReader) get(name string, required bool) (any, bool) {
	raw, _ := f.obj.Get(name)
	if raw == nil {
		if required && f.err == nil {
			f.err = fmt.Errorf("%q is missing", name)
		}
		return nil, false
	}
	return raw, true
}

func (f *fieldReader) int(name string) int64 {
	if p := f.intField(name, true); p != nil {
		return *p
	}
	return 0
}

func (f *fieldReader) intOr(name string, fallback int64) int64 {
	if p := f.intField(name, false); p != nil {
		return *p
	}
	return fallback
}

func (f *fieldReader) optInt(name string) *int64 { return f.intField(name, false) }

func (f *fieldReader) intField(name string, required bool) *int64 {
	raw, ok := f.get(name, required)
	if !ok {
		return nil
	}
	n, isInt := jsonInt(raw)
	if !isInt {
		f.fail(name, "int")
		return nil
	}
	return &n
}

func (f *fieldReader) str(name string) string {
	if p := f.strField(name, true); p != nil {
		return *p
	}
	return ""
}

func (f *fieldReader) strOr(name, fallback string) string {
	if p := f.strField(name, false); p != nil {
		return *p
	}
	return fallback
}

func (f *fieldReader) optStr(name string) *string { return f.strField(name, false) }

func (f *fieldReader) strField(name string, required bool) *string {
	raw, ok := f.get(name, required)
	if !ok {
		return nil
	}
	s, isStr := raw.(string)
	if !isStr {
		f.fail(name, "str")
		return nil
	}
	return &s
}

func (f *fieldReader) boolOr(name string) bool {
	raw, ok := f.get(name, false)
	if !ok {
		return false
	}
	b, isBool := raw.(bool)
	if !isBool {
		f.fail(name, "bool")
	}
	return b
}

func (f *fieldReader) listOr(name string) []any {
	raw, ok := f.get(name, false)
	if !ok {
		return nil
	}
	list, isList := raw.([]any)
	if !isList {
		f.fail(name, "list")
	}
	return list
}

func (f *fieldReader) objOr(name string) *Object {
	raw, ok := f.get(name, false)
	if !ok {
		return NewObject()
	}
	obj, isObj := raw.(*Object)
	if !isObj {
		f.fail(name, "dict")
		return NewObject()
	}
	return obj
}

// pyIntOf is Python's int() of a parsed JSON value: integers, floats truncated, booleans, numeric strings.
func pyIntOf(raw any) (int64, bool) {
	switch v := raw.(type) {
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return n, true
		}
		if fl, err := strconv.ParseFloat(string(v), 64); err == nil {
			return int64(fl), true
		}
	case string:
		if n, err := strconv.ParseInt(trimPySpace(v), 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

func trimPySpace(s string) string { return strings.TrimSpace(s) }

// pyStr is Python's str() of a parsed JSON value.
func pyStr(raw any) string {
	switch v := raw.(type) {
	case string:
		return v
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case json.Number:
		return pyNumber(v)
	}
	return string(Dumps(raw))
}

func truthy(raw any) bool {
	switch v := raw.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return err != nil || f != 0
	case []any:
		return len(v) > 0
	case *Object:
		return len(v.Keys) > 0
	}
	return true
}
