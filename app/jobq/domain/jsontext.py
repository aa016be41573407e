"""JSON text to Python values: orjson where it is exact, the standard library where not.

orjson reads an integer outside 64 bits as a float and loses its digits; the standard
library keeps every digit, and so does PostgreSQL's jsonb. Nineteen digits in a row may be
such an integer (or only digits inside a string, or a long fraction): such text takes the
exact way, everything else the fast one (2 to 10 times faster on small job payloads).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import orjson

_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def orjson_would_round(text: bytes) -> bool:
    return _LONG_NUMBER.search(text) is not None


def may_hold_nul(text: bytes) -> bool:
    """Whether JSON text may hold a NUL character, which PostgreSQL stores in neither text nor
    jsonb: the escape ``\\u0000`` (the only way UTF-8 JSON can carry one), or a zero byte
    (UTF-16 or UTF-32 text, which the standard library reads too). A byte scan, for every
    body; only a body it finds is read again (``nul_paths``)."""
    return b"\\u0000" in text or b"\x00" in text


def nul_paths(value: Any) -> Iterator[tuple[str | int, ...]]:
    """The path of every string, and every object key, in ``value`` holding a NUL character,
    in document order: ``("jobs", 3, "payload", "a")``, as pydantic names a field's place.
    A loop, not recursion: a body may nest as deeply as the parser allows."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                yield path
        elif isinstance(item, dict):
            for key in item:
                if "\x00" in key:
                    yield (*path, key)
            stack.extend(((*path, k), v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(item))))


def loads(text: bytes) -> Any:
    """A JSON value that PostgreSQL wrote (a jsonb column): valid JSON, so the two parsers
    differ only in how they read numbers."""
    if orjson_would_round(text):
        return json.loads(text)
    return orjson.loads(text)


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as jsonb compares them: numbers by decimal value,
    ``true`` apart from ``1``.

    Python's ``==`` gets both wrong for a value read back from jsonb. A float is written as
    its shortest text (``1e300``), which jsonb keeps as that exact decimal and hands back as
    a 301-digit integer: not equal to the float, so an exact retry of an enqueue was refused
    as an idempotency conflict. And ``True == 1`` would take a replay with another payload
    for the same one."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return _decimal(a) == _decimal(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _decimal(n: int | float) -> Decimal:
    # repr is the text the float was written to the database as (json.dumps uses it).
    return Decimal(repr(n)) if isinstance(n, float) else Decimal(n)
