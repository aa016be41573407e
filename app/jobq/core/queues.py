"""Queues: settings and the counts operators look at."""

from __future__ import annotations

import base64
import binascii
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from jobq.core import counters
from jobq.core.context import Context
from jobq.domain.errors import InvalidInput, NotFound, QueueNotEmpty
from jobq.domain.jobs import JobStatus
from jobq.domain.queues import QUEUE_SETTINGS, jobs_by_status
from jobq.store import queue_settings as settings_store
from jobq.store import records
from jobq.store.db import Connection, Database
from jobq.store.queries import Q
from jobq.store.records import JobCount, QueueRecord, QueueUsage, RateUse

log = logging.getLogger("jobq.queues")


def _entry(q: QueueRecord, counts: list[JobCount], oldest_ms: int | None,
           rate_use: RateUse | None = None) -> dict[str, Any]:
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
        "rate_limit_use": _use_shown(q.name, rate_use) if q.paced else None,
    }


def _use_shown(queue: str, use: RateUse | None) -> dict[str, Any]:
    """``rate_limit_use`` as the API shows it (a paced queue no claim has used yet: all 0)."""
    use = use or RateUse(queue, 0, 0, 0, None)
    return {"jobs": use.jobs, "keys": use.keys, "keys_at_limit": use.keys_at_limit,
            "free_in_ms": use.free_in_ms}


async def _rate_use(db: Database, conn: Connection, queues: list[QueueRecord]) -> dict[str, RateUse]:
    """The windows of the paced ones of ``queues``, by queue."""
    paced = [q.name for q in queues if q.paced]
    if not paced:
        return {}
    return {u.queue: u for u in map(records.rate_use, await db.run(conn, Q.QueueRateUse, {"queues": paced}))}


def _merge(queues: list[QueueRecord], counts: list[JobCount],
           oldest: list[records.QueueLag],
           use: dict[str, RateUse] | None = None) -> list[dict[str, Any]]:
    by_queue: dict[str, list[JobCount]] = defaultdict(list)
    for c in counts:
        by_queue[c.queue].append(c)
    lag = {r.queue: r.oldest_waiting_ms for r in oldest}
    use = use or {}
    return [_entry(q, by_queue[q.name], lag.get(q.name), use.get(q.name)) for q in queues]


async def list_queues(
    ctx: Context, *, limit: int, cursor: str | None = None, prefix: str | None = None,
    scope: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of queues by name, and the cursor of the next page (None on the last).

    Counts and lag are read for the page's queues only, so a page costs the same with 100
    queues or 100,000 (before pagination, one listing of 10,000 queues took 727 ms and
    4 MB). ``scope`` (the token's queues as a regular expression) is applied in SQL, before
    the limit, so every page of a scoped token is full and the cursor walks only its queues."""
    after = decode_cursor(cursor) if cursor else None
    db = ctx.db
    async with db.connection() as conn:
        rows = await db.run(conn, Q.QueuePage, {"after": after, "prefix": prefix, "scope": scope,
                                                "limit": limit + 1})
        queues = [records.queue(r, QUEUE_SETTINGS) for r in rows[:limit]]
        names = [q.name for q in queues]
        counts = [records.job_count(r) for r in await db.run(conn, Q.QueuePageCounts, {"queues": names})]
        oldest = [records.queue_lag(r)
                  for r in await db.run(conn, Q.QueuePageOldestWaiting, {"queues": names})]
        use = await _rate_use(db, conn, queues)
    more = len(rows) > limit
    return _merge(queues, counts, oldest, use), encode_cursor(names[-1]) if more else None


async def get_queue(ctx: Context, name: str) -> dict[str, Any]:
    db = ctx.db
    async with db.connection() as conn:
        queues = [records.queue(r, QUEUE_SETTINGS) for r in await db.run(conn, Q.QueueGet, {"queue": name})]
        counts = [records.job_count(r) for r in await db.run(conn, Q.QueueCounts, {"queue": name})]
        oldest = [records.queue_lag(r)
                  for r in await db.run(conn, Q.QueueOldestWaiting, {"queue": name})]
        use = await _rate_use(db, conn, queues)
    entries = _merge(queues, counts, oldest, use)
    if not entries:
        raise NotFound(f"queue {name!r} does not exist")
    return entries[0]


# A cursor is the last name of a page, base64url-encoded so that clients treat it as opaque
# (the encoding may change; a cursor is only ever passed back).
_CURSOR_PREFIX = "q:"
_MAX_NAME = 128


def encode_cursor(last_name: str) -> str:
    return base64.urlsafe_b64encode((_CURSOR_PREFIX + last_name).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    name = raw.removeprefix(_CURSOR_PREFIX)
    # A NUL would fail in PostgreSQL (a 500); any other text only orders, so it cannot do harm.
    if not raw.startswith(_CURSOR_PREFIX) or not name or len(name) > _MAX_NAME or "\x00" in name:
        raise InvalidInput("cursor is not one this service handed out", ["query", "cursor"])
    return name


async def update_queue(ctx: Context, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Change some settings; a queue that does not exist yet is created, as on first use."""
    await ctx.ensure_queues([name], fresh=True)
    unknown = set(changes) - set(QUEUE_SETTINGS)
    if unknown:  # the API's schema already refuses these; this guards the SQL below
        raise ValueError(f"unknown settings {sorted(unknown)}")
    if changes:
        await settings_store.update(ctx.db, name, changes)
    ctx.forget_caps(name)
    if changes.get("paused") is False:
        ctx.wakeups.publish([name])
    return await get_queue(ctx, name)


# --- Deleting a queue ---------------------------------------------------------------------
#
# Jobs go in batches of DELETE_BATCH rows, each batch a statement of its own, with row locks
# only: a purge of a million jobs holds no long lock and no lock on a table. The last step,
# one transaction, locks the queue's row (QueueLockForDelete), checks again, deletes what
# came in meanwhile, and then the row and its counters. Enqueues lock the row FOR KEY SHARE
# (JobInsert, JobInsertMany) as a foreign key would, so an enqueue either committed before
# that lock (and the check sees its job: 409, or the purge deletes it) or runs after the
# commit, finds no queue, and creates it again: a job never lands in a deleted queue.

DELETE_BATCH = 1000
_FINISHED = ["completed", "cancelled"]
_ALL_FINISHED = ["completed", "cancelled", "dead"]


@dataclass(frozen=True, slots=True)
class Deleted:
    """What a queue's delete removed: live jobs (a purge: pending, running, failed) and
    finished ones (completed and cancelled; dead too with a purge)."""

    jobs: int
    finished: int


def _refuse(name: str, usage: QueueUsage, purge: bool) -> None:
    counts = {} if purge else usage.counts
    if not counts and not usage.schedules and not usage.topics:
        return
    reasons = []
    if counts:
        reasons.append(f"it holds {jobs_by_status(counts)} (delete with purge=true to delete them too)")
    if usage.schedules:
        reasons.append("schedules " + ", ".join(usage.schedules) + " enqueue to it "
                       "(delete them or point them at another queue)")
    if usage.topics:
        reasons.append("it is subscribed to topics " + ", ".join(usage.topics) +
                       " (unsubscribe it)")
    raise QueueNotEmpty(f"queue {name!r} was not deleted: " + "; ".join(reasons),
                        counts=counts, schedules=usage.schedules, topics=usage.topics)


def _order(counts: dict[str, int]) -> dict[str, int]:
    """Counts in the order of the statuses (the database gives them in any)."""
    return {s.value: counts[s.value] for s in JobStatus if counts.get(s.value)}


async def _usage(ctx: Context, conn: Connection, name: str) -> QueueUsage:
    usage = records.queue_usage((await ctx.db.run(conn, Q.QueueUsage, {"queue": name}))[0])
    return usage._replace(counts=_order(usage.counts))


async def _batches(ctx: Context, sql: str, params: dict[str, Any],
                   conn: Connection | None = None) -> int:
    """Run a batch delete (``params`` with limit DELETE_BATCH) until a batch finds fewer rows
    than it may take; each batch in its own transaction, or all in ``conn``'s."""
    total = 0
    while True:
        if conn is None:
            n = records.scalar(await ctx.db.fetch_one(sql, params))
        else:
            n = records.scalar((await ctx.db.run(conn, sql, params))[0])
        total += n
        if n < DELETE_BATCH:
            return total


async def delete_queue(ctx: Context, name: str, *, purge: bool = False) -> Deleted:
    """Delete a queue: refused (QueueNotEmpty) while it holds waiting, running, failed or
    dead jobs (unless ``purge``: they are deleted first), or while schedules or topic
    subscriptions name it (always: deleting them is the operator's call). Its completed and
    cancelled jobs go with it, so that it shows up nowhere any more."""
    db = ctx.db
    async with db.connection() as conn:
        if not await db.run(conn, Q.QueueGet, {"queue": name}):
            raise NotFound(f"queue {name!r} does not exist")
        # Checked before anything is deleted, so that a refusal deletes nothing.
        _refuse(name, await _usage(ctx, conn, name), purge)
    jobs = finished = 0
    batch = {"queue": name, "limit": DELETE_BATCH}
    history = batch | {"statuses": _ALL_FINISHED if purge else _FINISHED}
    if purge:
        jobs += await _batches(ctx, Q.QueueJobsPurge, batch)
    finished += await _batches(ctx, Q.QueueHistoryPurge, history)
    async with db.transaction() as conn:
        if not await db.run(conn, Q.QueueLockForDelete, {"queue": name}):
            raise NotFound(f"queue {name!r} does not exist")  # deleted meanwhile
        # Jobs that came in since the first check (before the lock).
        _refuse(name, await _usage(ctx, conn, name), purge)
        if purge:
            jobs += await _batches(ctx, Q.QueueJobsPurge, batch, conn)
        finished += await _batches(ctx, Q.QueueHistoryPurge, history, conn)
        await db.run(conn, Q.QueueDelete, {"queue": name})
    ctx.forget_queue(name)
    counters.forget_queue(name)
    await _restore_stray_jobs(ctx, name)
    return Deleted(jobs, finished)


async def _restore_stray_jobs(ctx: Context, name: str) -> None:
    """The SQL functions (jobq.enqueue, migration 0009) read the queue's row without locking
    it: one that read it just before the delete committed may still commit a job into it.
    Once every writer in flight has ended, such a job gets its queue back (with the
    defaults), so that it is claimed and listed rather than lost."""
    await settings_store.wait_for_job_writers(
        ctx.db, f"queue {name}: deleted", "a job one of them enqueued into it may be left "
        "without its queue")
    if await ctx.db.fetch_one(Q.QueueRestore, {"queue": name}) is not None:
        log.warning("queue %s: a job was enqueued (through SQL) as the queue was deleted; "
                    "the queue was created again, with the defaults", name)
