"""How the vectors write values JSON has no type for: bytes, and absent bytes.

Bytes are `{"utf8": "..."}` when they are valid UTF-8 (the common case, readable in a diff) and
`{"base64": "..."}` (standard alphabet, padded) otherwise; `null` is absent (a null key, a tombstone's value,
a header without a value). Every runner decodes both forms (conformance/README.md).
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


def headers_to_json(headers: list[tuple[str, bytes | None]] | None) -> list[list[Any]] | None:
    return None if headers is None else [[name, to_json(value)] for name, value in headers]
