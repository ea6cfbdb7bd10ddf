// Package protocol is the Reprise handover protocol (replay_worker/HANDOVER.md) as pure Go: the records of
// the handover topic, the commit marks, the filter, the guard's rules and bookkeeping, the replay's start
// and finish decisions. Nothing here talks to Kafka; the guard and the replay role are the thin I/O around
// it. The shared conformance vectors hold it to the Python reference.
//
// This file owns the wire format of the handover topic (HANDOVER.md section 2): keys, values, tombstones.
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

func formatError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
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
	FirstSkipped int64
	SeenUntil    int64
	Member       string
	AtMs         int64
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

// DecodeKey parses a handover-topic key.
func DecodeKey(raw []byte) (RecordKey, error) {
	if raw == nil {
		return RecordKey{}, formatError("not a handover key: None")
	}
	var parts []json.RawMessage
	if !validUTF8(raw) || json.Unmarshal(raw, &parts) != nil || (len(parts) != 2 && len(parts) != 4) {
		return RecordKey{}, formatError("not a handover key: %q", raw)
	}
	var id, kind string
	if json.Unmarshal(parts[0], &id) != nil || json.Unmarshal(parts[1], &kind) != nil {
		return RecordKey{}, formatError("not a handover key: %q", raw)
	}
	key := RecordKey{ReplayID: id, Kind: kind}
	if len(parts) == 4 {
		var topic string
		if json.Unmarshal(parts[2], &topic) != nil {
			return RecordKey{}, formatError("not a handover key: %q", raw)
		}
		partition, ok := pyInt(parts[3])
		if !ok {
			return RecordKey{}, formatError("not a handover key: %q", raw)
		}
		key.HasPartition, key.Topic, key.Partition = true, topic, int32(partition)
	}
	return key, nil
}

// pyInt accepts what Python's isinstance(x, int) accepts in parsed JSON: an integer literal (and booleans,
// which Python counts as ints).
func pyInt(raw json.RawMessage) (int64, bool) {
	text := string(bytes.TrimSpace(raw))
	switch text {
	case "true":
		return 1, true
	case "false":
		return 0, true
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err == nil
}

// Decode returns the record of one handover-topic message; a nil Record for a tombstone.
func Decode(rawKey, rawValue []byte) (RecordKey, Record, error) {
	key, err := DecodeKey(rawKey)
	if err != nil {
		return key, nil, err
	}
	if rawValue == nil {
		return key, nil, nil
	}
	where := describeKey(key)
	parsed, err := ParseOrdered(rawValue)
	if err != nil || !validUTF8(rawValue) {
		return key, nil, formatError("value of %s is not JSON", where)
	}
	v, ok := parsed.(*Object)
	if !ok {
		return key, nil, formatError("value of %s does not say kind %q", where, key.Kind)
	}
	if kind, _ := v.Get("kind"); kind != key.Kind {
		return key, nil, formatError("value of %s does not say kind %q", where, key.Kind)
	}
	fields := fieldReader{obj: v}
	version := fields.intOr("v", 0)
	if fields.err != nil {
		return key, nil, formatError("value of %s is missing or has a bad field: %v", where, fields.err)
	}
	if version > FormatVersion {
		raw, _ := v.Get("v")
		return key, nil, formatError("%s has format version %s, newer than %d", where, Dumps(raw), FormatVersion)
	}
	id := key.ReplayID
	at := fields.intOr("at_ms", 0)
	var record Record
	switch key.Kind {
	case KindReplay:
		info := ReplayInfo{ReplayID: id, Mode: fields.str("mode"), ReplayGroup: fields.str("replay_group"), AtMs: at}
		if live, ok := v.Get("live_group"); ok && live != nil {
			s := pyStr(live)
			info.LiveGroup = &s
		}
		if topics, ok := v.Get("topics"); ok && topics != nil {
			list, isList := topics.([]any)
			if !isList {
				fields.fail("topics")
			}
			for _, t := range list {
				info.Topics = append(info.Topics, pyStr(t))
			}
		}
		info.Filter = NewObject()
		if f, ok := v.Get("filter"); ok && f != nil && f != false {
			obj, isObj := f.(*Object)
			if !isObj {
				fields.fail("filter")
			} else {
				info.Filter = obj
			}
		}
		record = info
	case KindResult:
		info := ResultInfo{ReplayID: id, Body: NewObject(), AtMs: at}
		if r, ok := v.Get("result"); ok && r != nil {
			obj, isObj := r.(*Object)
			if !isObj {
				fields.fail("result")
			} else {
				info.Body = obj
			}
		}
		record = info
	default:
		topic := fields.str("topic")
		partition := int32(fields.int("partition"))
		if fields.err != nil {
			return key, nil, formatError("value of %s is missing or has a bad field: %v", where, fields.err)
		}
		if !key.HasPartition || topic != key.Topic || partition != key.Partition {
			return key, nil, formatError("value of %s names %s[%d]", where, topic, partition)
		}
		switch key.Kind {
		case KindStart:
			record = StartInfo{id, topic, partition, fields.int("offset"), fields.optInt("end_offset"),
				fields.optInt("end_timestamp_ms"), fields.truthy("clamped"), at}
		case KindHandover:
			record = HandoverInfo{id, topic, partition, fields.int("offset"), fields.strOr("reason", ""),
				fields.strOr("by", "replay"), at}
		case KindGuard:
			record = GuardInfo{id, topic, partition, fields.int("first_skipped"), fields.int("seen_until"),
				fields.strOr("member", ""), at}
		case KindProgress:
			record = ProgressInfo{id, topic, partition, fields.int("position"), fields.truthy("at_end"),
				fields.strOr("member", ""), at}
		case KindAck:
			record = AckInfo{id, topic, partition, fields.int("offset"), fields.int("committed"),
				fields.strOr("member", ""), at}
		default:
			return key, nil, formatError("unknown record kind %q", key.Kind)
		}
	}
	if fields.err != nil {
		return key, nil, formatError("value of %s is missing or has a bad field: %v", where, fields.err)
	}
	return key, record, nil
}

func describeKey(k RecordKey) string {
	if k.HasPartition {
		return fmt.Sprintf("%s/%s/%s[%d]", k.ReplayID, k.Kind, k.Topic, k.Partition)
	}
	return fmt.Sprintf("%s/%s", k.ReplayID, k.Kind)
}

// fieldReader reads fields the way the reference's int()/str()/bool() conversions do, remembering the
// first failure.
type fieldReader struct {
	obj *Object
	err error
}

func (f *fieldReader) fail(name string) {
	if f.err == nil {
		f.err = fmt.Errorf("field %q", name)
	}
}

func (f *fieldReader) int(name string) int64 {
	raw, ok := f.obj.Get(name)
	if !ok {
		f.fail(name)
		return 0
	}
	n, ok := pyIntOf(raw)
	if !ok {
		f.fail(name)
	}
	return n
}

func (f *fieldReader) intOr(name string, fallback int64) int64 {
	raw, ok := f.obj.Get(name)
	if !ok || raw == nil || raw == false || raw == "" {
		return fallback
	}
	if num, isNum := raw.(json.Number); isNum && (string(num) == "0" || string(num) == "0.0") {
		return fallback
	}
	n, ok := pyIntOf(raw)
	if !ok {
		f.fail(name)
	}
	return n
}

func (f *fieldReader) optInt(name string) *int64 {
	raw, ok := f.obj.Get(name)
	if !ok || raw == nil {
		return nil
	}
	n, ok := pyIntOf(raw)
	if !ok {
		f.fail(name)
		return nil
	}
	return &n
}

func (f *fieldReader) str(name string) string {
	raw, ok := f.obj.Get(name)
	if !ok {
		f.fail(name)
		return ""
	}
	return pyStr(raw)
}

func (f *fieldReader) strOr(name, fallback string) string {
	raw, ok := f.obj.Get(name)
	if !ok {
		return fallback
	}
	return pyStr(raw)
}

func (f *fieldReader) truthy(name string) bool {
	raw, _ := f.obj.Get(name)
	return truthy(raw)
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

func trimPySpace(s string) string { return string(bytes.TrimSpace([]byte(s))) }

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
