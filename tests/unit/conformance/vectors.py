"""Reading the committed vector files, as any port does: only the JSON, none of the generator's inputs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).resolve().parents[3] / "conformance" / "vectors"


def load(name: str) -> dict[str, Any]:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["name"] for case in cases]


def raw(obj: Any) -> bytes | None:
    """Bytes as the vectors write them: {"utf8": ...}, {"base64": ...}, {"utf8_repeat": [[text, n], ...]}
    (each text n times, concatenated), or null."""
    if obj is None:
        return None
    if "utf8_repeat" in obj:
        return b"".join(text.encode("utf-8") * times for text, times in obj["utf8_repeat"])
    if "utf8" in obj:
        return obj["utf8"].encode("utf-8")
    return base64.b64decode(obj["base64"], validate=True)


def headers(obj: Any) -> list[tuple[str, bytes | None]] | None:
    return None if obj is None else [(name, raw(value)) for name, value in obj]
