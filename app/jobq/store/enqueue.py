"""The one-statement batch enqueue (JobEnqueueMany), for core: its rows, or None when the
statement declined, or found a key of the batch taken by an enqueue that committed meanwhile
(a unique violation, which undid the statement). Either way nothing was written, and the
caller takes the transaction's way (JobInsertMany), which words every refusal."""

from __future__ import annotations

import psycopg.errors

from jobq.store.db import Database, Row
from jobq.store.queries import Q


async def insert_new(db: Database, jobs_json: str, n: int) -> list[Row] | None:
    """``jobs_json``: JobInsertMany's JSON list of ``n`` jobs."""
    try:
        rows = await db.fetch(Q.JobEnqueueMany, {"jobs": jobs_json})
    except psycopg.errors.UniqueViolation:
        return None
    return rows if len(rows) == n else None
