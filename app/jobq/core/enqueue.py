"""Producers: enqueue one job or a batch, with idempotency keys, max_depth and the rate limits
of producers (issue 29): the enqueue rates of queues and tokens (token buckets in the
database, taken in the enqueue's own transaction) and adaptive backpressure (soft thresholds).

A queue with none of these, enqueued to under a token without a rate, costs no statement more
than before: whether they apply is read from the settings cache (``Context.claim_settings``)
and the token table, both in memory."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from jobq.core import counters
from jobq.core.context import ClaimSettings, Context
from jobq.core.leases import give_back_soon
from jobq.core.wakeups import Waiter
from jobq.domain.errors import (
    IdempotencyConflict,
    InvalidInput,
    QueueFull,
    QueueOverloaded,
    QueueRateLimited,
    TokenRateLimited,
)
from jobq.domain.jobs import Job, NewJob
from jobq.domain.jsontext import same_json
from jobq.domain.rates import Bucket, overload, overload_retry_ms, refused_fraction
from jobq.store import records
from jobq.store.db import Connection, dumps_json
from jobq.store.enqueue import NOT_LEASED, insert_new, leased_to
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
        **NOT_LEASED,
    }


def _batch_row(job: NewJob) -> dict[str, Any]:
    # What is None is left out (JobInsertMany reads a missing field as NULL): then a "null"
    # in the batch's text comes from a payload alone (see ``_jsonb_text``).
    row = {
        "queue": job.queue,
        "type": job.type,
        "payload": job.payload,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "idempotency_key": job.idempotency_key,
        "run_at": job.run_at.isoformat() if job.run_at else None,
        "delay_ms": job.delay_ms or None,
    }
    return {k: v for k, v in row.items() if v is not None}


def _jsonb_text(value: Any) -> str:
    """``dumps_json``'s text, through orjson where that is the same JSON (several times
    faster on a batch). orjson refuses what the standard library escapes (lone surrogates)
    or writes exactly (integers beyond 64 bits), and writes NaN and Infinity as ``null``:
    text holding a ``null`` (a payload's own, most likely) takes the standard library's
    way, which refuses those with its 422."""
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return dumps_json(value)
    if b"null" in text:
        return dumps_json(value)
    return text.decode()


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


@dataclass(frozen=True, slots=True)
class Producer:
    """Who enqueues, as far as rates go: the access token's id and its own enqueue rate."""

    token_id: str
    enqueue_rate: Bucket


@dataclass(frozen=True, slots=True)
class _Take:
    kind: str  # "queue" or "token"
    name: str
    n: int
    bucket: Bucket
    queues: tuple[str, ...] = ()  # a token's take: the queues of the request (for the metrics)

    def row(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "n": self.n, **self.bucket.as_json()}


def _takes(ctx: Context, counts: Counter[str], producer: Producer | None) -> list[_Take]:
    """The buckets an enqueue of ``counts`` jobs per queue takes from. A request larger than
    a bucket's burst could never be accepted: refused in words (422), not told to wait."""
    takes: list[_Take] = []
    for queue, n in counts.items():
        bucket = ctx.claim_settings.get(queue, ClaimSettings()).enqueue_rate
        if bucket is not None:
            takes.append(_Take("queue", queue, n, bucket))
    if producer is not None:
        takes.append(_Take("token", producer.token_id, sum(counts.values()), producer.enqueue_rate,
                           tuple(counts)))
    for take in takes:
        if take.n > take.bucket.burst:
            whose = f"queue {take.name!r}'s" if take.kind == "queue" else "the access token's"
            raise InvalidInput(f"{take.n} jobs at once are more than {whose} enqueue_rate burst of "
                               f"{take.bucket.burst}: they could never be accepted together; "
                               "send fewer at a time", ["body"])
    return takes


async def _take(ctx: Context, conn: Connection, takes: list[_Take]) -> None:
    """Take from the buckets in the caller's transaction; raise the refusal of the bucket
    that was short longest (the caller's rollback then undoes every take)."""
    rows = await ctx.db.run(conn, Q.EnqueueBucketsTake,
                            {"takes": dumps_json([t.row() for t in takes])})
    by_key = {(t.kind, t.name): t for t in takes}
    worst: tuple[int, _Take] | None = None
    for left in map(records.bucket_left, rows):
        if left.tokens < 0:
            take = by_key[(left.kind, left.name)]
            wait = take.bucket.wait_ms(-left.tokens)
            if worst is None or wait > worst[0]:
                worst = (wait, take)
    if worst is None:
        return
    wait, take = worst
    rate = take.bucket
    if take.kind == "queue":
        counters.enqueue_limited(take.name, "queue_rate_limited")
        raise QueueRateLimited(
            f"queue {take.name!r} takes at most {rate.jobs} jobs per {rate.per_ms} ms (burst "
            f"{rate.burst}); {take.n} more would be accepted in {wait} ms", wait)
    for queue in take.queues:  # counted under each queue of the request
        counters.enqueue_limited(queue, "token_rate_limited")
    raise TokenRateLimited(
        f"this access token may enqueue at most {rate.jobs} jobs per {rate.per_ms} ms (burst "
        f"{rate.burst}); {take.n} more would be accepted in {wait} ms", wait)


async def _pressure(ctx: Context, queues: list[str]) -> None:
    """Adaptive backpressure: refuse a share of the enqueues to a queue past its soft
    thresholds (jobq.domain.rates), spread evenly over them; the queue's depth and lag are
    read at most every PRESSURE_TTL_S per process."""
    soft = [q for q in queues if ctx.claim_settings.get(q, ClaimSettings()).soft]
    if not soft:
        return
    for queue, (depth, lag_ms) in (await ctx.pressure(soft)).items():
        caps = ctx.claim_settings.get(queue, ClaimSettings())
        o = overload(depth, lag_ms, caps.soft_depth, caps.soft_lag_ms)
        if ctx.spreader(queue).refuse(refused_fraction(o)):
            wait = overload_retry_ms(o)
            counters.enqueue_limited(queue, "queue_overloaded")
            raise QueueOverloaded(
                f"queue {queue!r} is past its soft thresholds ({depth} waiting, oldest "
                f"{lag_ms if lag_ms is not None else 0} ms; {o:.2f} times the threshold): "
                f"{refused_fraction(o):.0%} of enqueues are refused; retry in {wait} ms", wait)


async def _limits(ctx: Context, jobs: list[NewJob], producer: Producer | None) -> list[_Take]:
    """Check the producer limits of an enqueue of ``jobs`` (their queues exist): raise an
    overload refusal, or answer the buckets to take from in the insert's transaction."""
    queues = list(dict.fromkeys(j.queue for j in jobs))
    await ctx.refresh_caps(queues)  # the cache: a statement at most once per queue and second
    await _pressure(ctx, queues)
    return _takes(ctx, Counter(j.queue for j in jobs), producer)


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


class _NotInserted(Exception):
    """JobInsert inserted nothing under a rate: roll its bucket takes back."""


async def _insert(ctx: Context, params: dict[str, Any], takes: list[_Take]) -> records.Inserted | None:
    """JobInsert, alone, or after the bucket takes in one transaction: an insert that does not
    happen (a full queue, a replay) or a bucket that is short takes nothing from any."""
    if not takes:
        row = await ctx.db.fetch_one(Q.JobInsert, params)
        return None if row is None else records.inserted_job(row)
    try:
        async with ctx.db.transaction() as conn:
            await _take(ctx, conn, takes)
            rows = await ctx.db.run(conn, Q.JobInsert, params)
            if not rows:
                raise _NotInserted
            return records.inserted_job(rows[0])
    except _NotInserted:
        return None


async def enqueue(ctx: Context, job: NewJob, producer: Producer | None = None) -> Enqueued:
    """``producer``: the caller's token and its enqueue rate, when it has one.

    A job claimable at once, into a queue claimed one statement at a time, while a long-poll
    of this process waits for it, is leased to that long-poll in the insert itself (the
    hand-off, see jobq.core.wakeups): its answer shows it ``running``."""
    params = _params(job)
    for _ in range(_PASSES):
        await ctx.ensure_queues([job.queue])
        takes = await _limits(ctx, [job], producer)
        waiter = _waiting_for(ctx, job, takes)
        if waiter is None:
            done = await _insert(ctx, params, takes)
        else:
            done = await _hand_off(ctx, waiter, params | leased_to(*_claimant(waiter)))
        if done is not None:
            if done.handed is None:  # a handed job's events went out with its hand-off
                ctx.wakeups.jobs_added([(job.queue, done.job.visible_at)])
                ctx.events.emit("enqueued", [done.change])
            return Enqueued(done.job, created=True)
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


def _waiting_for(ctx: Context, job: NewJob, takes: list[_Take]) -> Waiter | None:
    """The idle long-poll to hand ``job`` to, reserved (see ``enqueue``); None for a job that
    is not claimable at once, a queue whose claims take more than JobClaim (max_running,
    rate_limit: their own statements), or rate buckets to take first."""
    if takes or job.delay_ms or (job.run_at is not None and job.run_at > datetime.now(UTC)):
        return None

    def plain(queue: str) -> bool:
        return not ctx.claim_settings.get(queue, ClaimSettings()).alone

    if not plain(job.queue):
        return None
    return ctx.wakeups.reserve(job.queue, job.type, plain)


def _claimant(waiter: Waiter) -> tuple[str, int | None, str | None]:
    claimant = waiter.claimant
    assert claimant is not None  # reserve() takes only waiters with one
    return claimant.worker_id, claimant.lease_ms, claimant.token_id


async def _hand_off(ctx: Context, waiter: Waiter, params: dict[str, Any]) -> records.Inserted | None:
    """``_insert``, leasing the job to the reserved ``waiter``: the insert runs as a task of
    its own whose end settles the waiter whatever becomes of this request (a cancelled
    request must not leave a lease its worker never hears of)."""
    insert = asyncio.ensure_future(_insert(ctx, params, []))
    insert.add_done_callback(lambda task: _settle(ctx, waiter, task))
    return await asyncio.shield(insert)


def _settle(ctx: Context, waiter: Waiter, insert: asyncio.Future[records.Inserted | None]) -> None:
    """The insert's end, whatever became of the request: the waiter gets its lease, or goes
    back to waiting; a handed job's events go out here, in order, even if the request that
    enqueued it was cancelled meanwhile."""
    done = None if insert.cancelled() or insert.exception() is not None else insert.result()
    if done is None or done.handed is None:
        ctx.wakeups.settle(waiter, None)
        return
    handed = done.handed
    ctx.events.emit("enqueued", [done.change])
    ctx.events.emit("claimed", [handed.change])
    if not ctx.wakeups.settle(waiter, [handed.lease]):
        give_back_soon(ctx, [handed.lease])  # the long-poll left meanwhile: the job goes back


async def enqueue_many(ctx: Context, jobs: list[NewJob],
                       producer: Producer | None = None) -> list[Enqueued]:
    """All or nothing, in one transaction; answers in request order. Rates take the whole
    batch or none of it: a refusal says when the bucket holds the whole batch."""
    queues = list(dict.fromkeys(j.queue for j in jobs))
    for attempt in range(_PASSES):
        await ctx.ensure_queues(queues)
        takes = await _limits(ctx, jobs, producer) if jobs else []
        if jobs and not takes:
            # New jobs only, into queues that exist and have room: one statement, one round
            # trip, nothing to read back but the columns the request did not say. Anything
            # else (a replay, a full or deleted queue) it declines, having written nothing.
            rows = await insert_new(ctx.db, _jsonb_text([_batch_row(j) for j in jobs]), len(jobs))
            if rows is not None:
                done = records.created_jobs(jobs, rows)
                announce(ctx, [d.change for d in done])
                return [Enqueued(d.job, created=True) for d in done]
        try:
            async with ctx.db.transaction() as conn:
                if takes:
                    await _take(ctx, conn, takes)
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
    payload = _jsonb_text([_batch_row(j) for j in jobs])
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
