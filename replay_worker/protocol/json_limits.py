"""How much JSON the protocol reads: the size and nesting limits of handover records and of the record values
a filter parses (HANDOVER.md section 2, "Limits", and section 4, step 5), and the exact check of both. Pure.

Every JSON parser has a nesting limit of its own, and they differ: Python's raises `RecursionError` near 1000
levels (less when the stack is already deep), Jackson refuses more than 1000, Go's encoding/json 10 000, and
Go's token reader none. A record between those limits was undecodable in one language and data in another,
so a Java guard and a Go replay disagreed on what the replay covers. The protocol's limits are far below all
of them, and each port checks them itself, before its parser runs, so that no parser's own limit is ever
reached and all ports agree at the boundary.

Depth counts the arrays and objects a value sits in: `1` is depth 0, `[]` and `{}` depth 1, `{"a":[1]}`
depth 2. A value deeper than the limit and a value that is not JSON get the same answer (undecodable), so the
depth is only needed exactly for valid JSON; on anything else the parser refuses it anyway.
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from typing import Any

#: Deepest nesting of a handover record's key or value, and of a record value a JSON filter parses. Real
#: records are a few levels deep (a `replay` record's filter values start at depth 6), and 64 is far below
#: every parser's own limit (Python about 1000, Jackson 1000, Go 10 000), which no port may ever reach.
MAX_DEPTH = 64

#: Largest handover-record value (bytes): Kafka's default `max.message.bytes` (1 MiB and a 12-byte batch
#: header), so every record a default topic accepts is readable, and one reader cannot be made to parse more.
MAX_RECORD_VALUE_BYTES = 1024 * 1024

#: Largest handover-record key (bytes). A key holds a replay id (the operator's: namespace/name/uid, under
#: 400 bytes), a kind, a topic (at most 249 characters) and a partition; every reader keeps each live key.
MAX_RECORD_KEY_BYTES = 4096

#: Largest record value a JSON filter reads (bytes); larger is undecodable before any other test (HANDOVER.md
#: section 4, step 5). The same 1 MiB: a topic with default settings never holds more, and a guard's poll
#: loop must not parse an unbounded document per record.
MAX_FILTER_VALUE_BYTES = 1024 * 1024

#: Longest integer literal (digits) of JSON the protocol reads; longer makes the value undecodable. Python's own
#: default (`sys.int_info.default_max_str_digits`): its parser refuses more, and Jackson and Go are set to agree
#: (Jackson's default, 1000 characters for any number, and Go's none, disagreed with it).
MAX_INTEGER_DIGITS = 4300


def _integer(text: str) -> int:
    """An integer literal under the protocol's rule, whatever the interpreter's own limit was set to."""
    digits = len(text) - (text[:1] == "-")
    if digits > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer of {digits} digits, more than {MAX_INTEGER_DIGITS}")
    return int(text) if digits <= 640 else int(Decimal(text))  # Decimal: not bound by the interpreter's limit


#: The decoder of the protocol's JSON. With the interpreter's default limit the C parser applies the rule itself
#: (no Python call per integer); a process that changed it (PYTHONINTMAXSTRDIGITS, or
#: `sys.set_int_max_str_digits` before this import) gets `_integer` for every integer.
decoder = (
    json.JSONDecoder() if sys.get_int_max_str_digits() == MAX_INTEGER_DIGITS else json.JSONDecoder(parse_int=_integer)
)


def loads(data: bytes | str) -> Any:
    """`json.loads` under the protocol's rules (its encoding detection included); the caller checks the limits
    of size and depth first."""
    if isinstance(data, bytes):
        data = data.decode(json.detect_encoding(data), "surrogatepass")
    return decoder.decode(data)


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_TO_PARENS = bytes.maketrans(b"[]{}", b"()()")


def too_deep(text: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when valid JSON `text` nests deeper than `limit` (exact for JSON; on other bytes any answer,
    because the parser then refuses them anyway).

    A value with at most `limit` opening brackets cannot be deeper: two counts decide the common record.
    Otherwise every step runs in C, never a Python loop per byte (a 1 MiB value costs milliseconds):
      - strings are cut out, because a bracket inside a string is not nesting. Escapes are dropped first
        (`\\\\`, then `\\"`: left to right, exactly how JSON pairs a backslash with what follows), so every `"`
        left opens or closes a string, and splitting on `"` leaves the outside at the even places;
      - what remains is reduced to its brackets, as `(` and `)`;
      - each `replace("()", "")` removes exactly the innermost level (it scans the text it was given, not its
        own result), so a text still not empty after `limit` passes is deeper than `limit`."""
    if text.count(b"[") + text.count(b"{") <= limit:
        return False
    if b'"' in text:
        if b"\\" in text:
            text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
        text = b"".join(text.split(b'"')[::2])
    nesting = text.translate(_TO_PARENS, _NOT_BRACKETS)
    for _ in range(limit):
        if not nesting:
            return False
        nesting = nesting.replace(b"()", b"")
    return bool(nesting)
