"""What a demo's ledger says about the guarantee of a Handover replay (replay_worker/HANDOVER.md, section 7).
Pure: the demos read their ledgers and hand the offsets in.

Reprise guarantees, per partition: from F on (the first record the guard skipped, which is the first record
the replay applied and the live group did not) no record is processed by both groups, and no record is lost.
That is what `check` holds a ledger to, no more and no less:

- **both**: a record from F on applied by the live group and by the replay. A failure of the handover.
- **lost**: a record from `since` on (the live group's committed offset when the replay was created; everything
  before it was history the live group had done) that neither group applied. A failure of the handover.
- **repeats**: a record the *same* group applied more than once. Not the handover's doing: it is that group's
  own at-least-once delivery (a batch applied whose commit failed in a rebalance, or a process that died before
  committing; the new owner reads from the last commit). Counted and shown apart, with its cause; it does not
  fail the check. A service that keeps its offsets with its rows recognises such deliveries and applies them
  once: those are counted as `redelivered`.

Records the replay applied below F are the history it was made to redo: the live group applied them before
the replay began, which is the point of a reconsume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class PartitionLedger:
    """One partition's ledger, from `since` on."""

    #: offset -> times the live group applied it.
    live: Mapping[int, int]
    #: offset -> times the replay applied it.
    replay: Mapping[int, int]
    #: The live group's committed offset when the replay was created.
    since: int
    #: The partition's end offset once live traffic stopped and the live group caught up.
    end: int
    #: The handover offset H from the replay's status, when it has one.
    handover: int | None = None
    #: Deliveries of records the same group had applied, recognised by the ledger and not applied again.
    redelivered: int = 0


@dataclass
class Verdict:
    #: F per partition (the handover offset where the guard skipped nothing; absent when neither is known).
    first_skipped: dict[int, int] = field(default_factory=dict)
    #: Records from F on, over all partitions.
    checked: int = 0
    both: list[tuple[int, int]] = field(default_factory=list)
    lost: list[tuple[int, int]] = field(default_factory=list)
    #: "live" / "replay" -> records that group applied more than once.
    repeats: dict[str, int] = field(default_factory=lambda: {"live": 0, "replay": 0})
    redelivered: int = 0
    applied: dict[str, int] = field(default_factory=lambda: {"live": 0, "replay": 0})

    @property
    def ok(self) -> bool:
        """The handover's guarantee held (same-group repeats are the service's, and do not count)."""
        return not self.both and not self.lost

    def lines(self, repeat_cause: str) -> list[str]:
        """What a demo prints: the guarantee's counts, then the same-group repeats apart with `repeat_cause`."""
        shown = [
            f"ledger: {self.applied['live']:,} records applied by the live group and {self.applied['replay']:,} by "
            f"the replay since it began; {self.checked:,} from the first skipped offsets on: "
            f"{len(self.both)} applied by both groups, {len(self.lost)} lost"
            + (f" (first: {_named(self.both or self.lost)})" if self.both or self.lost else "")
        ]
        if self.repeats["live"] or self.repeats["replay"]:
            shown.append(
                f"ledger: same group, not the handover: {self.repeats['live']} records applied again by the live "
                f"group, {self.repeats['replay']} by the replay ({repeat_cause})"
            )
        if self.redelivered:
            shown.append(
                f"ledger: same group, not the handover: {self.redelivered} deliveries of records the group had "
                f"applied were recognised by its ledger and not applied again ({repeat_cause})"
            )
        return shown


def first_skipped(part: PartitionLedger) -> int | None:
    """F: the first offset from `since` on that the replay applied and the live group did not; where the guard
    skipped nothing (the replay was done before the live group got there), the handover offset."""
    skipped = [o for o in part.replay if o >= part.since and o not in part.live]
    if skipped:
        return min(skipped)
    return part.handover


def check(partitions: Mapping[int, PartitionLedger]) -> Verdict:
    verdict = Verdict()
    for p, part in sorted(partitions.items()):
        live = {o: n for o, n in part.live.items() if o >= part.since}
        replay = {o: n for o, n in part.replay.items() if o >= part.since}
        verdict.applied["live"] += len(live)
        verdict.applied["replay"] += len(replay)
        verdict.repeats["live"] += sum(1 for n in live.values() if n > 1)
        verdict.repeats["replay"] += sum(1 for n in replay.values() if n > 1)
        verdict.redelivered += part.redelivered
        first = first_skipped(part)
        if first is not None:
            verdict.first_skipped[p] = first
            verdict.checked += max(0, part.end - first)
            verdict.both.extend((p, o) for o in sorted(live) if o >= first and o in replay)
        verdict.lost.extend((p, o) for o in range(part.since, part.end) if o not in live and o not in replay)
    return verdict


def _named(records: list[tuple[int, int]]) -> str:
    return ", ".join(f"partition {p} offset {o}" for p, o in records[:3]) + (" ..." if len(records) > 3 else "")
