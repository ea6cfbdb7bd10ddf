"""The Python guard bookkeeping passes every guard trace, read from conformance/vectors/guard_traces.json the
way a port's runner reads it (conformance/README.md, "guard_traces.json")."""

from __future__ import annotations

from typing import Any

import pytest

from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.guard.guard_book import GuardBook, Store
from replay_worker.protocol.guard_rules import ack_due
from replay_worker.protocol.handover import HandoverView

from .vectors import load, raw

TRACES = load("guard_traces.json")
TP = tuple[str, int]


def _tp(item: dict[str, Any]) -> TP:
    return item["topic"], item["partition"]


def _offsets(stores: list[Store]) -> list[dict[str, Any]]:
    out = [{"topic": s.topic, "partition": s.partition, "offset": s.offset, "metadata": s.metadata} for s in stores]
    return sorted(out, key=lambda i: (i["topic"], i["partition"]))


class Runner:
    """One guarded consumer's bookkeeping, fed the steps of a trace."""

    def __init__(self, scenario: dict[str, Any]) -> None:
        self.group = scenario["live_group"]
        self.auto_store = scenario["auto_store"]
        self.logs = {_tp(log): [(raw(r["key"]), raw(r["value"])) for r in log["records"]] for log in scenario["logs"]}
        self.records: list[tuple[bytes | None, bytes | None]] = []
        self.committed: dict[TP, tuple[int, str | None]] = {}
        self.fresh()

    def fresh(self) -> None:
        self.book = GuardBook(auto_store=self.auto_store)
        self.view = HandoverView().apply_all(self.records)
        self.ticket = 0

    def step(self, step: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, "op_" + step["op"])(step)

    @staticmethod
    def _seeks(seeks: dict[TP, int]) -> list[dict[str, Any]]:
        return [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(seeks.items())]

    def op_handover(self, step: dict[str, Any]) -> dict[str, Any]:
        for record in step["records"]:
            pair = (raw(record["key"]), raw(record["value"]))
            self.records.append(pair)
            self.view.apply(*pair)
        return {"seeks": self._seeks(self.book.apply(self.view.active_for(self.group)))}

    def op_assign(self, step: dict[str, Any]) -> dict[str, Any]:
        self.ticket += 1
        for part in step["partitions"]:
            key = _tp(part)
            if part["committed"] is not None and key not in self.committed:
                self.committed[key] = (part["committed"], part["metadata"])  # committed before the trace
            assert self.committed.get(key, (None, None)) == (part["committed"], part["metadata"])
            self.book.assign(key, part["committed"], CommitMark.decode(part["metadata"]), self.ticket)
        return {}

    def op_release(self, step: dict[str, Any]) -> dict[str, Any]:
        active = self.view.active_for(self.group)
        seeks = {}
        for part in step["partitions"]:
            target = self.book.release(_tp(part), active.get(_tp(part)))
            if target is not None:
                seeks[_tp(part)] = target
        return {"seeks": self._seeks(seeks)}

    def op_batch(self, step: dict[str, Any]) -> dict[str, Any]:
        book, fetched = self.book, [(_tp(r), r["offset"]) for r in step["records"]]
        if not book.guarded:
            positions = {key: offset + 1 for key, offset in fetched}
            return {"verdicts": ["process"] * len(fetched), "stores": _offsets(book.handed_unguarded(positions))}
        verdicts, held, touched = [], set(), []
        for key, offset in fetched:
            part = book.parts.get(key)
            if part is None or key in held:
                verdicts.append("dropped")
            elif part.ticket is not None:
                verdicts.append("held")
                held.add(key)
            else:
                touched.append(key) if key not in touched else None
                record_key, value = self.logs[key][offset]
                verdicts.append("process" if book.judge(key, offset, record_key, None, value) else "skip")
        stores = [s for s in (book.after_batch(key) for key in touched) if s is not None]
        return {"verdicts": verdicts, "stores": _offsets(stores)}

    def _service_stores(self, step: dict[str, Any]) -> list[Store]:
        return [
            self.book.service_store(o["topic"], o["partition"], o["offset"], o["metadata"]) for o in step["offsets"]
        ]

    def op_store(self, step: dict[str, Any]) -> dict[str, Any]:
        return {"stores": _offsets(self._service_stores(step))}

    def op_commit(self, step: dict[str, Any]) -> dict[str, Any]:
        commits = self.book.stored_offsets() if step["offsets"] is None else self._service_stores(step)
        self._durable(commits)
        return {"commits": _offsets(commits)}

    def _durable(self, stores: list[Store]) -> None:
        for s in stores:
            self.committed[(s.topic, s.partition)] = (s.offset, s.metadata)

    def op_tick(self, step: dict[str, Any]) -> dict[str, Any]:
        book = self.book
        commits = book.take_guard_commits()
        self._durable(commits)
        reports = [
            {
                "replay_id": r.replay_id,
                "topic": r.topic,
                "partition": r.partition,
                "first_skipped": r.first_skipped,
                "seen_until": r.seen_until,
            }
            for r in book.skip_reports()
        ]
        problems = [
            {
                "replay_id": r.replay_id,
                "topic": r.topic,
                "partition": r.partition,
                "problem": r.problem,
                "first_skipped": r.first_skipped,
                "seen_until": r.seen_until,
            }
            for r in book.problem_reports()
        ]
        positions = {_tp(p): p["offset"] for p in step["positions"]}
        floors = book.floor_commits(positions.get)
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
                acks.append(
                    {"replay_id": replay_id, "topic": key[0], "partition": key[1], "offset": h, "committed": offset}
                )
        by_tp = lambda i: (i["topic"], i["partition"])  # noqa: E731
        return {
            "commits": _offsets(commits),
            "reports": sorted(reports, key=by_tp),
            "problems": sorted(problems, key=by_tp),
            "floor_commits": _offsets(floors),
            "acks": acks,
        }

    def op_revoke(self, step: dict[str, Any]) -> dict[str, Any]:
        for part in step["partitions"]:
            self.book.drop(_tp(part))
        return {}

    def op_crash(self, step: dict[str, Any]) -> dict[str, Any]:
        self.fresh()
        return {}


def _run(scenario: dict[str, Any], steps: list[dict[str, Any]], runner: Runner, label: str) -> None:
    for index, step in enumerate(steps):
        got = runner.step(step)
        assert got == step["expect"], f"{label}, step {index} ({step['op']}): got {got}, expected {step['expect']}"


CASES = [(s, None) for s in TRACES["scenarios"]] + [(s, c) for s in TRACES["scenarios"] for c in s["crashes"]]


@pytest.mark.parametrize(
    "scenario, crash",
    CASES,
    ids=[s["name"] + ("" if c is None else f" / crash after step {c['after_step']}") for s, c in CASES],
)
def test_guard_trace(scenario: dict[str, Any], crash: dict[str, Any] | None) -> None:
    runner = Runner(scenario)
    if crash is None:
        _run(scenario, scenario["steps"], runner, scenario["name"])
        return
    _run(scenario, scenario["steps"][: crash["after_step"]], runner, scenario["name"])
    _run(scenario, crash["steps"], runner, f"{scenario['name']} / crash after step {crash['after_step']}")


def test_every_crash_point_is_covered() -> None:
    for scenario in TRACES["scenarios"]:
        points = [c["after_step"] for c in scenario["crashes"]]
        assert points[0] == 1 and points == sorted(set(points))
        # Every step boundary of the script, except inside a tick whose acks come back as the next step.
        for k in range(1, points[-1]):
            assert k in points or (
                scenario["steps"][k - 1]["op"] == "tick" and scenario["steps"][k]["op"] == "handover"
            )
        assert all(c["steps"][0]["op"] == "crash" for c in scenario["crashes"])
