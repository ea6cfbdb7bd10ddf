"""The conformance vectors: language-neutral JSON generated from the Python reference, which every port of
the handover protocol (the Java and Go guards and replay roles) runs. `conformance/README.md` at the
repository's root describes each file's format and how a port runs it.

`python -m replay_worker.conformance` (`make vectors`) writes them; `--check` says which files drifted
from the reference (the unit tests run the same check).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from . import (
    commit_mark_cases,
    filter_cases,
    finish_cases,
    guard_traces,
    replay_traces,
    schema_filter_cases,
    settings_cases,
    settings_page,
    start_cases,
    wire_cases,
)

REPOSITORY = Path(__file__).resolve().parents[2]
VECTOR_DIR = Path("conformance") / "vectors"

#: File name -> the function that builds its document, one per protocol area.
AREAS: dict[str, Callable[[], dict[str, Any]]] = {
    "filters.json": filter_cases.document,
    "wire.json": wire_cases.document,
    "commit_marks.json": commit_mark_cases.document,
    "guard_traces.json": guard_traces.document,
    "replay_start.json": start_cases.document,
    "replay_finish.json": finish_cases.document,
    "replay_traces.json": replay_traces.document,
    "settings.json": settings_cases.document,
    "schema_filters.json": schema_filter_cases.document,
}


def dumps(document: dict[str, Any]) -> str:
    """The file's text: stable (insertion order), UTF-8, one trailing newline; one case or step per line, so
    a diff after a rule change shows the cases that changed."""
    return _render(document, 0) + "\n"


def _compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def _render(obj: Any, level: int) -> str:
    one_line = _compact(obj)
    inline = (
        not isinstance(obj, (dict, list))
        or not obj
        or len(one_line) <= 100
        or (isinstance(obj, dict) and ("op" in obj or ("name" in obj and "steps" not in obj)))
    )
    if inline:
        return one_line
    pad, inner = " " * level, " " * (level + 1)
    if isinstance(obj, dict):
        body = ",\n".join(
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {_render(v, level + 1)}" for k, v in obj.items()
        )
        return "{\n" + body + "\n" + pad + "}"
    return "[\n" + ",\n".join(inner + _render(v, level + 1) for v in obj) + "\n" + pad + "]"


def render() -> dict[str, str]:
    return {name: dumps(build()) for name, build in AREAS.items()}


def write(root: Path = REPOSITORY) -> list[Path]:
    target = root / VECTOR_DIR
    target.mkdir(parents=True, exist_ok=True)
    page = root / settings_page.PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(settings_page.render(), encoding="utf-8")
    written = [page]
    for name, text in render().items():
        (target / name).write_text(text, encoding="utf-8")
        written.append(target / name)
    return written


def drifted(root: Path = REPOSITORY) -> list[str]:
    """Vector files that differ from what the reference generates now (or are missing, or left over)."""
    target = root / VECTOR_DIR
    rendered = render()
    stale = [
        name
        for name, text in rendered.items()
        if not (target / name).exists() or (target / name).read_text(encoding="utf-8") != text
    ]
    stale += [p.name for p in sorted(target.glob("*.json")) if p.name not in rendered]
    page = root / settings_page.PAGE
    if not page.exists() or page.read_text(encoding="utf-8") != settings_page.render():
        # The rendered table of the REPRISE_* environment: named from the root, not from the vector folder.
        stale.append(f"../../{settings_page.PAGE}")
    return stale
