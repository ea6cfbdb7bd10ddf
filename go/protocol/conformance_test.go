package protocol

// The shared conformance vectors (conformance/vectors/*.json, generated from the Python reference) run
// here, table-driven. A missing vector file fails: the Go port is held to every file the kit publishes.
// REPRISE_VECTORS points at another folder (a kit not merged yet).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func vectorsDir() string {
	if dir := os.Getenv("REPRISE_VECTORS"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "conformance", "vectors")
}

// loadVectors reads one vector file with member order kept (filters are compared byte for byte).
func loadVectors(t *testing.T, name string) *Object {
	t.Helper()
	path := filepath.Join(vectorsDir(), name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("conformance vector file %s is missing (set REPRISE_VECTORS to the kit's folder): %v", path, err)
	}
	parsed, err := ParseOrdered(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	body, ok := parsed.(*Object)
	if !ok {
		t.Fatalf("%s: not a JSON object", path)
	}
	if v, _ := body.Get("format"); fmt.Sprint(v) != "1" {
		t.Fatalf("%s: vector format %v, this runner reads 1", path, v)
	}
	return body
}

func cases(t *testing.T, file *Object, section string) []*Object {
	t.Helper()
	raw, ok := file.Get(section)
	if !ok {
		t.Fatalf("vector file has no section %q", section)
	}
	list, _ := raw.([]any)
	if len(list) == 0 {
		t.Fatalf("section %q has no cases", section)
	}
	out := make([]*Object, 0, len(list))
	for _, c := range list {
		out = append(out, c.(*Object))
	}
	return out
}

func name(c *Object) string { return c.Values["name"].(string) }

// vbytes decodes the vectors' bytes: {"utf8": ...}, {"base64": ...} or {"utf8_repeat": [[text, n], ...]}; null is
// absent.
func vbytes(t *testing.T, v any) []byte {
	t.Helper()
	if v == nil {
		return nil
	}
	obj := v.(*Object)
	if parts, ok := obj.Values["utf8_repeat"].([]any); ok && len(obj.Keys) == 1 {
		var out []byte
		for _, part := range parts {
			pair := part.([]any)
			times, err := pair[1].(json.Number).Int64()
			if err != nil {
				t.Fatalf("bad utf8_repeat count %v: %v", pair[1], err)
			}
			out = append(out, bytes.Repeat([]byte(pair[0].(string)), int(times))...)
		}
		return out
	}
	if s, ok := obj.Values["utf8"].(string); ok && len(obj.Keys) == 1 {
		return []byte(s)
	}
	if s, ok := obj.Values["base64"].(string); ok && len(obj.Keys) == 1 {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("bad base64 %q: %v", s, err)
		}
		return b
	}
	t.Fatalf("not a bytes value: %s", Dumps(v))
	return nil
}

func vheaders(t *testing.T, v any) []Header {
	if v == nil {
		return nil
	}
	out := []Header{}
	for _, item := range v.([]any) {
		pair := item.([]any)
		out = append(out, Header{Key: pair[0].(string), Value: vbytes(t, pair[1])})
	}
	return out
}

func vint(v any) *int64 {
	if v == nil {
		return nil
	}
	n, ok := jsonInt(v)
	if !ok {
		panic(fmt.Sprintf("not an integer: %v", v))
	}
	return &n
}

func vstr(v any) *string {
	if v == nil {
		return nil
	}
	s := v.(string)
	return &s
}

// canonical turns any JSON-able value into a comparable form (object order ignored).
func canonical(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(Dumps(v), &out); err != nil {
		t.Fatalf("canonical: %v", err)
	}
	return out
}

// ---------------------------------------------------------------------------------------------- wire

func recordFromVector(t *testing.T, r *Object) Record {
	t.Helper()
	get := func(k string) any { return r.Values[k] }
	id := get("replay_id").(string)
	at := *vint(get("at_ms"))
	switch get("kind") {
	case KindReplay:
		topics := []string{}
		for _, x := range get("topics").([]any) {
			topics = append(topics, x.(string))
		}
		return ReplayInfo{id, get("mode").(string), get("replay_group").(string), vstr(get("live_group")), topics,
			get("filter").(*Object), at}
	case KindResult:
		return ResultInfo{id, get("result").(*Object), at}
	}
	topic, partition := get("topic").(string), int32(*vint(get("partition")))
	switch get("kind") {
	case KindStart:
		return StartInfo{id, topic, partition, *vint(get("offset")), vint(get("end_offset")),
			vint(get("end_timestamp_ms")), get("clamped").(bool), at}
	case KindHandover:
		return HandoverInfo{id, topic, partition, *vint(get("offset")), get("reason").(string), get("by").(string), at}
	case KindGuard:
		return GuardInfo{id, topic, partition, vint(get("first_skipped")), vint(get("seen_until")),
			get("member").(string), at, vstr(get("problem"))}
	case KindAck:
		return AckInfo{id, topic, partition, *vint(get("offset")), *vint(get("committed")), get("member").(string), at}
	case KindProgress:
		return ProgressInfo{id, topic, partition, *vint(get("position")), get("at_end").(bool), get("member").(string), at}
	}
	t.Fatalf("unknown kind in vector: %v", get("kind"))
	return nil
}

// recordAsVector is the vectors' JSON form of a decoded record.
func recordAsVector(r Record) *Object {
	o := NewObject().Set("replay_id", r.ID()).Set("kind", r.Kind())
	switch v := r.(type) {
	case ReplayInfo:
		var live any
		if v.LiveGroup != nil {
			live = *v.LiveGroup
		}
		topics := v.Topics
		if topics == nil {
			topics = []string{}
		}
		o.Set("mode", v.Mode).Set("replay_group", v.ReplayGroup).Set("live_group", live).Set("topics", topics).
			Set("filter", v.Filter).Set("at_ms", v.AtMs)
	case ResultInfo:
		o.Set("result", v.Body).Set("at_ms", v.AtMs)
	case StartInfo:
		o.Set("topic", v.Topic).Set("partition", v.Partition).Set("offset", v.Offset).Set("end_offset", v.EndOffset).
			Set("end_timestamp_ms", v.EndTimestampMs).Set("clamped", v.Clamped).Set("at_ms", v.AtMs)
	case HandoverInfo:
		o.Set("topic", v.Topic).Set("partition", v.Partition).Set("offset", v.Offset).Set("reason", v.Reason).
			Set("by", v.By).Set("at_ms", v.AtMs)
	case GuardInfo:
		o.Set("topic", v.Topic).Set("partition", v.Partition).Set("first_skipped", v.FirstSkipped).
			Set("seen_until", v.SeenUntil).Set("member", v.Member).Set("at_ms", v.AtMs)
		if v.Problem != nil {
			o.Set("problem", *v.Problem)
		}
	case AckInfo:
		o.Set("topic", v.Topic).Set("partition", v.Partition).Set("offset", v.Offset).Set("committed", v.Committed).
			Set("member", v.Member).Set("at_ms", v.AtMs)
	case ProgressInfo:
		o.Set("topic", v.Topic).Set("partition", v.Partition).Set("position", v.Position).Set("at_end", v.AtEnd).
			Set("member", v.Member).Set("at_ms", v.AtMs)
	}
	return o
}

func TestConformanceWire(t *testing.T) {
	file := loadVectors(t, "wire.json")
	for _, c := range cases(t, file, "encode") {
		t.Run("encode/"+name(c), func(t *testing.T) {
			record := recordFromVector(t, c.Values["record"].(*Object))
			key, value := Encode(record)
			if want := vbytes(t, c.Values["key"]); string(key) != string(want) {
				t.Errorf("key\n got %s\nwant %s", key, want)
			}
			if want := vbytes(t, c.Values["value"]); string(value) != string(want) {
				t.Errorf("value\n got %s\nwant %s", value, want)
			}
		})
	}
	for _, c := range cases(t, file, "decode") {
		t.Run("decode/"+name(c), func(t *testing.T) {
			key, record, err := Decode(vbytes(t, c.Values["key"]), vbytes(t, c.Values["value"]))
			if code, ok := c.Values["error"].(string); ok {
				var fe *FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("want error %s, got record %+v (err %v)", code, record, err)
				}
				if fe.Code != code {
					t.Fatalf("want error %s, got %s (%s)", code, fe.Code, fe.Message)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			pk := c.Values["parsed_key"].(*Object)
			gotKey := NewObject().Set("replay_id", key.ReplayID).Set("kind", key.Kind)
			if key.HasPartition {
				gotKey.Set("topic", key.Topic).Set("partition", key.Partition)
			} else {
				gotKey.Set("topic", nil).Set("partition", nil)
			}
			if !reflect.DeepEqual(canonical(t, gotKey), canonical(t, pk)) {
				t.Errorf("key\n got %s\nwant %s", Dumps(gotKey), Dumps(pk))
			}
			want := c.Values["record"]
			if want == nil {
				if record != nil {
					t.Fatalf("want a tombstone, got %+v", record)
				}
				return
			}
			if record == nil {
				t.Fatalf("want %s, got a tombstone", Dumps(want))
			}
			got := recordAsVector(record)
			if !reflect.DeepEqual(canonical(t, got), canonical(t, want)) {
				t.Errorf("record\n got %s\nwant %s", Dumps(got), Dumps(want))
			}
		})
	}
}

// ---------------------------------------------------------------------------------------------- marks

func markFromVector(o *Object) CommitMark {
	return CommitMark{ReplayID: o.Values["replay"].(string), Finished: vstr(o.Values["finished"]),
		SkipFrom: vint(o.Values["skip_from"]), RereadUntil: vint(o.Values["reread_until"])}
}

func TestConformanceCommitMarks(t *testing.T) {
	file := loadVectors(t, "commit_marks.json")
	for _, c := range cases(t, file, "encode") {
		t.Run("encode/"+name(c), func(t *testing.T) {
			mark := markFromVector(c.Values["mark"].(*Object))
			if got, want := mark.Encode(), c.Values["metadata"].(string); got != want {
				t.Errorf("got %s\nwant %s", got, want)
			}
			if got, want := mark.Committed(), c.Values["committed"].(string); got != want {
				t.Errorf("committed: got %q\nwant %q", got, want)
			}
		})
	}
	for _, c := range cases(t, file, "decode") {
		t.Run("decode/"+name(c), func(t *testing.T) {
			text, _ := c.Values["metadata"].(string)
			got := DecodeMark(text)
			switch c.Values["result"] {
			case "none":
				if got != nil {
					t.Fatalf("want no mark, got %+v", got)
				}
			case "unusable":
				if got == nil || got.Usable() || got.Problem != c.Values["reason"] {
					t.Fatalf("want unusable (%v), got %+v", c.Values["reason"], got)
				}
			case "mark":
				want := markFromVector(c.Values["mark"].(*Object))
				if got == nil || !got.Usable() || !reflect.DeepEqual(*got, want) {
					t.Fatalf("want %+v, got %+v", want, got)
				}
			default:
				t.Fatalf("unknown result %v", c.Values["result"])
			}
		})
	}
}

// ---------------------------------------------------------------------------------------------- filters

func TestConformanceFilters(t *testing.T) {
	file := loadVectors(t, "filters.json")
	for _, c := range cases(t, file, "cases") {
		t.Run(name(c), func(t *testing.T) {
			spec, err := ParseFilterSpec(c.Values["filter"], "")
			if err != nil {
				t.Fatalf("filter: %v", err)
			}
			filter, err := CompileFilter(spec)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			ok, err := filter.Match(vbytes(t, c.Values["key"]), vheaders(t, c.Values["headers"]), vbytes(t, c.Values["value"]))
			got := "no-match"
			switch {
			case err != nil && errors.Is(err, ErrUndecodable):
				got = "undecodable"
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			case ok:
				got = "match"
			}
			if want := c.Values["result"]; got != want {
				t.Fatalf("got %s, want %v", got, want)
			}
		})
	}
	for _, c := range cases(t, file, "invalid") {
		t.Run("invalid/"+name(c), func(t *testing.T) {
			_, err := ParseFilterSpec(c.Values["filter"], "")
			if err == nil {
				_, err = PublishedFilter(c.Values["filter"])
			}
			var fe *FilterSpecError
			if !errors.As(err, &fe) {
				t.Fatalf("want an error, got %v", err)
			}
			want := c.Values["error"].(*Object)
			if fe.Code != want.Values["code"] || fe.Field != want.Values["field"] {
				t.Fatalf("got %s at %s (%s), want %v at %v", fe.Code, fe.Field, fe.Message, want.Values["code"], want.Values["field"])
			}
		})
	}
}

// ------------------------------------------------------------------------------ schema filters (not yet)

// TestConformanceSchemaFiltersNotSupportedYet declares what this port does with schema_filters.json today: it
// does not read Avro or Protobuf values yet, so it refuses every filter there as naming an unknown field
// (valueFormat, registry). A guard that cannot compile a published filter skips nothing for its replay
// (at-least-once, never loss; HANDOVER.md section 4), and the operator refuses such a resource for
// `consumer.entrypoint: Service`. When this port learns the formats, this test becomes the file's runner.
func TestConformanceSchemaFiltersNotSupportedYet(t *testing.T) {
	file := loadVectors(t, "schema_filters.json")
	for _, section := range []string{"cases", "invalid"} {
		for _, c := range cases(t, file, section) {
			t.Run(section+"/"+name(c), func(t *testing.T) {
				_, err := PublishedFilter(c.Values["filter"])
				var fe *FilterSpecError
				if !errors.As(err, &fe) || fe.Code != "unknown-field" {
					t.Fatalf("want the filter refused with code unknown-field (not supported yet), got %v", err)
				}
			})
		}
	}
}
