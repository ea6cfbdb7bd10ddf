"""guard_traces.json: the guard's bookkeeping (`GuardBook` around `GuardPartition`, fed by `HandoverView`),
step by step, for one guarded consumer of the live group (HANDOVER.md section 6).

Each scenario is a script of actions run against a simulated consumer: a fixed log per partition, the
consumer's fetch positions, and the live group's committed offsets (with metadata). Running it produces the
port-level steps (the inputs a guard receives and the outputs it must give); a port replays the steps and
compares. Every scenario is also cut after every step: the guard crashes (all its state is lost), a new one
is assigned the partitions with what was committed, and the rest of the script runs, so the vectors check
that the state recorded in commit marks is enough for a new owner at every point.

The simulator also checks, at the end of every run, that no record was lost: each record the replay does
not cover was handed to the service at least once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..protocol.commit_marks import CommitMark
from ..guard.guard_book import GuardBook, Store
from ..protocol.guard_rules import ack_due
from ..protocol.handover import HandoverView
from ..protocol.wire import AckInfo, HandoverInfo, ReplayInfo, StartInfo, encode, encode_key
from .crash_script import Action, run
from .encoding import to_json

GROUP = "orders-service"
TOPIC = "orders"
RID = "shop/orders-fix/1"
OTHER = "shop/orders-again/2"
PAID = {"json": [{"path": "paid", "equals": True}]}
P0, P1 = (TOPIC, 0), (TOPIC, 1)
TP = tuple[str, int]
Raw = tuple[bytes, bytes | None]


def record_value(n: int, paid: bool) -> bytes:
    return json.dumps({"n": n, "paid": paid}, separators=(",", ":")).encode()


def make_log(pattern: str) -> list[tuple[bytes, bytes | None]]:
    """One partition's records from a pattern: `m` matches the filter (paid), `o` does not, `x` is not JSON
    (covered: the replay dead-letters it), `t` is a tombstone (never covered by this filter)."""
    out: list[tuple[bytes, bytes | None]] = []
    for n, c in enumerate(pattern):
        value = {"m": record_value(n, True), "o": record_value(n, False), "x": b'{"paid":true', "t": None}[c]
        out.append((f"k{n}".encode(), value))
    return out


# -- handover records the scripts publish


def replay(rid: str = RID, *, mode: str = "Handover", group: str | None = GROUP, flt: Any = None) -> Raw:
    return encode(
        ReplayInfo(rid, mode, "reprise-" + rid.split("/")[1], group, (TOPIC,), PAID if flt is None else flt, 1000)
    )


def start(offset: int, partition: int = 0, rid: str = RID) -> Raw:
    return encode(StartInfo(rid, TOPIC, partition, offset, None, None, False, 1001))


def handover(offset: int, partition: int = 0, rid: str = RID) -> Raw:
    return encode(HandoverInfo(rid, TOPIC, partition, offset, "caught-up", "replay", 1002))


def tombstone(kind: str, partition: int | None = 0, rid: str = RID) -> Raw:
    topic = None if kind == "replay" else TOPIC
    return encode_key(rid, kind, topic, partition if topic else None), None  # type: ignore[arg-type]


def raw_record(rid: str, kind: str, partition: int | None, value: bytes) -> Raw:
    topic = None if kind == "replay" else TOPIC
    return encode_key(rid, kind, topic, partition if topic else None), value  # type: ignore[arg-type]


# -- the simulation


def _tp(key: TP) -> dict[str, Any]:
    return {"topic": key[0], "partition": key[1]}


def _store(store: Store) -> dict[str, Any]:
    return {"topic": store.topic, "partition": store.partition, "offset": store.offset, "metadata": store.metadata}


def _sorted(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda i: (i["topic"], i["partition"]))


@dataclass
class Consumer:
    """The guarded consumer and everything around it that a crash does not erase."""

    logs: dict[TP, list[tuple[bytes, bytes | None]]]
    auto_store: bool
    book: GuardBook = field(init=False)
    view_records: list[Raw] = field(default_factory=list)
    view: HandoverView = field(default_factory=HandoverView)
    committed: dict[TP, tuple[int, str | None]] = field(default_factory=dict)
    position: dict[TP, int] = field(default_factory=dict)
    processed_until: dict[TP, int] = field(default_factory=dict)
    handed: dict[TP, list[int]] = field(default_factory=dict)
    tickets: int = 0
    #: (partition, S, H) of every replay seen handed over: the replay processed its covered records in [S, H).
    handed_over: set[tuple[TP, int, int]] = field(default_factory=set)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.book = GuardBook(auto_store=self.auto_store)

    def _emit(self, step: dict[str, Any], **expect: Any) -> None:
        step["expect"] = expect
        self.steps.append(step)

    def _snapshot(self) -> dict:
        return self.view.active_for(GROUP)

    def _seek(self, seeks: dict[TP, int]) -> list[dict[str, Any]]:
        for key, target in seeks.items():
            self.position[key] = target
        return _sorted([{**_tp(k), "offset": o} for k, o in seeks.items()])

    # -- actions

    def publish(self, records: list[Raw]) -> None:
        self.view_records += records
        for k, v in records:
            self.view.apply(k, v)
        for key, a in self.view.active_for(GROUP).items():
            if a.problem is None and a.start is not None and a.handover is not None:
                self.handed_over.add((key, a.start, a.handover))
        seeks = self.book.apply(self._snapshot())
        self._emit(
            {"op": "handover", "records": [{"key": to_json(k), "value": to_json(v)} for k, v in records]},
            seeks=self._seek(seeks),
        )

    def assign(self, keys: Iterable[TP], committed: dict[TP, tuple[int, str | None]] | None = None) -> None:
        keys = [k for k in keys if k not in self.book.parts]
        if not keys:
            return
        self.tickets += 1
        parts = []
        for key in keys:
            if committed and key in committed:
                self.committed[key] = committed[key]
            offset, metadata = self.committed.get(key, (None, None))
            self.book.assign(key, offset, CommitMark.decode(metadata), self.tickets)
            self.position[key] = offset if offset is not None else 0
            parts.append({**_tp(key), "committed": offset, "metadata": metadata})
        self._emit({"op": "assign", "partitions": parts})

    def release(self, keys: Iterable[TP]) -> None:
        keys = [k for k in keys if k in self.book.parts and self.book.parts[k].ticket is not None]
        if not keys:
            return
        snapshot = self._snapshot()
        seeks = {}
        for key in keys:
            target = self.book.release(key, snapshot.get(key))
            if target is not None:
                seeks[key] = target
        self._emit({"op": "release", "partitions": [_tp(k) for k in keys]}, seeks=self._seek(seeks))

    def batch(self, per_partition: int, include_held: bool = False) -> None:
        fetched: list[tuple[TP, int]] = []
        for key in sorted(self.book.parts):
            if self.book.parts[key].ticket is not None and not include_held:
                continue
            begin = self.position.get(key, 0)
            fetched += [(key, o) for o in range(begin, min(begin + per_partition, len(self.logs[key])))]
        if not fetched:
            return
        book = self.book
        verdicts: list[str] = []
        stores: list[Store] = []
        if not book.guarded:
            positions: dict[TP, int] = {}
            for key, offset in fetched:
                verdicts.append("process")
                self._handed(key, offset)
                positions[key] = offset + 1
            self.position.update(positions)
            stores = book.handed_unguarded(positions)
        else:
            held: set[TP] = set()
            touched: list[TP] = []
            for key, offset in fetched:
                part = book.parts.get(key)
                if part is None or key in held:
                    verdicts.append("dropped")
                    continue
                if part.ticket is not None:
                    verdicts.append("held")  # put back: the consumer seeks to this offset and pauses
                    held.add(key)
                    self.position[key] = offset
                    continue
                if key not in touched:
                    touched.append(key)
                record_key, value = self.logs[key][offset]
                self.position[key] = offset + 1
                if book.judge(key, offset, record_key, None, value):
                    verdicts.append("process")
                    self._handed(key, offset)
                else:
                    verdicts.append("skip")
            stores = [s for s in (book.after_batch(key) for key in touched) if s is not None]
        self._emit(
            {"op": "batch", "records": [{**_tp(k), "offset": o} for k, o in fetched]},
            verdicts=verdicts,
            stores=_sorted([_store(s) for s in stores]),
        )

    def _handed(self, key: TP, offset: int) -> None:
        self.handed.setdefault(key, []).append(offset)
        self.processed_until[key] = offset + 1

    def store(self, commit: bool = False, metadata: str | None = None) -> None:
        """The service stores (or commits, explicitly) the offset after the last record it processed, with
        metadata of its own if it has some."""
        offsets = [(key, self.processed_until[key]) for key in sorted(self.book.parts) if key in self.processed_until]
        if not offsets:
            return
        stores = [self.book.service_store(key[0], key[1], offset, metadata) for key, offset in offsets]
        step = {
            "op": "commit" if commit else "store",
            "offsets": [{**_tp(k), "offset": o, "metadata": metadata} for k, o in offsets],
        }
        if commit:
            self._durable(stores)
            self._emit(step, commits=[_store(s) for s in stores])
        else:
            self._emit(step, stores=[_store(s) for s in stores])

    def commit(self) -> None:
        """The service's plain commit(): what is stored, with its marks."""
        commits = self.book.stored_offsets()
        self._durable(commits)
        self._emit({"op": "commit", "offsets": None}, commits=_sorted([_store(s) for s in commits]))

    def _durable(self, stores: list[Store]) -> None:
        for s in stores:
            self.committed[(s.topic, s.partition)] = (s.offset, s.metadata)

    def tick(self) -> None:
        book = self.book
        guard_commits = book.take_guard_commits()
        self._durable(guard_commits)
        reports = [
            {
                "replay_id": r.replay_id,
                **_tp((r.topic, r.partition)),
                "first_skipped": r.first_skipped,
                "seen_until": r.seen_until,
            }
            for r in book.skip_reports()
        ]
        problems = [
            {
                "replay_id": r.replay_id,
                **_tp((r.topic, r.partition)),
                "problem": r.problem,
                "first_skipped": r.first_skipped,
                "seen_until": r.seen_until,
            }
            for r in book.problem_reports()
        ]
        positions = {key: self.position.get(key, 0) for key in sorted(book.parts)}
        floors = book.floor_commits(lambda key: positions.get(key))
        for store in floors:
            self._durable([store])
            book.floor_done(store)
        acks = []
        for key, (replay_id, h) in sorted(book.pending_acks().items()):
            part = self.view.replay(replay_id).partitions.get(key)
            if part is None or part.handover_offset != h or (part.ack is not None and part.ack.offset == h):
                continue
            offset, metadata = self.committed.get(key, (None, None))
            if ack_due(h, offset, CommitMark.decode(metadata)):
                acks.append({"replay_id": replay_id, **_tp(key), "offset": h, "committed": offset})
        self._emit(
            {"op": "tick", "positions": [{**_tp(k), "offset": o} for k, o in positions.items()]},
            commits=_sorted([_store(s) for s in guard_commits]),
            reports=_sorted(reports),
            problems=_sorted(problems),
            floor_commits=_sorted([_store(s) for s in floors]),
            acks=acks,
        )
        if acks:
            # The acknowledgements come back through the handover topic, as every record the guard publishes.
            self.publish(
                [
                    encode(
                        AckInfo(a["replay_id"], a["topic"], a["partition"], a["offset"], a["committed"], "guard-1", 0)
                    )
                    for a in acks
                ]
            )

    def revoke(self, keys: Iterable[TP]) -> None:
        keys = [k for k in keys if k in self.book.parts]
        for key in keys:
            self.book.drop(key)
        if keys:
            self._emit({"op": "revoke", "partitions": [_tp(k) for k in keys]})

    def crash_and_restart(self) -> None:
        """All guard state is lost; a new guard gets the same partitions, from what was committed, with a view
        rebuilt from the handover topic (a new process reads it from the start)."""
        assigned = sorted(self.book.parts)
        released = [k for k in assigned if self.book.parts[k].ticket is None]
        self.book = GuardBook(auto_store=self.auto_store)
        self.view = HandoverView().apply_all(self.view_records)
        self.processed_until = {}
        self._emit({"op": "crash"})
        self.assign(assigned)
        self.release(released)


@dataclass(frozen=True)
class Scenario:
    name: str
    note: str
    logs: dict[TP, str]
    actions: list[Action]
    auto_store: bool = True
    #: The committed mark at the first assignment cannot be read: covered records below it may be skipped.
    skipped_below_commit: bool = False

    def consumer(self) -> Consumer:
        return Consumer({k: make_log(p) for k, p in self.logs.items()}, self.auto_store)


def _drain(consumer: Consumer) -> None:
    """After the script: read every partition to its end, commit, tick (to see the final commits and acks)."""
    for _ in range(2):
        consumer.release(list(consumer.book.parts))
        consumer.batch(100)
        if not consumer.auto_store:
            consumer.store()
        consumer.commit()
        consumer.tick()


def _check_nothing_lost(scenario: Scenario, consumer: Consumer, where: str) -> None:
    """Every record the replay does not cover was handed to the service (HANDOVER.md section 7). Records below
    the offset committed before the script count as processed, except matching ones when the scenario says
    an earlier owner may have skipped them (`skipped_below_commit`)."""
    active = consumer.view.active_for(GROUP)
    initial: dict[TP, int] = {}
    window: dict[TP, int] = {}  # a re-read window in the first mark: non-matching records below U were processed
    for step in consumer.steps:
        if step["op"] == "assign":
            for p in step["partitions"]:
                key = (p["topic"], p["partition"])
                if key not in initial:
                    initial[key] = p["committed"] or 0
                    first_mark = CommitMark.decode(p["metadata"])
                    if first_mark is not None and first_mark.reread_until is not None:
                        window[key] = first_mark.reread_until
    for key, pattern in scenario.logs.items():
        a = active.get(key)
        handed = set(consumer.handed.get(key, []))
        for o, c in enumerate(pattern):
            covered = c in "mx" and (
                (
                    a is not None
                    and a.problem is None
                    and a.start is not None
                    and o >= a.start
                    and (a.handover is None or o < a.handover)
                )
                or any(k == key and s <= o < h for k, s, h in consumer.handed_over)
            )
            starts = [st for k, st, _ in consumer.handed_over if k == key] + (
                [a.start] if a and a.start is not None else []
            )
            may_be_skipped = scenario.skipped_below_commit and c in "mx" and bool(starts) and o >= min(starts)
            done_before = (o < initial.get(key, 0) and not may_be_skipped) or (o < window.get(key, 0) and c not in "mx")
            if not covered and not done_before and o not in handed:
                raise AssertionError(f"{scenario.name} ({where}): {key} offset {o} was never handed to the service")


def scenario_document(scenario: Scenario) -> dict[str, Any]:
    base, _ = run(scenario.consumer(), scenario.actions)
    _drain(base)
    _check_nothing_lost(scenario, base, "no crash")
    crashes = []
    for k in range(1, len(run(scenario.consumer(), scenario.actions)[0].steps) + 1):
        consumer, crashed = run(scenario.consumer(), scenario.actions, crash_after=k)
        if crashed != k:
            continue  # k falls inside one action (a tick and the handover step carrying its acks)
        _drain(consumer)
        _check_nothing_lost(scenario, consumer, f"crash after step {k}")
        crashes.append({"after_step": k, "steps": consumer.steps[k:]})
    return {
        "name": scenario.name,
        "note": scenario.note,
        "live_group": GROUP,
        "auto_store": scenario.auto_store,
        "logs": [
            {**_tp(key), "records": [{"key": to_json(k), "value": to_json(v)} for k, v in make_log(p)]}
            for key, p in scenario.logs.items()
        ],
        "steps": base.steps,
        "crashes": crashes,
    }


def scenarios() -> list[Scenario]:
    S = Scenario
    mark = lambda **kw: CommitMark(RID, **kw).encode()  # noqa: E731
    return [
        S(
            "skip, then H: seek back and re-read window, ack",
            "the guard learns S, skips matching records from F, learns H below what it read, seeks back to "
            "max(H, F) and re-reads up to U (non-matching records there were processed already)",
            {P0: "oommommommoommom"},
            [
                ("assign", [P0], {P0: (1, None)}),
                ("publish", [replay(), start(2)]),
                ("release", [P0]),
                ("batch", 4),
                ("tick",),
                ("commit",),
                ("batch", 4),
                ("commit",),
                ("tick",),
                ("publish", [handover(5)]),
                ("batch", 4),
                ("commit",),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "H known at release: skip below H, process from H",
            "the replay already finished this partition when the guard is assigned it",
            {P0: "mmomomomom"},
            [
                ("publish", [replay(), start(0), handover(6)]),
                ("assign", [P0], {P0: (2, None)}),
                ("release", [P0]),
                ("batch", 3),
                ("commit",),
                ("batch", 3),
                ("commit",),
                ("tick",),
                ("batch", 5),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "H learned before F: nothing to re-read",
            "the replay hands over before the guard reached anything it would skip",
            {P0: "oooommmm"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(4)]),
                ("release", [P0]),
                ("batch", 2),
                ("commit",),
                ("publish", [handover(5)]),
                ("batch", 6),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "service stores and commits its own offsets",
            "enable.auto.offset.store off: the service stores what it processed; the guard marks its stores",
            {P0: "omommoommo"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(1)]),
                ("release", [P0]),
                ("batch", 4),
                ("store",),
                ("tick",),
                ("commit",),
                ("batch", 3),
                ("store", True),
                ("publish", [handover(3)]),
                ("batch", 4),
                ("store", True),
                ("tick",),
            ],
            auto_store=False,
        ),
        S(
            "the service's own commit metadata",
            "while a mark holds the guard's mark replaces the service's metadata; otherwise the service's is kept",
            {P0: "mommoo"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(0)]),
                ("release", [P0]),
                ("batch", 3),
                ("store", True, "batch 2"),
                ("publish", [handover(2)]),
                ("batch", 3),
                ("store", True, "batch 3"),
                ("tick",),
            ],
            auto_store=False,
        ),
        S(
            "quiet partition: the floor commit",
            "past H with nothing new to read: the guard commits its position itself so the handover is acknowledged",
            {P0: "ommo"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(1)]),
                ("release", [P0]),
                ("batch", 4),
                ("tick",),
                ("publish", [handover(4)]),
                ("tick",),
                ("tick",),
            ],
        ),
        S(
            "restore a skip_from mark",
            "the previous owner skipped from F=3 and committed 7 with skip_from; H=5 arrives: re-read [5, 7)",
            {P0: "ooommommmo"},
            [
                ("publish", [replay(), start(2)]),
                ("assign", [P0], {P0: (7, mark(skip_from=3))}),
                ("release", [P0]),
                ("batch", 2),
                ("commit",),
                ("tick",),
                ("publish", [handover(5)]),
                ("batch", 3),
                ("commit",),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "restore a reread_until mark",
            "the previous owner was re-reading up to U=8 after H=4 and committed 6 with reread_until",
            {P0: "mmmmommomo"},
            [
                ("publish", [replay(), start(0), handover(4)]),
                ("assign", [P0], {P0: (6, mark(reread_until=8))}),
                ("release", [P0]),
                ("batch", 1),
                ("commit",),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "replay removed before H: re-read what was skipped",
            "the replay is tombstoned while the guard skips: nobody covers those records, so they are read again",
            {P0: "ommomommo"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(1)]),
                ("release", [P0]),
                ("batch", 5),
                ("commit",),
                ("tick",),
                ("publish", [tombstone("start"), tombstone("replay", None)]),
                ("batch", 5),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "held while the view catches up; records fetched before the pause are put back",
            "a partition is held from its assignment until its view is current",
            {P0: "momo", P1: "mmoo"},
            [
                ("publish", [replay(), start(0), start(0, 1)]),
                ("assign", [P0, P1], {P0: (0, None), P1: (0, None)}),
                ("release", [P0]),
                ("batch", 2, True),
                ("release", [P1]),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "rebalance: revoke and assign again",
            "the service commits on revoke; the partition comes back with its mark",
            {P0: "ommommo", P1: "mmmooo"},
            [
                ("assign", [P0, P1], {P0: (0, None), P1: (0, None)}),
                ("publish", [replay(), start(0), start(0, 1)]),
                ("release", [P0, P1]),
                ("batch", 3),
                ("commit",),
                ("revoke", [P1]),
                ("batch", 2),
                ("commit",),
                ("assign", [P1]),
                ("release", [P1]),
                ("publish", [handover(2), handover(1, 1)]),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "no replay for this group",
            "another group's replay and a Parallel replay are ignored: every record is handed, stores have no mark",
            {P0: "mmoo"},
            [
                ("publish", [replay(group="billing"), start(0), replay(OTHER, mode="Parallel"), start(0, 0, OTHER)]),
                ("assign", [P0], {P0: (0, None)}),
                ("release", [P0]),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "two replays on one partition: the earliest wins",
            "a second Handover replay for the same partition is ignored until the first is removed",
            {P0: "mmmmmm"},
            [
                ("publish", [replay(), start(1), replay(OTHER), start(3, 0, OTHER)]),
                ("assign", [P0], {P0: (0, None)}),
                ("release", [P0]),
                ("batch", 2),
                ("publish", [handover(2)]),
                ("batch", 2),
                ("commit",),
                ("tick",),
                ("publish", [tombstone("handover"), tombstone("start"), tombstone("replay", None)]),
                ("batch", 2),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "a record that is not JSON is covered",
            "the replay dead-letters it, so the guard skips it like a matching record",
            {P0: "oxmxo"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(0), handover(4)]),
                ("release", [P0]),
                ("batch", 5),
                ("commit",),
                ("tick",),
            ],
        ),
        # -- bad input (HANDOVER.md section 6, Bad input)
        S(
            "bad input: a malformed handover record",
            "H cannot be read: the guard cannot prove what the replay covers, so it stops skipping, re-reads from "
            "F and reports the problem; a readable H later brings it back to the normal rules",
            {P0: "ommomommom"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(1)]),
                ("release", [P0]),
                ("batch", 5),
                ("commit",),
                ("publish", [raw_record(RID, "handover", 0, b'{"v":1,"kind":"handover","offset":"4"}')]),
                ("tick",),
                ("batch", 5),
                ("commit",),
                ("publish", [handover(4)]),
                ("batch", 5),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "bad input: a handover record of a newer format version",
            "the same as a malformed one: not readable by this guard",
            {P0: "mmmmomm"},
            [
                ("assign", [P0], {P0: (0, None)}),
                ("publish", [replay(), start(0)]),
                ("release", [P0]),
                ("batch", 3),
                ("commit",),
                (
                    "publish",
                    [
                        raw_record(
                            RID,
                            "handover",
                            0,
                            b'{"v":2,"replay_id":"' + RID.encode() + b'","kind":"handover",'
                            b'"topic":"orders","partition":0,"offset":2,"epoch":7}',
                        )
                    ],
                ),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "bad input: a start record that cannot be read",
            "S is unknown: nothing is skipped on that partition",
            {P0: "mmom"},
            [
                ("publish", [replay(), raw_record(RID, "start", 0, b"{not json")]),
                ("assign", [P0], {P0: (0, None)}),
                ("release", [P0]),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "bad input: a replay record of a newer version replaces a readable one",
            "the replay can no longer be read: the guard abandons it (re-reads what it skipped) and reports",
            {P0: "mmomm"},
            [
                ("publish", [replay(), start(0)]),
                ("assign", [P0], {P0: (0, None)}),
                ("release", [P0]),
                ("batch", 3),
                ("commit",),
                ("publish", [raw_record(RID, "replay", None, b'{"v":2,"kind":"replay"}')]),
                ("batch", 3),
                ("commit",),
                ("tick",),
            ],
        ),
        S(
            "bad input: a filter the guard cannot evaluate",
            "a newer filter feature (or a keysFile) the guard does not know: it processes every record for that "
            "replay and reports the problem",
            {P0: "mmom"},
            [
                ("publish", [replay(flt={"json": [{"path": "paid", "regex": "t.*"}]}), start(0)]),
                ("assign", [P0], {P0: (0, None)}),
                ("release", [P0]),
                ("batch", 4),
                ("commit",),
                ("tick",),
                ("publish", [handover(3)]),
                ("tick",),
            ],
        ),
        S(
            "bad input: a commit mark of a newer format version",
            "what the previous owner skipped below C is unknown: the guard counts every covered record from S as "
            "skipped (F := S), so H brings a re-read of [H, C) instead of a loss; and it reports the mark",
            {P0: "mmommomm"},
            [
                ("publish", [replay(), start(1)]),
                ("assign", [P0], {P0: (6, '{"reprise":2,"replay":"' + RID + '","skipped":[[1,6]]}')}),
                ("release", [P0]),
                ("batch", 1),
                ("commit",),
                ("tick",),
                ("publish", [handover(3)]),
                ("batch", 5),
                ("commit",),
                ("tick",),
            ],
            skipped_below_commit=True,
        ),
        S(
            "bad input: a malformed commit mark",
            "treated like a newer one",
            {P0: "mmmm"},
            [
                ("publish", [replay(), start(0), handover(1)]),
                ("assign", [P0], {P0: (3, '{"reprise":1,"replay":"' + RID + '","skip_from":"0"}')}),
                ("release", [P0]),
                ("batch", 4),
                ("commit",),
                ("tick",),
            ],
            skipped_below_commit=True,
        ),
    ]


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "guard_traces",
        "spec": "replay_worker/HANDOVER.md section 6",
        "scenarios": [scenario_document(s) for s in scenarios()],
    }
