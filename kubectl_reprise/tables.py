"""How the plugin prints: aligned tables, durations and ages, the plan, `get` and `status`. Pure: bodies and
plans in, text out, so every rendering is unit-tested without a cluster."""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Sequence

from reprise_operator.api import KindDefinition
from replay_worker.contract import parse_rfc3339, rfc3339


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """kubectl's layout: upper-case headers, columns three spaces apart, no borders."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def duration(seconds: float | int | None) -> str:
    """`45s`, `3m5s`, `2h10m`, `3d4h`; `-` when unknown."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if (s % 3600) // 60 else f"{s // 3600}h"
    return f"{s // 86400}d{(s % 86400) // 3600}h" if (s % 86400) // 3600 else f"{s // 86400}d"


def parse_time(text: str | None) -> datetime | None:
    """A time from a status (`startedAt`, `oldestTimestamp`), or None when it is not set."""
    return parse_rfc3339(text) if text else None


def age(stamp: str | None, now: datetime) -> str:
    moment = parse_time(stamp)
    return "-" if moment is None else duration(max(0.0, (now - moment).total_seconds()))


# ------------------------------------------------------------------------------------------ plan


def plan_text(shown: dict, now: datetime) -> str:
    """The per-partition plan, as `status.plan` holds it, with the span from each start record to now."""
    rows = []
    for p in shown.get("partitions") or []:
        oldest = parse_time(p.get("oldestTimestamp"))
        span = duration((now - oldest).total_seconds()) if oldest else "-"
        rows.append(
            (
                p["topic"],
                p["partition"],
                p["startOffset"],
                p["endOffset"],
                p["records"],
                p.get("oldestTimestamp", "-"),
                span,
                p["retentionRisk"],
            )
        )
    rows.append(
        (
            "TOTAL",
            "",
            "",
            "",
            shown.get("totalRecords", 0),
            shown.get("oldestTimestamp", ""),
            "",
            shown.get("retentionRisk", ""),
        )
    )
    return table(("TOPIC", "PARTITION", "START", "END", "RECORDS", "FIRST RECORD", "SPAN", "RETENTION"), rows)


def plan_report(found, source: str) -> str:
    """`kubectl reprise plan` for one manifest: who, the table, the estimate, what a Rewind stops."""
    lines = [
        f"{found.kind} {found.namespace}/{found.name}: mode {found.mode}, live group {found.spec.consumer_group}, "
        f"Kafka {found.spec.kafka.bootstrap_servers}",
        "",
        plan_text(found.status_plan, found.plan.computed_at),
        "",
        f"{found.status_plan['totalRecords']} records in {found.status_plan['partitionCount']} partitions; "
        f"estimated duration {duration(found.estimated_seconds)} at {found.rate_per_consumer:g} records/s per "
        f"consumer x {found.consumers} consumer(s)",
    ]
    if found.rewind is not None:
        r = found.rewind
        members = f"{len(r.members)} member(s)" if r.members else "no members"
        lines.append(
            f"Rewind stops Deployment {found.namespace}/{r.deployment} ({r.replicas} replica(s)) and moves the offsets "
            f"of group {r.group} (now {r.group_state}, {members}); the old offsets are kept in ConfigMap "
            f"{found.name}-rollback (kubectl reprise rollback {found.name})"
        )
    else:
        lines.append(
            f"Runs {found.consumers} replay consumer(s) cloned from Deployment "
            f"{found.spec.consumer.deployment_ref.name if found.spec.consumer.deployment_ref else '(template)'}; "
            f"the live group is not touched"
        )
    lines.append(f"Nothing was created. To run it: kubectl apply -n {found.namespace} -f {source}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ get / status


def condition(body: dict, type_: str) -> dict | None:
    return next((c for c in (body.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)


def mode_of(kind: KindDefinition, body: dict) -> str:
    spec = body.get("spec") or {}
    if kind.kind == "Reconsume":
        return spec.get("mode", "")
    if kind.kind == "Backfill":
        return ((spec.get("source") or {}).get("kind") or next(iter(spec.get("source") or {}), "")) or ""
    return "Lake"


def get_table(items: list[tuple[KindDefinition, dict]], now: datetime, all_namespaces: bool) -> str:
    rows = []
    for kind, body in items:
        status = body.get("status") or {}
        progress = status.get("progress") or {}
        percent = progress.get("percent")
        row = [
            f"{kind.singular}/{body['metadata']['name']}",
            status.get("phase", "Pending"),
            mode_of(kind, body),
            f"{percent}%" if percent is not None else "",
            progress.get("lag", ""),
            duration(progress.get("etaSeconds")) if progress.get("etaSeconds") is not None else "",
            age(body["metadata"].get("creationTimestamp"), now),
        ]
        if all_namespaces:
            row.insert(0, body["metadata"].get("namespace", ""))
        rows.append(row)
    headers = ["NAME", "PHASE", "MODE", "PROGRESS", "LAG", "ETA", "AGE"]
    if all_namespaces:
        headers.insert(0, "NAMESPACE")
    return table(headers, rows)


def status_text(kind: KindDefinition, body: dict, now: datetime) -> str:
    """One replay: what it is, its phase, conditions, plan and per-partition progress."""
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    progress = status.get("progress") or {}
    lines = [
        f"{kind.kind} {meta.get('namespace')}/{meta['name']}   phase {status.get('phase', 'Pending')}   "
        f"mode {mode_of(kind, body)}   age {age(meta.get('creationTimestamp'), now)}",
    ]
    if spec.get("consumerGroup"):
        lines.append(f"live group {spec['consumerGroup']}, topics {', '.join(spec.get('topics') or [])}")
    if spec.get("drainGroup"):
        lines.append(f"drain group {spec['drainGroup']} on the backfill topic")
    if progress:
        lines.append(
            f"progress {progress.get('percent', 0)}%  {progress.get('processed', 0)}/{progress.get('totalRecords', 0)} "
            f"records  lag {progress.get('lag', 0)}  ETA {duration(progress.get('etaSeconds'))}"
        )
    conditions = status.get("conditions") or []
    if conditions:
        lines += [
            "",
            table(
                ("CONDITION", "STATUS", "REASON", "SINCE", "MESSAGE"),
                [
                    (
                        c.get("type"),
                        c.get("status"),
                        c.get("reason", ""),
                        age(c.get("lastTransitionTime"), now),
                        c.get("message", ""),
                    )
                    for c in conditions
                ],
            ),
        ]
    plan = {(p["topic"], p["partition"]): p for p in (status.get("plan") or {}).get("partitions") or []}
    parts = {(p["topic"], p["partition"]): p for p in progress.get("partitions") or []}
    keys = sorted(set(plan) | set(parts))
    if keys and all(isinstance(k[0], str) for k in keys):
        rows = []
        for key in keys:
            planned, now_at = plan.get(key, {}), parts.get(key, {})
            rows.append(
                (
                    key[0],
                    key[1],
                    planned.get("startOffset", ""),
                    planned.get("endOffset", ""),
                    now_at.get("position", ""),
                    now_at.get("handoverOffset", ""),
                    now_at.get("lag", ""),
                    now_at.get("state", "Pending" if planned else ""),
                    planned.get("retentionRisk", ""),
                )
            )
        lines += [
            "",
            table(("TOPIC", "PARTITION", "START", "END", "POSITION", "HANDOVER", "LAG", "STATE", "RETENTION"), rows),
        ]
    lines += verification_lines(meta["name"], status)
    rollback = status.get("rollback") or {}
    if rollback.get("configMap"):
        lines += [
            "",
            f"rollback snapshot in ConfigMap {rollback['configMap']} (taken {rollback.get('takenAt', '-')}): "
            f"kubectl reprise rollback {meta['name']}",
        ]
    return "\n".join(lines)


def verification_lines(name: str, status: dict) -> list[str]:
    """spec.verify and completion.hold: the check's state, and what a person can do next."""
    verification = status.get("verification") or {}
    if not verification:
        return []
    lines = [
        "",
        f"verification {verification.get('state', 'Waiting')}"
        + (f"   Job {verification['job']} (run {verification.get('run', 1)})" if verification.get("job") else ""),
    ]
    if verification.get("message"):
        lines.append(f"  {verification['message']}")
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if (conditions.get("CutoverApproved") or {}).get("status") == "False":
        lines.append(f"holding for the cutover: kubectl reprise approve {name}")
    if status.get("phase") == "Failed" and (conditions.get("Failed") or {}).get("reason") == "VerifyFailed":
        lines.append(
            f"the replay's children are kept; after a fix, run the check again: kubectl reprise reverify {name}"
        )
    return lines


def utc(moment: datetime) -> str:
    return rfc3339(moment)
