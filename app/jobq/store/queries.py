"""The named SQL of queries.sql, loaded once at import.

``Q.JobClaim`` is the text of the block headed ``-- name: JobClaim``. A name that is not in the
file fails at import, not at the first request that needs it.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Final

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _load(path: Traversable) -> dict[str, str]:
    source = path.read_text(encoding="utf-8")
    parts = _NAME.split(source)
    # parts = [preamble, name1, body1, name2, body2, ...]
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";")
        if name in statements:
            raise ValueError(f"{path.name}: statement {name} is defined twice")
        statements[name] = sql
    return statements


class _Queries:
    def __init__(self, statements: dict[str, str]) -> None:
        self._statements = statements
        for name, sql in statements.items():
            setattr(self, name, sql)

    def __getattr__(self, name: str) -> str:  # only called for names that were not set
        raise AttributeError(f"no statement named {name} in queries.sql")

    def names(self) -> list[str]:
        return sorted(self._statements)


# Read through the package, so a wheel or a zip finds it as well as a checkout.
Q: Final = _Queries(_load(resources.files("jobq.store") / "queries.sql"))
