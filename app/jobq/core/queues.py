"""Queues: settings and the counts operators look at."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from jobq.core.context import Context
from jobq.domain.errors import NotFound
from jobq.domain.jobs import JobStatus
from jobq.domain.queues import QUEUE_SETTINGS
from jobq.store import queue_settings as settings_store
from jobq.store import records
from jobq.store.queries import Q
from jobq.store.records import JobCount, QueueRecord


def _entry(q: QueueRecord, counts: list[JobCount], oldest_ms: int | None) -> dict[str, Any]:
    by_status = {s.value: 0 for s in JobStatus}
    waiting_by_type: dict[str, int] = defaultdict(int)
    for c in counts:
        by_status[c.status] = by_status.get(c.status, 0) + c.n
        if c.status in (JobStatus.PENDING, JobStatus.FAILED):
            waiting_by_type[c.type] += c.n
    return {
        "name": q.name,
        "settings": q.settings,
        "counts": by_status,
        "waiting_by_type": dict(waiting_by_type),
        "oldest_waiting_ms": oldest_ms,
    }


async def _entries(ctx: Context, name: str | None) -> list[dict[str, Any]]:
    db = ctx.db
    async with db.connection() as conn:
        if name is None:
            rows = await db.run(conn, Q.QueueList)
        else:
            rows = await db.run(conn, Q.QueueGet, {"queue": name})
        queues = [records.queue(r, QUEUE_SETTINGS) for r in rows]
        counts = map(records.job_count, await db.run(conn, Q.QueueCounts, {"queue": name}))
        oldest = map(records.queue_lag, await db.run(conn, Q.QueueOldestWaiting, {"queue": name}))
    by_queue: dict[str, list[JobCount]] = defaultdict(list)
    for c in counts:
        by_queue[c.queue].append(c)
    lag = {r.queue: r.oldest_waiting_ms for r in oldest}
    return [_entry(q, by_queue[q.name], lag.get(q.name)) for q in queues]


async def list_queues(ctx: Context) -> list[dict[str, Any]]:
    return await _entries(ctx, None)


async def get_queue(ctx: Context, name: str) -> dict[str, Any]:
    entries = await _entries(ctx, name)
    if not entries:
        raise NotFound(f"queue {name!r} does not exist")
    return entries[0]


async def update_queue(ctx: Context, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Change some settings; a queue that does not exist yet is created, as on first use."""
    await ctx.ensure_queues([name])
    unknown = set(changes) - set(QUEUE_SETTINGS)
    if unknown:  # the API's schema already refuses these; this guards the SQL below
        raise ValueError(f"unknown settings {sorted(unknown)}")
    if changes:
        await settings_store.update(ctx.db, name, changes)
    ctx.forget_caps(name)
    if changes.get("paused") is False:
        ctx.wakeups.publish([name])
    return await get_queue(ctx, name)
