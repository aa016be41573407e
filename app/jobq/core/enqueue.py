"""Producers: enqueue one job or a batch, with idempotency keys and max_depth."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobq.core import counters
from jobq.core.context import Context
from jobq.domain.errors import IdempotencyConflict, QueueFull
from jobq.domain.jobs import Job, NewJob
from jobq.domain.jsontext import same_json
from jobq.store import records
from jobq.store.db import Connection, dumps_json
from jobq.store.queries import Q
from jobq.store.records import JobChange


@dataclass(frozen=True, slots=True)
class Enqueued:
    job: Job
    created: bool  # False: an idempotent replay, the existing job


def _params(job: NewJob) -> dict[str, Any]:
    return {
        "queue": job.queue,
        "type": job.type,
        "payload": dumps_json(job.payload),
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "idempotency_key": job.idempotency_key,
        "run_at": job.run_at,
        "delay_ms": job.delay_ms or 0,
    }


def _batch_row(job: NewJob) -> dict[str, Any]:
    return {
        "queue": job.queue,
        "type": job.type,
        "payload": job.payload,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "idempotency_key": job.idempotency_key,
        "run_at": job.run_at.isoformat() if job.run_at else None,
        "delay_ms": job.delay_ms or 0,
    }


@dataclass(frozen=True, slots=True)
class ReplayRule:
    """When a job found by its idempotency key is the one asked for again (a replay), and
    what differs otherwise (for the 409's detail)."""

    same: Callable[[Job, NewJob], bool]
    differs: str


SAME_TYPE_AND_PAYLOAD = ReplayRule(
    lambda existing, job: existing.type == job.type and same_json(existing.payload, job.payload),
    "type or payload",
)
"""The rule of POST /v1/jobs and /v1/jobs/batch."""


def _replay(existing: Job, job: NewJob, rule: ReplayRule = SAME_TYPE_AND_PAYLOAD) -> Enqueued:
    if not rule.same(existing, job):
        raise IdempotencyConflict(
            f"idempotency key {job.idempotency_key!r} in queue {job.queue!r} already names "
            f"job {existing.id} with a different {rule.differs}"
        )
    return Enqueued(existing, created=False)


def _full(queue: str, ctx: Context) -> QueueFull:
    counters.rejected(queue)
    return QueueFull(
        f"queue {queue!r} is at its max_depth of waiting jobs", ctx.db.retry_after_s
    )


class QueuesGone(Exception):
    """A batch named queues that were deleted after this process last created them: the
    transaction is rolled back, and the caller creates them again and retries."""

    def __init__(self, queues: set[str]) -> None:
        super().__init__(f"queues deleted meanwhile: {sorted(queues)}")
        self.queues = queues


# Passes of an enqueue: a key taken when the insert ran may be freed before the lookup (its
# job purged, or dropped by retention with its partition), and the queue may be deleted
# between its creation and the insert; each is then tried again, once.
_PASSES = 3


async def _gone(ctx: Context, queue: str) -> bool:
    """Whether an insert found no queue (deleted since this process saw it): it is then
    forgotten, so that the next pass creates it again."""
    row = await ctx.db.fetch_one(Q.QueueExists, {"queue": queue})
    if row is not None and records.scalar(row):
        return False
    ctx.forget_queue(queue)
    return True


async def enqueue(ctx: Context, job: NewJob) -> Enqueued:
    params = _params(job)
    for _ in range(_PASSES):
        await ctx.ensure_queues([job.queue])
        row = await ctx.db.fetch_one(Q.JobInsert, params)
        if row is not None:
            new = records.job(row)
            ctx.wakeups.jobs_added([(job.queue, new.visible_at)])
            ctx.events.emit("enqueued", [records.change(row)])
            return Enqueued(new, created=True)
        # Nothing inserted: the key is taken, the queue is full, or it was deleted.
        if await _gone(ctx, job.queue):
            continue
        if job.idempotency_key is None:
            break
        key = {"queue": job.queue, "idempotency_key": job.idempotency_key}
        existing = await ctx.db.fetch_one(Q.JobGetByIdempotencyKey, key)
        if existing is not None:
            return _replay(records.job(existing), job)
    raise _full(job.queue, ctx)


async def enqueue_many(ctx: Context, jobs: list[NewJob]) -> list[Enqueued]:
    """All or nothing, in one transaction; answers in request order."""
    queues = list(dict.fromkeys(j.queue for j in jobs))
    for attempt in range(_PASSES):
        await ctx.ensure_queues(queues)
        try:
            async with ctx.db.transaction() as conn:
                results, created = await insert_many(ctx, conn, jobs)
        except QueuesGone as gone:
            if attempt == _PASSES - 1:
                raise
            for name in gone.queues:
                ctx.forget_queue(name)
            continue
        announce(ctx, created)
        return results
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


async def insert_many(ctx: Context, conn: Connection, jobs: list[NewJob],
                      rule: ReplayRule = SAME_TYPE_AND_PAYLOAD) -> tuple[list[Enqueued], list[JobChange]]:
    """The batch enqueue, in the caller's transaction ``conn`` (its queues exist already):
    the outcomes in request order, and the jobs created, for ``announce`` once committed.
    ``rule`` tells a replay of a key from a conflict (topics have their own).
    Raises ``QueueFull`` or ``IdempotencyConflict``; the caller's rollback then undoes all."""
    if not jobs:
        return [], []
    payload = dumps_json([_batch_row(j) for j in jobs])
    db = ctx.db
    rows = await db.run(conn, Q.JobInsertMany, {"jobs": payload})
    gone = {job.queue for job, row in zip(jobs, rows, strict=True) if records.queue_missing(row)}
    if gone:
        raise QueuesGone(gone)
    results: list[Enqueued] = []
    created: list[JobChange] = []
    for job, row in zip(jobs, rows, strict=True):
        new, change = records.inserted(row)
        if new is not None and change is not None:
            created.append(change)
            results.append(Enqueued(new, created=True))
            continue
        # A replay: the key names a job committed before, or one earlier in this batch.
        key = {"queue": job.queue, "idempotency_key": job.idempotency_key}
        found = await db.run(conn, Q.JobGetByIdempotencyKey, key)
        existing = found[0] if found else None
        if existing is None:  # pragma: no cover - the conflict needs a row to exist
            raise IdempotencyConflict(f"idempotency key {job.idempotency_key!r} is in use")
        results.append(_replay(records.job(existing), job, rule))
    # The max_depth check comes after the insert, inside the transaction, because only
    # the insert knows which jobs are new: replays (of committed jobs, or of a key earlier
    # in this batch) enqueue nothing and cannot take a queue past its limit. The counters
    # already include this transaction's rows; a raise here rolls all of them back.
    added = Counter(c.queue for c in created)
    if added:
        for q in map(records.queue_depth, await db.run(conn, Q.QueueDepths, {"queues": list(added)})):
            if q.max_depth is not None and q.depth > q.max_depth:
                raise _full(q.name, ctx)
    return results, created


def announce(ctx: Context, created: list[JobChange]) -> None:
    """After the commit of ``insert_many``: wake the workers waiting on those queues, and
    count the jobs in the metrics."""
    if created:
        ctx.wakeups.jobs_added((c.queue, c.visible_at) for c in created)
        ctx.events.emit("enqueued", created)
