"""What operators watch besides the queue counts: the workers seen lately and the jobs
finished per minute. Both are read from PostgreSQL, so every replica answers alike."""

from __future__ import annotations

from typing import Any

from jobq.core.context import Context
from jobq.store import records
from jobq.store.queries import Q

MAX_WORKERS = 1000


async def workers(ctx: Context, window_s: int) -> list[dict[str, Any]]:
    """Workers holding running jobs, or that finished one in the last ``window_s`` seconds,
    with how many jobs each runs now. A worker that only asked for work and got none is not
    seen: the service keeps no record of empty claims."""
    rows = await ctx.db.fetch(Q.WorkersSeen, {"window_s": window_s, "limit": MAX_WORKERS})
    return [records.worker_seen(r)._asdict() for r in rows]


async def throughput(ctx: Context, minutes: int) -> list[dict[str, Any]]:
    """Per queue, the jobs that completed and that died in each of the last ``minutes``
    minutes, oldest first (the last entry is the minute under way)."""
    async with ctx.db.connection() as conn:
        queues = [records.queue(r, ()).name for r in await ctx.db.run(conn, Q.QueueList)]
        rows = map(records.finished, await ctx.db.run(conn, Q.QueueThroughput, {"minutes": minutes}))
    series = {q: {"completed": [0] * minutes, "dead": [0] * minutes} for q in queues}
    for f in rows:
        per = series.setdefault(f.queue, {"completed": [0] * minutes, "dead": [0] * minutes})
        per[f.status][minutes - 1 - max(f.minutes_ago, 0)] += f.n
    return [{"name": q, **per} for q, per in sorted(series.items())]
