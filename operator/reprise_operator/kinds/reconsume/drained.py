"""When a Parallel or Handover replay is drained: each planned partition as the handover topic and the end
offsets show it, and the rule that every partition is finished (or, for a held shadow, at the live group).
Pure: the caller reads the handover topic and Kafka.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from replay_worker.contract import ReplayHandover, TopicPartitionKey

from .guard_report import guard_problem
from ...rules.progress import PartitionView
from ...rules.verify import shadow_caught_up


def replay_views(
    plan: dict[TopicPartitionKey, tuple[int, int]], ends: dict[TopicPartitionKey, int], state: ReplayHandover, mode: str
) -> list[PartitionView]:
    """Each planned partition as the handover topic and the end offsets show it now."""
    views = []
    for key, (start, _) in sorted(plan.items()):
        part = state.partitions.get(key)
        h = part.handover_offset if part else None
        acked = bool(part and part.acknowledged)
        reason = part.handover.reason if part and part.handover else ""
        views.append(
            PartitionView(
                topic=key[0],
                partition=key[1],
                start=start,
                end=ends[key],
                position=part.progress.position if part and part.progress else None,
                target=h,
                # Only the live side's acknowledgement hands a partition over; a Parallel replay that
                # reached the live group is CaughtUp (the state names the CRD documents).
                handed_over=acked and mode == "Handover",
                at_end=reason == "end-of-partition" or bool(part and part.progress and part.progress.at_end),
                handover_offset=h,
                finished=h is not None,
                guard_problem=guard_problem(part) if mode == "Handover" else None,
            )
        )
    return views


def replay_drained(
    state: ReplayHandover,
    views: Sequence[PartitionView],
    live: Mapping[TopicPartitionKey, int] | None = None,
    held: bool = False,
) -> bool:
    """The drained rule of a Parallel or Handover replay, before `completion.drainedFor` holds it: the replay
    has announced itself in the handover topic, and every planned partition is finished (a handover offset H
    recorded, and processed up to it). A held replay (`completion.hold`, a shadow) never finishes a partition:
    it is drained when it processed up to the live group's committed offsets as of now (`live`, None while
    not yet known)."""
    if not state.bootstrapped:
        return False
    if held:
        return live is not None and shadow_caught_up(views, live)
    return state.complete and all(view.done for view in views)
