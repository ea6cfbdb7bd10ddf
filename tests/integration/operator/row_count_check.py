"""The verify Job of the end-to-end tests: counts the rows of the replay's sink against the live topic.

Run by the node agent as `python -m tests.integration.operator.row_count_check`, with the environment
Reprise gives a check (REPRISE_PLAN, REPRISE_REPLAY_GROUP, REPRISE_BOOTSTRAP_SERVERS, REPRISE_TOPICS) and the
sink folder (REPRISE_TEST_SINK_DIR). For each planned partition it reads where the replay group stands in
the topic, then requires one sink row per offset from the plan's start up to there: the replay's rows must
match the live topic's records, record for record. A mismatch is written to the termination message file
(/dev/termination-log, mapped by the node agent as a kubelet maps it) and the check exits 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition


def replay_positions(bootstrap: str, group: str, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = reader.committed([TopicPartition(t, p) for t, p in keys], timeout=30)
    finally:
        reader.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def sink_rows(folder: Path) -> dict[tuple[str, int], set[int]]:
    rows: dict[tuple[str, int], set[int]] = {}
    for path in folder.glob("replay-*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "R":
                rows.setdefault((parts[1], int(parts[2])), set()).add(int(parts[3]))
    return rows


def mismatches(
    plan: list[dict], positions: dict[tuple[str, int], int], rows: dict[tuple[str, int], set[int]]
) -> list[str]:
    found = []
    for part in plan:
        key = (part["topic"], part["partition"])
        stop = positions.get(key)
        if stop is None or stop < part["endOffset"]:
            found.append(
                f"{key[0]}/{key[1]}: the replay group is at {stop}, short of the plan's end {part['endOffset']}"
            )
            continue
        expected = stop - part["startOffset"]
        got = len([o for o in rows.get(key, ()) if part["startOffset"] <= o < stop])
        if got != expected:
            missing = sorted(set(range(part["startOffset"], stop)) - rows.get(key, set()))
            found.append(
                f"{key[0]}/{key[1]}: {got} rows in the sink for {expected} records in the topic "
                f"(first missing offset {missing[0] if missing else '-'})"
            )
    return found


def main() -> int:
    plan = json.loads(os.environ["REPRISE_PLAN"])
    positions = replay_positions(
        os.environ["REPRISE_BOOTSTRAP_SERVERS"],
        os.environ["REPRISE_REPLAY_GROUP"],
        [(p["topic"], p["partition"]) for p in plan],
    )
    rows = sink_rows(Path(os.environ["REPRISE_TEST_SINK_DIR"]))  # read after the positions: rows precede commits
    problems = mismatches(plan, positions, rows)
    checked = sum(positions.get((p["topic"], p["partition"]), 0) - p["startOffset"] for p in plan)
    if problems:
        message = "row count mismatch: " + "; ".join(problems)
        Path(os.environ.get("REPRISE_TERMINATION_LOG", "/dev/termination-log")).write_text(message)
        print(message, file=sys.stderr)
        return 1
    print(f"rows match: {checked} records in {len(plan)} partitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
