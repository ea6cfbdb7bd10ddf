"""replay_traces.json: the replay side's bookkeeping (`ReplayBook`), step by step, for one replica of the replay
group (HANDOVER.md sections 1 and 5; the format and every step's rules: conformance/REPLAY_TRACES.md).

`BookTestee` applies one JSON step to a `ReplayBook` and answers its outputs: the Python testee of the one trace
runner (tests/unit/conformance/replay_trace_runner.py), which drives the Java and Go testees the same way.

Each scenario is a script of actions run against a simulated consumer: a log per partition (which can grow
while the handler runs: steady traffic), the consumer's fetch positions and end-of-partition events, the
group's committed offsets and what the handover topic holds. Running it produces the steps and, through the
testee, their expected outputs. Every scenario is also cut after every step: the worker crashes (the book is
lost, unanswered asynchronous commits too), a new one is assigned the partitions with what was committed, and
the rest of the script runs. Every run ends by reading each partition to its end, and is checked: no matching
record below a partition's final H was left unprocessed, and a run with a crash finishes as the run without.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..replay.replay_book import Commit, ConsumedItem, Offset, PlannedPartition, ReplayBook
from .crash_script import Action, run

TOPIC = "orders"
RID = "shop/orders-fix/1"
P0, P1, P2 = (TOPIC, 0), (TOPIC, 1), (TOPIC, 2)
TP = tuple[str, int]
#: Record timestamps: a record's is BASE_MS + 1000 * its offset.
BASE_MS = 1_700_000_000_000


def _tp(key: TP) -> dict[str, Any]:
    return {"topic": key[0], "partition": key[1]}


def _key(item: dict[str, Any]) -> TP:
    return item["topic"], item["partition"]


# -- the testee: one JSON step in, its outputs out


class TraceItem:
    """A `read` step's item, read through the methods of confluent-kafka's Message (what the book reads)."""

    __slots__ = ("_topic", "_partition", "_offset", "kind", "_timestamp", "filter", "fails")

    def __init__(self, item: dict[str, Any]) -> None:
        self._topic, self._partition, self._offset = item["topic"], item["partition"], item["offset"]
        self.kind = item["kind"]
        self._timestamp = item.get("timestamp")
        self.filter = item.get("filter", "match")
        self.fails = bool(item.get("fails", False))

    def error(self) -> object | None:
        return "end-of-partition" if self.kind == "end" else None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp) if self._timestamp is not None else (0, -1)

    def json(self) -> dict[str, Any]:
        return {"topic": self._topic, "partition": self._partition, "offset": self._offset}


def _offset_json(offset: Offset) -> dict[str, Any]:
    return {"topic": offset.topic, "partition": offset.partition, "offset": offset.offset, "metadata": offset.metadata}


def _commit_json(commit: Commit) -> dict[str, Any]:
    return {"id": commit.id, "sync": commit.sync, "offsets": [_offset_json(o) for o in commit.offsets]}


def _records(items: Iterable[ConsumedItem]) -> list[dict[str, Any]]:
    return [item.json() for item in items]  # type: ignore[attr-defined]


def _sorted(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda i: (i["topic"], i["partition"]))


class BookTestee:
    """The Python testee: a ReplayBook driven by JSON steps (conformance/REPLAY_TRACES.md, "Testees")."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.book = self._fresh()
        #: Asynchronous commits not answered yet, by id.
        self.unanswered: dict[int, Commit] = {}

    def _fresh(self) -> ReplayBook:
        c = self.config
        plan = {
            _key(p): PlannedPartition(p["start"], p.get("end_offset"), p.get("end_timestamp_ms"))
            for p in c.get("plan", [])
        }
        return ReplayBook(
            c.get("replay_id", ""),
            c.get("mode", "Drain"),
            plan,
            follow=bool(c.get("follow", False)),
            transactional=bool(c.get("transactional", False)),
        )

    def send(self, step: dict[str, Any]) -> dict[str, Any]:
        """One step in, its outputs out (only the non-empty ones)."""
        op = step.get("op")
        method = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if method is None:
            return {"error": f"unknown op {op!r}"}
        out: dict[str, Any] = method(step)
        return {k: v for k, v in out.items() if v not in ([], False, None)}

    def line(self, text: str) -> str:
        """The stdin/stdout protocol: one JSON line in, one out."""
        try:
            step = json.loads(text)
        except ValueError as exc:
            return json.dumps({"error": f"not JSON: {exc}"})
        try:
            return json.dumps(self.send(step), separators=(",", ":"))
        except (KeyError, TypeError, ValueError) as exc:
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})

    # -- steps

    def op_scenario(self, step: dict[str, Any]) -> dict[str, Any]:
        self.config = step["config"]
        return self.op_crash(step)

    def op_crash(self, _step: dict[str, Any]) -> dict[str, Any]:
        self.book = self._fresh()
        self.unanswered = {}
        return {}

    def op_assign(self, step: dict[str, Any]) -> dict[str, Any]:
        commits, handovers, pauses = [], [], []
        for p in step["partitions"]:
            assigned = self.book.assign(p["topic"], p["partition"], p.get("committed"), p.get("metadata"))
            if assigned.start_commit is not None:
                commits.append(_commit_json(assigned.start_commit))
            if assigned.handover is not None:
                h = assigned.handover
                handovers.append({**_tp((h.topic, h.partition)), "offset": h.offset, "reason": h.reason})
            if assigned.pause:
                pauses.append(_tp(_key(p)))
        return {
            "commits": commits,
            "handovers": _sorted(handovers),
            "pauses": _sorted(pauses),
            "done": self.book.done(),
        }

    def op_read(self, step: dict[str, Any]) -> dict[str, Any]:
        self.book.read([TraceItem(i) for i in step["items"]])
        return {}

    def _made(self, commit: Commit, ok: bool) -> dict[str, Any]:
        """A commit the book asked for, made: a sync one answered at once, an asynchronous one sent."""
        if commit.sync:
            self.book.committed(commit, ok)
        else:
            self.book.committed(commit)
            self.unanswered[commit.id] = commit
        return _commit_json(commit)

    def op_deliver(self, step: dict[str, Any]) -> dict[str, Any]:
        book = self.book
        ok = step.get("sync_commit", "ok") == "ok"
        dropped: list[ConsumedItem] = []
        batch: list[TraceItem] = book.take(lambda item: item.error() is not None, dropped)
        out: dict[str, Any] = {"dropped": _records(dropped), "commits": []}
        if book.anything_to_deliver(batch):
            handled = [r for r in batch if r.filter == "match"]
            poison = [r for r in handled if r.fails] + [r for r in batch if r.filter == "undecodable"]
            out["handled"] = _records(handled)
            out["dead_letters" if self.config.get("dead_letter_topic") else "poison_skipped"] = _records(poison)
            book.end_positions()
            in_flight = bool(step.get("in_flight", False))
            checkpoint = book.checkpoint(lambda: in_flight)
            if checkpoint is True:
                out["flush"] = True
            elif isinstance(checkpoint, Commit):
                out["commits"].append(self._made(checkpoint, ok))
        finishing = book.decide()
        if finishing is not None:
            out["commits"].append(_commit_json(finishing.commit))
            book.committed(finishing.commit, ok)
            handovers = book.finished(finishing, ok)
            out["handovers"] = [
                {**_tp((h.topic, h.partition)), "offset": h.offset, "reason": h.reason} for h in handovers
            ]
            out["pauses"] = [_tp((h.topic, h.partition)) for h in handovers]
        reseal = book.resealing()
        if reseal is not None:
            out["commits"].append(self._made(reseal, ok))
        out["done"] = book.done()
        return out

    def op_commit_result(self, step: dict[str, Any]) -> dict[str, Any]:
        commit = self.unanswered.pop(step["id"])
        failed = [] if step["ok"] else [(o.topic, o.partition) for o in commit.offsets]
        self.book.answered(failed)
        return {}

    def op_revoke(self, step: dict[str, Any]) -> dict[str, Any]:
        commit, dropped = self.book.revoke([_key(p) for p in step["partitions"]])
        commits = []
        if commit is not None:
            commits.append(self._made(commit, step.get("sync_commit", "ok") == "ok"))
        return {"commits": commits, "dropped": _records(dropped)}

    def op_lost(self, step: dict[str, Any]) -> dict[str, Any]:
        return {"dropped": _records(self.book.lost([_key(p) for p in step["partitions"]]))}

    def op_live(self, step: dict[str, Any]) -> dict[str, Any]:
        self.book.live = {_key(o): o["offset"] for o in step["offsets"]}
        return {}

    def op_view(self, step: dict[str, Any]) -> dict[str, Any]:
        self.book.published = {_key(o): o["offset"] for o in step["handovers"]}
        self.book.guards = {_key(o): o["offset"] for o in step["guards"]}
        return {}

    def op_ends(self, _step: dict[str, Any]) -> dict[str, Any]:
        return {}  # end offsets are for lag metrics: no rule reads them

    def op_tick(self, _step: dict[str, Any]) -> dict[str, Any]:
        return {
            "progress": [
                {**_tp((p.topic, p.partition)), "committed": p.committed, "at_end": p.at_end}
                for p in self.book.progress()
            ]
        }

    def op_progress_failed(self, _step: dict[str, Any]) -> dict[str, Any]:
        self.book.progress_failed()
        return {}

    def op_stop(self, step: dict[str, Any]) -> dict[str, Any]:
        checkpoint = self.book.checkpoint(force=True)
        if checkpoint is True:
            return {"flush": True}
        assert isinstance(checkpoint, Commit)
        return {"commits": [self._made(checkpoint, step.get("sync_commit", "ok") == "ok")]}


# -- the simulation


@dataclass
class Worker:
    """One replica of the replay group, and what a crash does not erase: the logs, the group's committed
    offsets, the handover topic."""

    config: dict[str, Any]
    logs: dict[TP, list[str]]
    testee: BookTestee = field(default_factory=BookTestee)
    committed: dict[TP, tuple[int, str | None]] = field(default_factory=dict)
    published: dict[TP, int] = field(default_factory=dict)
    guards: dict[TP, int] = field(default_factory=dict)
    assigned: list[TP] = field(default_factory=list)
    fetch: dict[TP, int] = field(default_factory=dict)
    end_sent: dict[TP, bool] = field(default_factory=dict)
    paused: set[TP] = field(default_factory=set)
    unanswered: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    #: The live group's offsets as last read.
    live_offsets: dict[TP, int] = field(default_factory=dict)
    #: Partitions another replica finished.
    elsewhere: set[TP] = field(default_factory=set)
    #: The first H published for each partition by this run's workers.
    first_h: dict[TP, int] = field(default_factory=dict)
    #: Offsets handled, dead-lettered or skipped as poison, per partition, over the whole run.
    processed: dict[TP, set[int]] = field(default_factory=dict)
    done: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.testee.send({"op": "scenario", "config": self.config})

    def _step(self, step: dict[str, Any], sync: str = "ok") -> dict[str, Any]:
        if sync != "ok":
            step["sync_commit"] = sync
        out = self.testee.send(step)
        assert "error" not in out, out
        step["expect"] = out
        self.steps.append(step)
        for commit in out.get("commits", []):
            if commit["sync"]:
                if sync == "ok":
                    self._durable(commit["offsets"])
            else:
                self.unanswered.append((commit["id"], commit["offsets"]))
        for h in out.get("handovers", []):
            self.published[_key(h)] = h["offset"]
            self.first_h.setdefault(_key(h), h["offset"])
        for p in out.get("pauses", []):
            self.paused.add(_key(p))
        for name in ("handled", "dead_letters", "poison_skipped"):
            for r in out.get(name, []):
                self.processed.setdefault(_key(r), set()).add(r["offset"])
        if "done" in out or step["op"] in ("deliver", "assign"):
            self.done = bool(out.get("done"))
        return out

    def _durable(self, offsets: list[dict[str, Any]]) -> None:
        for o in offsets:
            self.committed[_key(o)] = (o["offset"], o["metadata"])

    # -- actions

    def assign(self, keys: Iterable[TP]) -> None:
        keys = list(keys)
        partitions = []
        for key in keys:
            committed = self.committed.get(key)
            partitions.append(
                {
                    **_tp(key),
                    "committed": committed[0] if committed else None,
                    "metadata": committed[1] if committed else None,
                }
            )
        self._step({"op": "assign", "partitions": partitions})
        plan = {_key(p): p["start"] for p in self.config["plan"]}
        for key in keys:
            if key not in self.assigned:
                self.assigned.append(key)
            self.fetch[key] = self.committed[key][0] if key in self.committed else plan.get(key, 0)
            self.end_sent[key] = False

    def handed_over_elsewhere(self, key: TP, offset: int) -> None:
        """Another replica published H for a partition this one does not hold (no step: the next `view` says it)."""
        self.published[key] = offset
        self.elsewhere.add(key)

    def append(self, key: TP, pattern: str) -> None:
        """Records arrive (no step: the log grows, e.g. while the handler runs)."""
        self.logs[key].extend(pattern)

    def read(self, per_partition: int, keys: Iterable[TP] | None = None) -> None:
        """The consumer returns up to `per_partition` records of each assigned partition that is not paused,
        then its end-of-partition event when it reached the end (once per reaching it)."""
        items = []
        for key in list(keys) if keys is not None else self.assigned:
            if key not in self.assigned or key in self.paused:
                continue
            log, at, taken = self.logs[key], self.fetch[key], 0
            while at < len(log) and taken < per_partition:
                c = log[at]
                if c != "c":  # a transaction marker takes an offset, and no record is returned for it
                    items.append(
                        {
                            **_tp(key),
                            "kind": "record",
                            "offset": at,
                            "timestamp": BASE_MS + 1000 * at,
                            "filter": {"o": "no-match", "x": "undecodable"}.get(c, "match"),
                            "fails": c == "f",
                        }
                    )
                    taken += 1
                    self.end_sent[key] = False
                at += 1
            while at < len(log) and log[at] == "c":
                at += 1
            self.fetch[key] = at
            if at == len(log) and not self.end_sent[key]:
                items.append({**_tp(key), "kind": "end", "offset": at})
                self.end_sent[key] = True
        self._step({"op": "read", "items": items})

    def deliver(self, in_flight: bool = False, sync: str = "ok") -> None:
        step: dict[str, Any] = {"op": "deliver"}
        if in_flight:
            step["in_flight"] = True
        self._step(step, sync)

    def answer(self, ok: bool = True, *, newest: bool = False) -> None:
        """The oldest (or newest) unanswered asynchronous commit is answered."""
        if not self.unanswered:
            return
        commit_id, offsets = self.unanswered.pop(-1 if newest else 0)
        self._step({"op": "commit_result", "id": commit_id, "ok": ok})
        if ok:
            self._durable(offsets)

    def revoke(self, keys: Iterable[TP], sync: str = "ok") -> None:
        keys = [k for k in keys if k in self.assigned]
        self._step({"op": "revoke", "partitions": [_tp(k) for k in keys]}, sync)
        self._forget(keys)

    def lost(self, keys: Iterable[TP]) -> None:
        keys = [k for k in keys if k in self.assigned]
        self._step({"op": "lost", "partitions": [_tp(k) for k in keys]})
        self._forget(keys)

    def _forget(self, keys: list[TP]) -> None:
        for key in keys:
            self.assigned.remove(key)
            self.paused.discard(key)

    def live(self, offsets: dict[TP, int]) -> None:
        self.live_offsets = dict(offsets)
        self._step({"op": "live", "offsets": [{**_tp(k), "offset": o} for k, o in sorted(offsets.items())]})

    def view(self, guards: dict[TP, int] | None = None) -> None:
        if guards is not None:
            self.guards = dict(guards)
        self._step(
            {
                "op": "view",
                "handovers": [{**_tp(k), "offset": o} for k, o in sorted(self.published.items())],
                "guards": [{**_tp(k), "offset": o} for k, o in sorted(self.guards.items())],
            }
        )

    def ends(self) -> None:
        self._step({"op": "ends", "offsets": [{**_tp(k), "offset": len(self.logs[k])} for k in sorted(self.assigned)]})

    def tick(self) -> None:
        self._step({"op": "tick"})

    def progress_failed(self) -> None:
        self._step({"op": "progress_failed"})

    def stop(self, sync: str = "ok") -> None:
        self._step({"op": "stop"}, sync)

    def crash_and_restart(self) -> None:
        """The book is lost, and so are unanswered asynchronous commits; a new worker gets the same partitions
        from what was committed, and reads the handover topic and the live group's offsets again."""
        self.unanswered = []
        self.paused = set()
        self._step({"op": "crash"})
        self.assign(list(self.assigned))
        if self.published or self.guards:
            self.view()
        if self.live_offsets:
            self.live(self.live_offsets)


@dataclass(frozen=True)
class Scenario:
    name: str
    note: str
    logs: dict[TP, str]
    actions: list[Action]
    mode: str = "Drain"
    #: Per planned partition: (start, end offset, end timestamp); unlisted partitions are not in the plan.
    plan: Mapping[TP, tuple[int, int | None, int | None]] = field(default_factory=dict)
    follow: bool = False
    transactional: bool = False
    dead_letter_topic: str | None = None
    #: Partitions committed before the script (offset, metadata); by default each planned one at its start.
    committed: Mapping[TP, tuple[int, str | None]] | None = None
    #: Run the closing reads (to the end of every partition) after the script.
    settle: bool = True

    def config(self) -> dict[str, Any]:
        return {
            "replay_id": RID,
            "mode": self.mode,
            "follow": self.follow,
            "transactional": self.transactional,
            "dead_letter_topic": self.dead_letter_topic,
            "plan": [
                {**_tp(k), "start": s, "end_offset": e, "end_timestamp_ms": t}
                for k, (s, e, t) in sorted(self.plan.items())
            ],
        }

    def worker(self) -> Worker:
        worker = Worker(self.config(), {k: list(p) for k, p in self.logs.items()})
        if self.committed is None:
            worker.committed = {k: (s, None) for k, (s, _, _) in self.plan.items()}
        else:
            worker.committed = dict(self.committed)
        return worker


def _settle(worker: Worker) -> None:
    """After the script: answer every commit, read every partition to its end, until the replay is done."""
    for _ in range(6):
        while worker.unanswered:
            worker.answer()
        if worker.done:
            return
        worker.read(100)
        worker.deliver()


def _check(scenario: Scenario, worker: Worker, where: str) -> None:
    """No matching record below a partition's final H was left unprocessed (handled, dead-lettered or counted
    as poison); records below the first committed offset count as processed (an earlier owner's)."""
    for key, h in worker.published.items():
        if key not in scenario.plan or key in worker.elsewhere:
            continue
        start = scenario.plan[key][0]
        first = scenario.committed.get(key, (start, None))[0] if scenario.committed else start
        log = worker.logs[key]
        for o in range(max(start, first), min(h, len(log))):
            if log[o] in "mfx" and o not in worker.processed.get(key, set()):
                raise AssertionError(f"{scenario.name} ({where}): {key} offset {o} below H={h} never processed")


def _check_nothing_past_h(scenario: Scenario, worker: Worker) -> None:
    """Without a crash, no record at or above the first H published for a partition is processed afterwards (a
    next owner that finds no `finished` mark reads on past H: the live group processes those records too). A
    crash between a late asynchronous commit's landing and the re-seal is the re-seal's own window (a port
    whose commits are not ordered by its client waits for the answer instead: HANDOVER.md section 5.4)."""
    for key, h in worker.first_h.items():
        past = sorted(o for o in worker.processed.get(key, set()) if o >= h)
        if past:
            raise AssertionError(f"{scenario.name} (no crash): {key} offsets {past} processed at or above H={h}")


def scenario_document(scenario: Scenario) -> dict[str, Any]:
    base, _ = run(scenario.worker(), scenario.actions)
    if scenario.settle:
        _settle(base)
    _check(scenario, base, "no crash")
    _check_nothing_past_h(scenario, base)
    crashes = []
    for k in range(1, len(base.steps) + 1):
        worker, crashed = run(scenario.worker(), scenario.actions, crash_after=k)
        if crashed != k:
            continue  # k falls inside an action, or after the script: the settling reads follow it
        if scenario.settle:
            _settle(worker)
        _check(scenario, worker, f"crash after step {k}")
        if worker.done != base.done:
            raise AssertionError(f"{scenario.name}: with a crash after step {k} done={worker.done}, else {base.done}")
        crashes.append({"after_step": k, "steps": worker.steps[k:]})
    return {
        "name": scenario.name,
        "note": scenario.note,
        "config": scenario.config(),
        "steps": base.steps,
        "crashes": crashes,
    }


def _mark(reason: str) -> str:
    return json.dumps({"reprise": 1, "replay": RID, "finished": reason}, separators=(",", ":"))


def scenarios() -> list[Scenario]:
    whole = {P0: (0, None, None), P1: (0, None, None)}
    return [
        Scenario(
            "drain: a commit per batch, end-of-partition finish",
            "Drain reads both partitions in batches of 3; each batch's positions are committed asynchronously "
            "(the next commit is asynchronous only once the previous one is answered); a partition finishes at "
            "its end-of-partition event with the `finished` mark, then H is published",
            {P0: "mmomm", P1: "momm"},
            [
                ("assign", [P0, P1]),
                ("read", 3),
                ("deliver",),
                ("read", 3),
                ("deliver",),
                ("answer",),
                ("read", 3),
                ("deliver",),
                ("answer",),
                ("tick",),
            ],
            plan=whole,
        ),
        Scenario(
            "drain: a record after the end event: not at the end",
            "a port that polls record by record gets p0's end event, then a record that arrived meanwhile, in one "
            "batch: the record clears the end, so p0 does not finish on that event",
            {P0: "mmm"},
            [("assign", [P0]), ("read", 10), ("append", P0, "mm"), ("read", 1), ("deliver",), ("answer",)],
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "drain: trailing transaction markers are committed past",
            "the end-of-partition event is past the markers no record reaches; the position moves to it, so the "
            "replay group's lag is really zero",
            {P0: "mmcmcc"},
            [("assign", [P0]), ("read", 10), ("deliver",), ("answer",)],
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "handover: caught-up with the live group's committed offset",
            "the replay finishes p0 when its position reaches the live group's committed offset (read before the "
            "turn), and p1 at its end",
            {P0: "mmmmmmmm", P1: "mmm"},
            [
                ("assign", [P0, P1]),
                ("live", {P0: 4}),
                ("read", 2),
                ("deliver",),
                ("answer",),
                ("read", 2),
                ("deliver",),
                ("answer",),
                ("read", 2),
                ("deliver",),
            ],
            mode="Handover",
            plan=whole,
        ),
        Scenario(
            "handover: caught-up with a guard's seen_until",
            "a `guard` record's seen_until counts as the live position (the larger of it and the live group's "
            "committed offset)",
            {P0: "mmmmmmmm"},
            [
                ("assign", [P0]),
                ("live", {P0: 2}),
                ("view", {P0: 5}),
                ("read", 3),
                ("deliver",),
                ("answer",),
                ("read", 3),
                ("deliver",),
            ],
            mode="Handover",
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "parallel: live-offset",
            "Parallel finishes at the live group's committed offset, `live-offset`",
            {P0: "momomomo"},
            [("assign", [P0]), ("live", {P0: 3}), ("read", 4), ("deliver",)],
            mode="Parallel",
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "steady traffic: end-of-partition is reached while the end moves on",
            "records keep arriving while the handler runs (the end offsets and the live group's offset read then "
            "are always ahead of the position); the partition still finishes `end-of-partition` at its event's "
            "offset after the batch is processed. A port that compares its position with a fresh end offset or "
            "live position read after the handler never finishes here (issue 32 item 6)",
            {P0: "mmmmmm"},
            [
                ("assign", [P0]),
                ("read", 4),
                ("append", P0, "mm"),
                ("ends",),
                ("live", {P0: 8}),
                ("deliver",),
                ("answer",),
                ("read", 4),
                ("append", P0, "mmm"),
                ("ends",),
                ("live", {P0: 11}),
                ("deliver",),
                ("read", 10),
                ("append", P0, "mm"),
                ("ends",),
                ("live", {P0: 13}),
                ("deliver",),
                ("answer",),
                ("read", 10),
                ("append", P0, "mm"),
                ("ends",),
                ("live", {P0: 15}),
                ("deliver",),
            ],
            mode="Handover",
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "bounded: end offset and end time",
            "p0 stops before offset 4 (`end-bound`, H = 4, the record at 4 is dropped); p1 stops before the first "
            "record at or after its end time",
            {P0: "mmmmmmm", P1: "mmmmmm"},
            [
                ("assign", [P0, P1]),
                ("read", 3),
                ("deliver",),
                ("answer",),
                ("read", 3),
                ("deliver",),
                ("read", 3),
                ("deliver",),
            ],
            plan={P0: (0, 4, None), P1: (0, None, BASE_MS + 3000)},
        ),
        Scenario(
            "dead letters: undecodable and failing records",
            "an undecodable record (the filter needs JSON) and a record the handler keeps failing on go to the "
            "dead-letter topic, failing ones first; non-matching ones are passed over; the positions move past all",
            {P0: "mxfomfm"},
            [("assign", [P0]), ("read", 10), ("deliver",), ("answer",)],
            plan={P0: (0, None, None)},
            dead_letter_topic="orders.dlq",
        ),
        Scenario(
            "poison skipped without a dead-letter topic",
            "the same records are counted and skipped",
            {P0: "mxfomfm"},
            [("assign", [P0]), ("read", 10), ("deliver",), ("answer",)],
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "forward in flight: one batch waits for the next commit",
            "while the forward's producer still sends, the first batch is not committed; the second commits both",
            {P0: "mmmmmmmmm"},
            [
                ("assign", [P0]),
                ("read", 3),
                ("deliver", True),
                ("read", 3),
                ("deliver", True),
                ("answer",),
                ("read", 3),
                ("deliver",),
            ],
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "transactional forward: every commit synchronous",
            "a transaction commits the offsets: never asynchronously, no answers",
            {P0: "mmmmmm"},
            [("assign", [P0]), ("read", 3), ("deliver",), ("read", 3), ("deliver",), ("read", 3), ("deliver",)],
            plan={P0: (0, None, None)},
            transactional=True,
        ),
        Scenario(
            "commit failure: the failed commit is made again, synchronously",
            "an asynchronous commit fails: the partitions' committed offsets are unknown, the next commit is "
            "synchronous and carries every moving position again",
            {P0: "mmmmmmmmm", P1: "mmmmmm"},
            [
                ("assign", [P0, P1]),
                ("read", 2),
                ("deliver",),
                ("answer", False),
                ("read", 2),
                ("deliver",),
                ("read", 2),
                ("deliver",),
                ("answer",),
                ("tick",),
            ],
            plan=whole,
        ),
        Scenario(
            "re-seal: an unanswered commit lands after the finish",
            "p0 finishes while the asynchronous commit of the previous batch (without the mark) is unanswered; it "
            "then lands and erases the mark: once it is answered, the finishing commit is made again",
            {P0: "mmmm", P1: "mmmmmmmmmmmm"},
            [
                ("assign", [P0, P1]),
                ("read", 2),
                ("deliver",),
                ("read", 4),
                ("deliver",),
                ("answer",),
                ("read", 4),
                ("deliver",),
                ("answer",),
                ("read", 4),
                ("deliver",),
            ],
            plan=whole,
        ),
        Scenario(
            "re-seal across a rebalance: the late commit lands, then a revoke",
            "p0 finishes (caught-up at 4) while the asynchronous commit of its last batch is unanswered; that "
            "commit lands after the finishing one and erases the mark, and p0 is revoked before the turn that "
            "would re-seal it: the revoke's commit carries the mark again, so the next owner (this replica again) "
            "finds it, publishes the same H and does not read on while the live group has moved past H. Without "
            "it the next owner processes records at or above H (the Go role's failure in a fresh-clone run)",
            {P0: "mmmmmmmm"},
            [
                ("assign", [P0]),
                ("live", {P0: 4}),
                ("read", 2),
                ("deliver",),
                ("answer",),
                ("read", 2),
                ("deliver",),
                ("answer",),
                ("revoke", [P0]),
                ("live", {P0: 6}),
                ("assign", [P0]),
                ("read", 4),
                ("deliver",),
            ],
            mode="Handover",
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "finishing commit refused: not a member",
            "the group refuses the finishing commit (a rebalance is under way): nothing is published; the "
            "partition is revoked, assigned again and finishes then",
            {P0: "mmm"},
            [
                ("assign", [P0]),
                ("read", 5),
                ("deliver", False, "not-member"),
                ("revoke", [P0]),
                ("assign", [P0]),
                ("read", 5),
                ("deliver",),
            ],
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "revoke in mid-batch: records in hand are dropped",
            "a port that polls record by record reads p0 and p1, then a rebalance revokes p1 (its position is "
            "committed without the records in hand) and gives it back; those records are dropped and read again "
            "from the committed offset",
            {P0: "mmmmmm", P1: "mmmmmm"},
            [
                ("assign", [P0, P1]),
                ("read", 2),
                ("deliver",),
                ("answer",),
                ("read", 2),
                ("revoke", [P1]),
                ("assign", [P1]),
                ("read", 2, [P1]),
                ("deliver",),
                ("answer",),
            ],
            plan=whole,
        ),
        Scenario(
            "lost: nothing committed, the batch in hand dropped",
            "the assignment is lost while a batch is in hand: nothing is committed for p0, its records are dropped; "
            "the next owner (this replica again) resumes from the last commit",
            {P0: "mmmmmm"},
            [
                ("assign", [P0]),
                ("read", 2),
                ("deliver",),
                ("answer",),
                ("read", 2),
                ("lost", [P0]),
                ("assign", [P0]),
                ("read", 2),
                ("deliver",),
            ],
            plan={P0: (0, None, None)},
        ),
        Scenario(
            "assignment: expired offset, finished mark, not in the plan",
            "p0 has no committed offset (expired): its start is committed again; p1's committed offset carries "
            "this replay's `finished` mark: H is published again and it is not read; p2 is not in the plan",
            {P0: "mmm", P1: "mmmm", P2: "mm"},
            [("assign", [P0, P1, P2]), ("read", 5), ("deliver",)],
            plan={P0: (1, None, None), P1: (0, None, None)},
            committed={P1: (3, _mark("caught-up"))},
        ),
        Scenario(
            "done: a partition another replica finished counts",
            "this replica holds p0 only; p1's H, published by another replica, comes with the view: once p0 "
            "finishes here, the replay is done",
            {P0: "mmm", P1: "mmmm"},
            [
                ("assign", [P0]),
                ("read", 2),
                ("deliver",),
                ("handed_over_elsewhere", P1, 4),
                ("view",),
                ("answer",),
                ("read", 2),
                ("deliver",),
            ],
            plan=whole,
        ),
        Scenario(
            "progress records",
            "a tick reports the partitions whose committed position or end moved since the last report; after a "
            "failed publish the next tick reports everything again",
            {P0: "mmmmmm", P1: "mm"},
            [
                ("assign", [P0, P1]),
                ("tick",),
                ("read", 2),
                ("deliver",),
                ("tick",),
                ("answer",),
                ("tick",),
                ("progress_failed",),
                ("tick",),
            ],
            plan=whole,
        ),
        Scenario(
            "follow: no partition finishes; a stop commits every position",
            "a shadow hold reads to the end and never finishes; the stop commits every position synchronously",
            {P0: "mmm", P1: "mm"},
            [("assign", [P0, P1]), ("read", 5), ("deliver",), ("answer",), ("read", 5), ("deliver",), ("stop",)],
            plan=whole,
            follow=True,
            settle=False,
        ),
    ]


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "replay_traces",
        "spec": "replay_worker/HANDOVER.md sections 1, 5; conformance/REPLAY_TRACES.md",
        "scenarios": [scenario_document(s) for s in scenarios()],
    }
