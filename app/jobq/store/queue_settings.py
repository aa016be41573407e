"""Writing a queue's settings: the one statement whose column list varies."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sqlalchemy.dialects.postgresql import JSONB

from jobq.store.db import Database, dumps_json
from jobq.store.queries import Q
from jobq.store.tables import queues

log = logging.getLogger("jobq.store")

_COLUMNS = frozenset(c.name for c in queues.columns) - {"name", "created_at"}
# Settings that are JSON objects (the rate limits), sent as JSON text.
_JSON = frozenset(c.name for c in queues.columns if isinstance(c.type, JSONB))
# How often a change of aging_ms looks whether the writers it waits for have finished.
_WRITERS_POLL_S = 0.01


async def update(db: Database, name: str, changes: dict[str, Any]) -> None:
    """Set the given settings; a change of aging_ms re-keys the queue's waiting jobs in the
    same transaction, so the aging claim never sees a stale order, and once more after the
    writers that may have read the old setting have finished."""
    unknown = set(changes) - _COLUMNS
    if unknown:  # column names are never taken from a client
        raise ValueError(f"unknown queue settings {sorted(unknown)}")
    assignments = ", ".join(f"{k} = %({k})s::jsonb" if k in _JSON else f"{k} = %({k})s"
                            for k in changes)
    values = {k: dumps_json(v) if k in _JSON and v is not None else v for k, v in changes.items()}
    async with db.transaction() as conn:
        await db.run(conn, f"UPDATE queues SET {assignments} WHERE name = %(queue)s",
                     {**values, "queue": name})
        if "aging_ms" in changes:
            await db.run(conn, Q.QueueAgedKeysReset, {"queue": name})
    if "aging_ms" in changes:
        await _rekey_late_writers(db, name)


async def _rekey_late_writers(db: Database, name: str) -> None:
    """Key the jobs that writers which read the old aging_ms commit after our re-key.

    An enqueue, retry or reap that began before the change committed computed its jobs' keys
    from the old setting, and the re-key above could not see its rows. Once every transaction
    that was writing jobs when the change committed has ended, no such row can appear any
    more (a writer takes its table lock before its snapshot, so one that starts later reads
    the new setting); re-keying then catches them all. This replaces a sweep of the whole
    table every second for keys left NULL."""
    await wait_for_job_writers(db, f"queue {name}: aging_ms changed", "jobs they wrote may "
                               "keep a key from the old setting")
    await db.fetch(Q.QueueAgedKeysReset, {"queue": name})


async def wait_for_job_writers(db: Database, what: str, risk: str) -> None:
    """Wait until every transaction that is writing jobs now (other than ours) has ended.

    A writer that read a queue's row before a change to it committed may commit rows made
    from what it read; once these have ended, none can appear any more. ``what`` and ``risk``
    word the warning logged if one outlives the wait (only a transaction outside jobq does)."""
    row = await db.fetch_one(Q.JobWritersInFlight)
    waiting = set(row["writers"] if row else [])
    deadline = time.monotonic() + 3 * db.timeout_s
    while waiting:
        if time.monotonic() > deadline:
            log.warning("%s while %d transactions kept writing jobs; %s", what, len(waiting), risk)
            break
        await asyncio.sleep(_WRITERS_POLL_S)
        row = await db.fetch_one(Q.JobWritersInFlight)
        waiting &= set(row["writers"] if row else [])
