"""Writing a queue's settings: the one statement whose column list varies."""

from __future__ import annotations

from typing import Any

from jobq.store.db import Database
from jobq.store.queries import Q
from jobq.store.tables import queues

_COLUMNS = frozenset(c.name for c in queues.columns) - {"name", "created_at"}


async def update(db: Database, name: str, changes: dict[str, Any]) -> None:
    """Set the given settings; a change of aging_ms re-keys the queue's waiting jobs in the
    same transaction, so the aging claim never sees a stale order."""
    unknown = set(changes) - _COLUMNS
    if unknown:  # column names are never taken from a client
        raise ValueError(f"unknown queue settings {sorted(unknown)}")
    assignments = ", ".join(f"{k} = %({k})s" for k in changes)
    async with db.transaction() as conn:
        await conn.execute(f"UPDATE queues SET {assignments} WHERE name = %(queue)s",
                           {**changes, "queue": name})
        if "aging_ms" in changes:
            await conn.execute(Q.QueueAgedKeysReset, {"queue": name})
