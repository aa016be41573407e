"""Writes the blocking ``Client`` (``_client.py``) from ``AsyncClient`` (``_async_client.py``).

The SDK has two faces with one set of calls. Kept by hand, the two files drifted; now the
async one is the source and this script makes the blocking one from it by token
substitutions (``async def`` -> ``def``, ``await x`` -> ``x``, ``asyncio.sleep`` ->
``time.sleep``...), as httpcore does with its unasync script. Standard library only.

    python -m jobq.client._unasync           # rewrite _client.py
    python -m jobq.client._unasync --check   # exit 1 if _client.py is not what it would write

tests/sdk/test_unasync.py runs the check, so an edit of either file alone fails the tests.
Lines of the async source that hold only for asyncio are marked with a comment starting
``# async only:``; the marked comment line and nothing else is dropped.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
SOURCE: Final = HERE / "_async_client.py"
TARGET: Final = HERE / "_client.py"

HEADER: Final = (
    "# Generated from _async_client.py by _unasync.py: do not edit. Change the async client\n"
    "# and run `python -m jobq.client._unasync` (tests/sdk/test_unasync.py checks this file).\n"
    '"""``Client``: the blocking SDK, call for call the ``AsyncClient`` it is generated from."""\n'
)

# (pattern, replacement), applied in this order to the whole text after the module docstring.
SUBSTITUTIONS: Final[tuple[tuple[str, str], ...]] = (
    (r"^[ \t]*# async only:.*\n", ""),
    (r"^import asyncio\n", ""),
    (r"[ \t]*# noqa: ASYNC\d+", ""),
    (r"\bAsyncClient\b", "Client"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncBaseTransport\b", "BaseTransport"),
    (r"\bdefault_async_transport\b", "default_transport"),
    (r"\bhandle_async_request\b", "handle_request"),
    (r"\baread\b", "read"),
    (r"\baclose\b", "close"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\basync (def|with|for)\b", r"\1"),
    (r"\bawait ", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\bAn asyncio client\b", "A blocking client"),
    # An async generator cannot "yield from"; a blocking one should (ruff's UP028).
    (r"^([ \t]*)for (\w+) in (.+):\n[ \t]*yield \2\n", r"\1yield from \3\n"),
)

_DOCSTRING: Final = re.compile(r'\A"""(?:.|\n)*?"""\n')
_FROM_IMPORT: Final = re.compile(r"^(from [\w.]+ import )([\w, ]+)$", re.MULTILINE)


def _isort_key(name: str) -> tuple[int, str]:
    # isort's order within one import: CONSTANTS, then Classes, then functions.
    if name.isupper() and len(name) > 1:
        return 0, name
    return (1 if name[:1].isupper() else 2), name


def _sort_names(match: re.Match[str]) -> str:
    names = sorted((n.strip() for n in match.group(2).split(",")), key=_isort_key)
    return match.group(1) + ", ".join(names)


def unasync(source: str) -> str:
    """The blocking client's source made from the async client's."""
    docstring = _DOCSTRING.match(source)
    if docstring is None:
        raise ValueError("the async client must open with its module docstring")
    text = source[docstring.end() :]
    for pattern, replacement in SUBSTITUTIONS:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    # A renamed name can move within its import line (AsyncIterator -> Iterator).
    text = _FROM_IMPORT.sub(_sort_names, text)
    return HEADER + text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobq.client._unasync", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if _client.py is stale")
    args = parser.parse_args(argv)
    wanted = unasync(SOURCE.read_text(encoding="utf-8"))
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    if current == wanted:
        return 0
    if args.check:
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            fromfile=f"{TARGET.name} (committed)",
            tofile=f"{TARGET.name} (generated from {SOURCE.name})",
        )
        sys.stderr.writelines(diff)
        sys.stderr.write(f"{TARGET.name} is stale: run python -m jobq.client._unasync\n")
        return 1
    TARGET.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
