// Command reprise-replay-testee is the Go testee of the one replay-trace runner
// (conformance/REPLAY_TRACES.md, "Testees"): one JSON step per line on stdin, applied to a
// protocol.ReplayBook, its outputs as one JSON line on stdout. The step semantics are the document's;
// this program only translates between the steps and the book's calls, as the Python BookTestee does.
//
//	python -m tests.unit.conformance.replay_trace_runner -- go run ./go/cmd/reprise-replay-testee
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"reprise.io/kafka/protocol"
)

type tp struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (t tp) key() protocol.TopicPartition {
	return protocol.TopicPartition{Topic: t.Topic, Partition: t.Partition}
}

type planned struct {
	tp
	Start          int64  `json:"start"`
	EndOffset      *int64 `json:"end_offset"`
	EndTimestampMs *int64 `json:"end_timestamp_ms"`
}

type config struct {
	ReplayID        string    `json:"replay_id"`
	Mode            string    `json:"mode"`
	Follow          bool      `json:"follow"`
	Transactional   bool      `json:"transactional"`
	DeadLetterTopic *string   `json:"dead_letter_topic"`
	Plan            []planned `json:"plan"`
}

// item is a `read` step's item; it is the book's ConsumedItem.
type item struct {
	tp
	Kind      string `json:"kind"`
	Offset    int64  `json:"offset"`
	Timestamp *int64 `json:"timestamp"`
	Filter    string `json:"filter"`
	Fails     bool   `json:"fails"`
}

func (i *item) Where() protocol.TopicPartition { return i.key() }
func (i *item) At() int64                      { return i.Offset }
func (i *item) EndOfPartition() bool           { return i.Kind == "end" }
func (i *item) TimestampMs() (int64, bool) {
	if i.Timestamp == nil {
		return 0, false
	}
	return *i.Timestamp, true
}

type offset struct {
	tp
	Offset    int64   `json:"offset"`
	Committed *int64  `json:"committed"`
	Metadata  *string `json:"metadata"`
}

type step struct {
	Op         string   `json:"op"`
	Config     *config  `json:"config"`
	Partitions []offset `json:"partitions"`
	Items      []*item  `json:"items"`
	InFlight   bool     `json:"in_flight"`
	SyncCommit string   `json:"sync_commit"`
	ID         int      `json:"id"`
	OK         bool     `json:"ok"`
	Offsets    []offset `json:"offsets"`
	Handovers  []offset `json:"handovers"`
	Guards     []offset `json:"guards"`
}

type answer map[string]any

type testee struct {
	config     config
	book       *protocol.ReplayBook
	unanswered map[int]*protocol.BookCommit
}

func (t *testee) fresh() {
	plan := map[protocol.TopicPartition]protocol.PlannedPartition{}
	for _, p := range t.config.Plan {
		plan[p.key()] = protocol.PlannedPartition{Start: p.Start, EndOffset: p.EndOffset, EndTimestampMs: p.EndTimestampMs}
	}
	mode := t.config.Mode
	if mode == "" {
		mode = protocol.ModeDrain
	}
	t.book = protocol.NewReplayBook(t.config.ReplayID, mode, plan, t.config.Follow, t.config.Transactional)
	t.unanswered = map[int]*protocol.BookCommit{}
}

func tpJSON(k protocol.TopicPartition) answer {
	return answer{"topic": k.Topic, "partition": k.Partition}
}

func commitJSON(c *protocol.BookCommit) answer {
	offsets := make([]answer, 0, len(c.Offsets))
	for _, o := range c.Offsets {
		offsets = append(offsets, answer{"topic": o.Topic, "partition": o.Partition, "offset": o.Offset, "metadata": o.Metadata})
	}
	return answer{"id": c.ID, "sync": c.Sync, "offsets": offsets}
}

func records(items []protocol.ConsumedItem) []answer {
	out := make([]answer, 0, len(items))
	for _, i := range items {
		out = append(out, answer{"topic": i.Where().Topic, "partition": i.Where().Partition, "offset": i.At()})
	}
	return out
}

func handoversJSON(hs []protocol.Handover) (handovers, pauses []answer) {
	for _, h := range hs {
		handovers = append(handovers, answer{"topic": h.Topic, "partition": h.Partition, "offset": h.Offset, "reason": h.Reason})
		pauses = append(pauses, tpJSON(h.TopicPartition))
	}
	return handovers, pauses
}

func keys(ps []offset) []protocol.TopicPartition {
	out := make([]protocol.TopicPartition, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.key())
	}
	return out
}

func offsetMap(ps []offset) map[protocol.TopicPartition]int64 {
	out := map[protocol.TopicPartition]int64{}
	for _, p := range ps {
		out[p.key()] = p.Offset
	}
	return out
}

func sortByTP(items []answer) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a["topic"].(string) != b["topic"].(string) {
			return a["topic"].(string) < b["topic"].(string)
		}
		return a["partition"].(int32) < b["partition"].(int32)
	})
}

// made: a commit the book asked for, made; a sync one answered at once, an asynchronous one sent.
func (t *testee) made(c *protocol.BookCommit, ok bool) answer {
	if c.Sync {
		t.book.Committed(c, ok)
	} else {
		t.book.Committed(c, true)
		t.unanswered[c.ID] = c
	}
	return commitJSON(c)
}

func (t *testee) apply(s *step) (answer, error) {
	b := t.book
	ok := s.SyncCommit == "" || s.SyncCommit == "ok"
	switch s.Op {
	case "scenario":
		if s.Config == nil {
			return nil, fmt.Errorf("scenario without config")
		}
		t.config = *s.Config
		t.fresh()
		return answer{}, nil
	case "crash":
		t.fresh()
		return answer{}, nil
	case "assign":
		var commits, handovers, pauses []answer
		for _, p := range s.Partitions {
			metadata := ""
			if p.Metadata != nil {
				metadata = *p.Metadata
			}
			a := b.Assign(p.key(), p.Committed, metadata)
			if a.StartCommit != nil {
				commits = append(commits, commitJSON(a.StartCommit))
			}
			if a.Handover != nil {
				h, _ := handoversJSON([]protocol.Handover{*a.Handover})
				handovers = append(handovers, h...)
			}
			if a.Pause {
				pauses = append(pauses, tpJSON(p.key()))
			}
		}
		sortByTP(handovers)
		sortByTP(pauses)
		return answer{"commits": commits, "handovers": handovers, "pauses": pauses, "done": b.Done()}, nil
	case "read":
		items := make([]protocol.ConsumedItem, 0, len(s.Items))
		for _, i := range s.Items {
			items = append(items, i)
		}
		b.Read(items)
		return answer{}, nil
	case "deliver":
		return t.deliver(s, ok)
	case "commit_result":
		c, has := t.unanswered[s.ID]
		if !has {
			return nil, fmt.Errorf("no unanswered commit %d", s.ID)
		}
		delete(t.unanswered, s.ID)
		var failed []protocol.TopicPartition
		if !s.OK {
			for _, o := range c.Offsets {
				failed = append(failed, protocol.TopicPartition{Topic: o.Topic, Partition: o.Partition})
			}
		}
		b.Answered(failed)
		return answer{}, nil
	case "revoke":
		c, dropped := b.Revoke(keys(s.Partitions))
		var commits []answer
		if c != nil {
			commits = append(commits, t.made(c, ok))
		}
		return answer{"commits": commits, "dropped": records(dropped)}, nil
	case "lost":
		return answer{"dropped": records(b.Lost(keys(s.Partitions)))}, nil
	case "live":
		b.Live = offsetMap(s.Offsets)
		return answer{}, nil
	case "view":
		b.Published, b.Guards = offsetMap(s.Handovers), offsetMap(s.Guards)
		return answer{}, nil
	case "ends":
		return answer{}, nil // end offsets are for lag metrics: no rule reads them
	case "tick":
		var progress []answer
		for _, p := range b.Progress() {
			progress = append(progress, answer{"topic": p.Topic, "partition": p.Partition, "committed": p.Committed, "at_end": p.AtEnd})
		}
		return answer{"progress": progress}, nil
	case "progress_failed":
		b.ProgressFailed()
		return answer{}, nil
	case "stop":
		c, flush := b.Checkpoint(nil, true)
		if c == nil {
			return answer{"flush": flush}, nil
		}
		return answer{"commits": []answer{t.made(c, ok)}}, nil
	}
	return nil, fmt.Errorf("unknown op %q", s.Op)
}

func (t *testee) deliver(s *step, ok bool) (answer, error) {
	b := t.book
	taken, dropped := b.Take()
	out := answer{"dropped": records(dropped)}
	var commits []answer
	if b.AnythingToDeliver(len(taken)) {
		var handled, failed, undecodable []protocol.ConsumedItem
		for _, c := range taken {
			switch i := c.(*item); i.Filter {
			case "", "match":
				handled = append(handled, i)
				if i.Fails {
					failed = append(failed, i)
				}
			case "undecodable":
				undecodable = append(undecodable, i)
			}
		}
		out["handled"] = records(handled)
		poison := records(append(failed, undecodable...))
		if t.config.DeadLetterTopic != nil && *t.config.DeadLetterTopic != "" {
			out["dead_letters"] = poison
		} else {
			out["poison_skipped"] = poison
		}
		b.EndPositions()
		c, flush := b.Checkpoint(func() bool { return s.InFlight }, false)
		if c != nil {
			commits = append(commits, t.made(c, ok))
		}
		out["flush"] = flush
	}
	finishing, err := b.Decide()
	if err != nil {
		return nil, err
	}
	if finishing != nil {
		commits = append(commits, commitJSON(finishing.Commit))
		b.Committed(finishing.Commit, ok)
		out["handovers"], out["pauses"] = handoversJSON(b.Finished(finishing, ok))
	}
	if c := b.Resealing(); c != nil {
		commits = append(commits, t.made(c, ok))
	}
	out["commits"] = commits
	out["done"] = b.Done()
	return out, nil
}

// compact drops the empty outputs (an absent key equals its empty value).
func compact(a answer) answer {
	out := answer{}
	for k, v := range a {
		switch x := v.(type) {
		case nil:
			continue
		case bool:
			if !x {
				continue
			}
		case []answer:
			if len(x) == 0 {
				continue
			}
		}
		out[k] = v
	}
	return out
}

func main() {
	t := &testee{}
	t.fresh()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var s step
		var a answer
		if err := json.Unmarshal(in.Bytes(), &s); err != nil {
			a = answer{"error": "not a step: " + err.Error()}
		} else if res, err := t.apply(&s); err != nil {
			a = answer{"error": err.Error()}
		} else {
			a = compact(res)
		}
		line, _ := json.Marshal(a)
		out.Write(append(line, '\n'))
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
