"""The one-statement batch enqueue (JobEnqueueMany), for core: its rows, or None when the
statement declined, or found a key of the batch taken by an enqueue that committed meanwhile
(a unique violation, which undid the statement). Either way nothing was written, and the
caller takes the transaction's way (JobInsertMany), which words every refusal."""

from __future__ import annotations

from typing import Any

import psycopg.errors

from jobq.store.db import Database, Row
from jobq.store.queries import Q

# JobInsert's hand-off parameters for an insert that leases its job to no one (see the statement).
NOT_LEASED: dict[str, None] = {"lease_worker": None, "lease_token_id": None, "lease_ms": None}


def leased_to(worker_id: str, lease_ms: int | None, token_id: str | None) -> dict[str, Any]:
    """JobInsert's hand-off parameters: lease the job, if it is claimable now, to ``worker_id``
    for ``lease_ms`` (None: the queue's) under the access token ``token_id`` (None: one that
    nothing revokes)."""
    return {"lease_worker": worker_id, "lease_token_id": token_id, "lease_ms": lease_ms}


async def insert_new(db: Database, jobs_json: str, n: int) -> list[Row] | None:
    """``jobs_json``: JobInsertMany's JSON list of ``n`` jobs."""
    try:
        rows = await db.fetch(Q.JobEnqueueMany, {"jobs": jobs_json})
    except psycopg.errors.UniqueViolation:
        return None
    return rows if len(rows) == n else None
