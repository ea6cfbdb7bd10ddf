"""How the vectors write values JSON has no type for: bytes, and absent bytes.

Bytes are `{"utf8": "..."}` when they are valid UTF-8 (the common case, readable in a diff) and
`{"base64": "..."}` (standard alphabet, padded) otherwise; `null` is absent (a null key, a tombstone's value,
a header without a value). Every runner decodes both forms (conformance/README.md).

Values made to test the size and nesting limits (a megabyte, five thousand brackets) are written as
`{"utf8_repeat": [["text", n], ...]}`: the concatenation of each text repeated n times, as UTF-8, so a 10 MB
case is a few bytes of the vector file.
"""

from __future__ import annotations

import base64
from typing import Any


class Repeated(bytes):
    """Bytes that remember how they were built, so the vectors write them as `utf8_repeat`."""

    parts: tuple[tuple[str, int], ...]

    def __new__(cls, *parts: tuple[str, int]) -> "Repeated":
        made = super().__new__(cls, b"".join(text.encode("utf-8") * times for text, times in parts))
        made.parts = parts
        return made


def to_json(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    if isinstance(data, Repeated):
        return {"utf8_repeat": [[text, times] for text, times in data.parts]}
    try:
        return {"utf8": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def headers_to_json(headers: list[tuple[str, bytes | None]] | None) -> list[list[Any]] | None:
    return None if headers is None else [[name, to_json(value)] for name, value in headers]
