"""Ad-hoc reads whose filters vary: built with SQLAlchemy Core, run on the psycopg pool."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql

from jobq.store.tables import jobs

_DIALECT = postgresql.psycopg.dialect()  # type: ignore[attr-defined]


def jobs_page(
    *, queue: str | None, status: str | None, type_: str | None, before_id: int | None, limit: int,
    scope: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Newest first, keyset-paginated on id (``before_id`` is the last id of the previous
    page); ``scope`` keeps the queues a token may read. Fetches one row more than asked, to
    know whether another page follows."""
    stmt = select(jobs)
    if queue is not None:
        stmt = stmt.where(jobs.c.queue == queue)
    if status is not None:
        stmt = stmt.where(jobs.c.status == status)
    if type_ is not None:
        stmt = stmt.where(jobs.c.type == type_)
    if scope is not None:  # the caller's queues, as a regular expression
        stmt = stmt.where(jobs.c.queue.regexp_match(scope))
    if before_id is not None:
        stmt = stmt.where(jobs.c.id < before_id)
    stmt = stmt.order_by(jobs.c.id.desc()).limit(limit + 1)
    compiled = stmt.compile(dialect=_DIALECT)
    return str(compiled), dict(compiled.params)
