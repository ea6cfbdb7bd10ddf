"""How the vectors write values JSON has no type for: bytes, and absent bytes.

Bytes are `{"utf8": "..."}` when they are valid UTF-8 (the common case, readable in a diff) and
`{"base64": "..."}` (standard alphabet, padded) otherwise; `null` is absent (a null key, a tombstone's value,
a header without a value). Every runner decodes both forms.
"""

from __future__ import annotations

import base64
from typing import Any


def to_json(data: bytes | None) -> dict[str, str] | None:
    if data is None:
        return None
    try:
        return {"utf8": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def from_json(obj: Any) -> bytes | None:
    if obj is None:
        return None
    if set(obj) == {"utf8"}:
        return obj["utf8"].encode("utf-8")
    if set(obj) == {"base64"}:
        return base64.b64decode(obj["base64"], validate=True)
    raise ValueError(f"not a bytes value: {obj!r}")


def headers_to_json(headers: list[tuple[str, bytes | None]] | None) -> list[list[Any]] | None:
    return None if headers is None else [[name, to_json(value)] for name, value in headers]


def headers_from_json(obj: Any) -> list[tuple[str, bytes | None]] | None:
    return None if obj is None else [(name, from_json(value)) for name, value in obj]
