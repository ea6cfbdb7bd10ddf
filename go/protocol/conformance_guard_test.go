package protocol

// guard_traces.json, replay_start.json and replay_finish.json, run the way conformance/README.md says.

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
)

type traceRunner struct {
	t         *testing.T
	group     string
	autoStore bool
	logs      map[TopicPartition][][2][]byte
	records   [][2][]byte
	committed map[TopicPartition][2]any // offset (int64), metadata (*string)
	book      *GuardBook
	view      *HandoverView
	ticket    int64
}

func newTraceRunner(t *testing.T, sc *Object) *traceRunner {
	r := &traceRunner{t: t, group: sc.Values["live_group"].(string), autoStore: sc.Values["auto_store"].(bool),
		logs: map[TopicPartition][][2][]byte{}, committed: map[TopicPartition][2]any{}}
	for _, l := range sc.Values["logs"].([]any) {
		log := l.(*Object)
		var recs [][2][]byte
		for _, rec := range log.Values["records"].([]any) {
			o := rec.(*Object)
			recs = append(recs, [2][]byte{vbytes(t, o.Values["key"]), vbytes(t, o.Values["value"])})
		}
		r.logs[tpOfVector(log)] = recs
	}
	r.fresh()
	return r
}

func (r *traceRunner) fresh() {
	r.book = NewGuardBook(r.autoStore)
	r.view = NewHandoverView()
	for _, rec := range r.records {
		_ = r.view.Apply(rec[0], rec[1])
	}
	r.ticket = 0
}

func tpOfVector(o *Object) TopicPartition {
	return TopicPartition{Topic: o.Values["topic"].(string), Partition: int32(*vint(o.Values["partition"]))}
}

func activeOf(m map[TopicPartition]ActiveHandover, k TopicPartition) *ActiveHandover {
	if a, ok := m[k]; ok {
		return &a
	}
	return nil
}

func seeksJSON(seeks map[TopicPartition]int64) []any {
	keys := sortedKeysOf(seeks)
	out := []any{}
	for _, k := range keys {
		out = append(out, NewObject().Set("topic", k.Topic).Set("partition", k.Partition).Set("offset", seeks[k]))
	}
	return out
}

func storesJSON(stores []Store) []any {
	sorted := append([]Store{}, stores...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Topic != sorted[j].Topic {
			return sorted[i].Topic < sorted[j].Topic
		}
		return sorted[i].Partition < sorted[j].Partition
	})
	out := []any{}
	for _, s := range sorted {
		var md any
		if s.Metadata != nil {
			md = *s.Metadata
		}
		out = append(out, NewObject().Set("topic", s.Topic).Set("partition", s.Partition).Set("offset", s.Offset).Set("metadata", md))
	}
	return out
}

func (r *traceRunner) durable(stores []Store) {
	for _, s := range stores {
		r.committed[TopicPartition{s.Topic, s.Partition}] = [2]any{s.Offset, s.Metadata}
	}
}

func (r *traceRunner) step(st *Object) *Object {
	t := r.t
	out := NewObject()
	switch st.Values["op"] {
	case "handover":
		for _, rec := range st.Values["records"].([]any) {
			o := rec.(*Object)
			pair := [2][]byte{vbytes(t, o.Values["key"]), vbytes(t, o.Values["value"])}
			r.records = append(r.records, pair)
			_ = r.view.Apply(pair[0], pair[1])
		}
		out.Set("seeks", seeksJSON(r.book.Apply(r.view.ActiveFor(r.group))))
	case "assign":
		r.ticket++
		for _, p := range st.Values["partitions"].([]any) {
			o := p.(*Object)
			k := tpOfVector(o)
			committed := vint(o.Values["committed"])
			metadata := vstr(o.Values["metadata"])
			if committed != nil {
				if _, ok := r.committed[k]; !ok {
					r.committed[k] = [2]any{*committed, metadata}
				}
			}
			var mark *CommitMark
			if metadata != nil {
				mark = DecodeMark(*metadata)
			}
			r.book.Assign(k, committed, mark, r.ticket)
		}
	case "release":
		active := r.view.ActiveFor(r.group)
		seeks := map[TopicPartition]int64{}
		for _, p := range st.Values["partitions"].([]any) {
			k := tpOfVector(p.(*Object))
			if target := r.book.Release(k, activeOf(active, k)); target != nil {
				seeks[k] = *target
			}
		}
		out.Set("seeks", seeksJSON(seeks))
	case "batch":
		type fetched struct {
			k      TopicPartition
			offset int64
		}
		var records []fetched
		for _, rec := range st.Values["records"].([]any) {
			o := rec.(*Object)
			records = append(records, fetched{tpOfVector(o), *vint(o.Values["offset"])})
		}
		verdicts := []any{}
		if !r.book.Guarded() {
			positions := map[TopicPartition]int64{}
			for _, f := range records {
				positions[f.k] = f.offset + 1
				verdicts = append(verdicts, "process")
			}
			out.Set("verdicts", verdicts).Set("stores", storesJSON(r.book.HandedUnguarded(positions)))
			break
		}
		held := map[TopicPartition]bool{}
		var touched []TopicPartition
		seen := map[TopicPartition]bool{}
		for _, f := range records {
			part := r.book.Parts[f.k]
			switch {
			case part == nil || held[f.k]:
				verdicts = append(verdicts, "dropped")
			case part.Held():
				verdicts = append(verdicts, "held")
				held[f.k] = true
			default:
				if !seen[f.k] {
					seen[f.k] = true
					touched = append(touched, f.k)
				}
				rec := r.logs[f.k][f.offset]
				if r.book.Judge(f.k, f.offset, rec[0], nil, rec[1]) {
					verdicts = append(verdicts, "process")
				} else {
					verdicts = append(verdicts, "skip")
				}
			}
		}
		var stores []Store
		for _, k := range touched {
			if s := r.book.AfterBatch(k); s != nil {
				stores = append(stores, *s)
			}
		}
		out.Set("verdicts", verdicts).Set("stores", storesJSON(stores))
	case "store":
		out.Set("stores", storesJSON(r.serviceStores(st)))
	case "commit":
		var commits []Store
		if st.Values["offsets"] == nil {
			commits = r.book.StoredOffsets()
		} else {
			commits = r.serviceStores(st)
		}
		r.durable(commits)
		out.Set("commits", storesJSON(commits))
	case "tick":
		commits := r.book.TakeGuardCommits()
		r.durable(commits)
		reports := []any{}
		for _, rep := range r.book.SkipReports() {
			reports = append(reports, NewObject().Set("replay_id", rep.ReplayID).Set("topic", rep.Topic).
				Set("partition", rep.Partition).Set("first_skipped", rep.FirstSkipped).Set("seen_until", rep.SeenUntil))
		}
		problems := []any{}
		for _, p := range r.book.ProblemReports() {
			problems = append(problems, NewObject().Set("replay_id", p.ReplayID).Set("topic", p.Topic).
				Set("partition", p.Partition).Set("problem", p.Problem).Set("first_skipped", p.FirstSkipped).
				Set("seen_until", p.SeenUntil))
		}
		positions := map[TopicPartition]int64{}
		for _, p := range st.Values["positions"].([]any) {
			o := p.(*Object)
			positions[tpOfVector(o)] = *vint(o.Values["offset"])
		}
		floors := r.book.FloorCommits(func(k TopicPartition) *int64 {
			if o, ok := positions[k]; ok {
				return Int64(o)
			}
			return nil
		})
		for _, s := range floors {
			r.durable([]Store{s})
			r.book.FloorDone(s)
		}
		acks := []any{}
		pending := r.book.PendingAcks()
		for _, k := range sortedKeysOf(pending) {
			p := pending[k]
			part := r.view.Replay(p.ReplayID).Partitions[k]
			if part == nil || part.Handover == nil || part.Handover.Offset != p.Handover ||
				(part.Ack != nil && part.Ack.Offset == p.Handover) {
				continue
			}
			var committed *int64
			var mark *CommitMark
			if c, ok := r.committed[k]; ok {
				committed = Int64(c[0].(int64))
				if md, _ := c[1].(*string); md != nil {
					mark = DecodeMark(*md)
				}
			}
			if AckDue(p.Handover, committed, mark) {
				acks = append(acks, NewObject().Set("replay_id", p.ReplayID).Set("topic", k.Topic).
					Set("partition", k.Partition).Set("offset", p.Handover).Set("committed", *committed))
			}
		}
		out.Set("commits", storesJSON(commits)).Set("reports", reports).Set("problems", problems).
			Set("floor_commits", storesJSON(floors)).Set("acks", acks)
	case "revoke":
		for _, p := range st.Values["partitions"].([]any) {
			r.book.Drop(tpOfVector(p.(*Object)))
		}
	case "crash":
		r.fresh()
	default:
		t.Fatalf("unknown op %v", st.Values["op"])
	}
	return out
}

func (r *traceRunner) serviceStores(st *Object) []Store {
	var stores []Store
	for _, o := range st.Values["offsets"].([]any) {
		off := o.(*Object)
		stores = append(stores, r.book.ServiceStore(off.Values["topic"].(string), int32(*vint(off.Values["partition"])),
			*vint(off.Values["offset"]), vstr(off.Values["metadata"])))
	}
	return stores
}

func (r *traceRunner) run(steps []any, label string) {
	for i, raw := range steps {
		st := raw.(*Object)
		got := r.step(st)
		want := st.Values["expect"]
		if !reflect.DeepEqual(canonical(r.t, got), canonical(r.t, want)) {
			r.t.Fatalf("%s, step %d (%v):\n got %s\nwant %s\n(note: %v)", label, i, st.Values["op"], Dumps(got),
				Dumps(want), st.Values["note"])
		}
	}
}

func TestConformanceGuardTraces(t *testing.T) {
	file := loadVectors(t, "guard_traces.json")
	for _, sc := range cases(t, file, "scenarios") {
		steps := sc.Values["steps"].([]any)
		t.Run(name(sc), func(t *testing.T) {
			newTraceRunner(t, sc).run(steps, name(sc))
		})
		for _, c := range sc.Values["crashes"].([]any) {
			crash := c.(*Object)
			after := int(*vint(crash.Values["after_step"]))
			t.Run(fmt.Sprintf("%s/crash after step %d", name(sc), after), func(t *testing.T) {
				r := newTraceRunner(t, sc)
				r.run(steps[:after], name(sc))
				r.run(crash.Values["steps"].([]any), fmt.Sprintf("%s / crash after step %d", name(sc), after))
			})
		}
	}
}

// ---------------------------------------------------------------------------------------------- replay

func startNormal(s StartSpec) *Object {
	o := NewObject().Set("type", s.Kind)
	switch s.Kind {
	case "timestamp":
		o.Set("timestamp", s.TimestampMs)
	case "duration":
		o.Set("duration", s.DurationS)
	case "offsets":
		o.Set("offsets", offsetsNormal(s.Offsets))
	}
	return o
}

func endNormal(s EndSpec) *Object {
	o := NewObject().Set("type", s.Kind)
	switch s.Kind {
	case "timestamp":
		o.Set("timestamp", s.TimestampMs)
	case "offsets":
		o.Set("offsets", offsetsNormal(s.Offsets))
	}
	return o
}

func offsetsNormal(offsets PartitionOffsets) *Object {
	o := NewObject()
	for topic, parts := range offsets {
		p := NewObject()
		for partition, offset := range parts {
			p.Set(fmt.Sprint(partition), offset)
		}
		o.Set(topic, p)
	}
	return o
}

func specCode(err error) (string, string) {
	var se *SpecError
	if errors.As(err, &se) {
		return se.Code, se.Field
	}
	var re *StartOlderThanRetention
	if errors.As(err, &re) {
		return re.Code(), ""
	}
	return fmt.Sprintf("unexpected error %v", err), ""
}

func TestConformanceReplayStart(t *testing.T) {
	file := loadVectors(t, "replay_start.json")
	for _, c := range cases(t, file, "parse") {
		t.Run("parse/"+name(c), func(t *testing.T) {
			what := c.Values["what"].(string)
			var got any
			var err error
			if what == "start" {
				var s StartSpec
				if s, err = ParseStartSpec(c.Values["spec"], what); err == nil {
					got = startNormal(s)
				}
			} else {
				var s EndSpec
				if s, err = ParseEndSpec(c.Values["spec"], what); err == nil {
					got = endNormal(s)
				}
			}
			if want, ok := c.Values["error"].(*Object); ok {
				code, field := specCode(err)
				if err == nil || code != want.Values["code"] || field != want.Values["field"] {
					t.Fatalf("got %v (%s at %s), want error %s at %s", got, code, field, want.Values["code"], want.Values["field"])
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if !reflect.DeepEqual(canonical(t, got), canonical(t, c.Values["parsed"])) {
				t.Fatalf("got %s, want %s", Dumps(got), Dumps(c.Values["parsed"]))
			}
		})
	}
	for _, c := range cases(t, file, "decide") {
		t.Run("decide/"+name(c), func(t *testing.T) {
			start, err := ParseStartSpec(c.Values["start"], "start")
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			var end *EndSpec
			if c.Values["end"] != nil {
				e, err := ParseEndSpec(c.Values["end"], "end")
				if err != nil {
					t.Fatalf("end: %v", err)
				}
				end = &e
			}
			p := c.Values["partition"].(*Object)
			facts := PartitionFacts{Topic: p.Values["topic"].(string), Partition: int32(*vint(p.Values["partition"])),
				LogStart: *vint(p.Values["log_start"]), End: *vint(p.Values["end"]),
				TimeLookup: vint(p.Values["time_lookup"]), EndTimeLookup: vint(p.Values["end_time_lookup"])}
			now := *vint(c.Values["now_ms"])
			lookup, ok := start.LookupTimestamp(now)
			wantLookup := vint(c.Values["lookup_ms"])
			if ok != (wantLookup != nil) || (ok && lookup != *wantLookup) {
				t.Fatalf("lookup %d (%v), want %v", lookup, ok, c.Values["lookup_ms"])
			}
			d, err := DecidePartition(start, end, facts, c.Values["allow_clamp"].(bool), now, vint(c.Values["committed"]))
			if want, ok := c.Values["error"].(string); ok {
				code, _ := specCode(err)
				if err == nil || code != want {
					t.Fatalf("got %+v (%s), want error %s", d, code, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			got := NewObject().Set("offset", d.Offset).Set("clamped", d.Clamped).Set("end_offset", d.EndOffset).
				Set("end_timestamp_ms", d.EndTimestampMs)
			if !reflect.DeepEqual(canonical(t, got), canonical(t, c.Values["decision"])) {
				t.Fatalf("got %s, want %s", Dumps(got), Dumps(c.Values["decision"]))
			}
		})
	}
}

func TestConformanceReplayFinish(t *testing.T) {
	file := loadVectors(t, "replay_finish.json")
	for _, c := range cases(t, file, "finish") {
		t.Run("finish/"+name(c), func(t *testing.T) {
			reason, err := ReplayFinish(c.Values["mode"].(string), FinishInput{Position: *vint(c.Values["position"]),
				EndOffset: vint(c.Values["end_offset"]), EndTimestampMs: vint(c.Values["end_timestamp_ms"]),
				AtEnd: c.Values["at_end"].(bool), LiveCommitted: vint(c.Values["live_position"])})
			if want, ok := c.Values["error"].(string); ok {
				if err == nil || want != "unknown-mode" {
					t.Fatalf("got %q, want error %s", reason, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got any
			if reason != "" {
				got = reason
			}
			if !reflect.DeepEqual(got, c.Values["reason"]) {
				t.Fatalf("got %v, want %v", got, c.Values["reason"])
			}
		})
	}
	for _, c := range cases(t, file, "record_ends") {
		t.Run("record_ends/"+name(c), func(t *testing.T) {
			got := RecordEndsPartition(vint(c.Values["end_offset"]), vint(c.Values["end_timestamp_ms"]),
				*vint(c.Values["offset"]), vint(c.Values["timestamp_ms"]))
			if got != c.Values["ends"].(bool) {
				t.Fatalf("got %v, want %v", got, c.Values["ends"])
			}
		})
	}
}

var _ = json.Number("")
