"""What operators watch besides the queue counts: the workers seen lately and the jobs
finished per minute. Both are read from PostgreSQL, so every replica answers alike."""

from __future__ import annotations

from typing import Any

from jobq.core.context import Context
from jobq.domain.workers import FORGET_AFTER_S, Beat
from jobq.store import records
from jobq.store.queries import Q

MAX_WORKERS = 1000


async def workers(ctx: Context, window_s: int) -> list[dict[str, Any]]:
    """Workers that beat in the last ``window_s`` seconds, hold running jobs, or finished
    one in that window, with how many jobs each runs now and what each said of itself. A
    worker that neither beats nor got a job is not seen: the service keeps no record of
    empty claims."""
    rows = await ctx.db.fetch(Q.WorkersSeen, {"window_s": window_s, "limit": MAX_WORKERS})
    return [records.worker_seen(r)._asdict() for r in rows]


async def beat(ctx: Context, b: Beat) -> records.WorkerRow:
    """Record a worker's beat (one upsert): what it says of itself, seen now."""
    row = await ctx.db.fetch_one(Q.WorkerBeat, {
        "worker_id": b.worker_id, "host": b.host, "pid": b.pid, "concurrency": b.concurrency,
        "queues": b.queues, "in_flight": b.in_flight, "started_at": b.started_at,
        "state": None if b.state is None else b.state.value})
    assert row is not None  # an upsert returns its row
    return records.worker_row(row)


async def forget_workers(ctx: Context, after_s: int = FORGET_AFTER_S) -> int:
    """The leader's upkeep: delete the rows of workers silent for ``after_s`` seconds;
    returns how many went."""
    return len(await ctx.db.fetch(Q.WorkersForget, {"after_s": after_s}))


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
