"""The dead-letter queue: replay and purge, by filter, in batches (no long-held locks)."""

from __future__ import annotations

from collections import Counter

from jobq.core.context import Context
from jobq.domain.errors import InvalidState
from jobq.store import records
from jobq.store.queries import Q

BATCH = 1000


async def _batched(ctx: Context, sql: str, queue: str | None, type_: str | None,
                   limit: int | None, event: str, scope: str | None) -> int:
    done = 0
    while limit is None or done < limit:
        size = BATCH if limit is None else min(BATCH, limit - done)
        changed = records.changes(
            await ctx.db.fetch(sql, {"queue": queue, "type": type_, "limit": size, "scope": scope}))
        if changed:
            ctx.events.emit(event, changed)
            if event == "replayed":
                ctx.wakeups.publish(Counter(c.queue for c in changed))
        done += len(changed)
        if len(changed) < size:
            break
    return done


async def replay(ctx: Context, *, queue: str | None, type_: str | None, limit: int | None,
                 scope: str | None = None) -> int:
    """Matching dead jobs go back to pending as a retry does; returns how many. ``scope``: a
    regular expression of the caller's queues, None for all."""
    return await _batched(ctx, Q.JobReplayDead, queue, type_, limit, "replayed", scope)


async def purge(ctx: Context, *, queue: str | None, type_: str | None, limit: int | None,
                scope: str | None = None) -> int:
    return await _batched(ctx, Q.JobPurgeDead, queue, type_, limit, "purged", scope)


async def purge_one(ctx: Context, job_id: str, scope: str | None = None) -> None:
    """Delete one dead job. NotFound for no such job; InvalidState for a job not dead."""
    from jobq.core.jobs import _id, get

    row = await ctx.db.fetch_one(Q.JobPurgeDeadOne, {"job_id": _id(job_id), "scope": scope})
    if row is None:
        current = await get(ctx, job_id, scope)  # raises NotFound
        raise InvalidState(f"job {job_id} is {current.status}: only a dead job can be purged")
    ctx.events.emit("purged", [records.change(row)])
