"""Workers: claim (with long-poll), heartbeat, ack, batch ack, fail, release (one or many).

Every write that a lease guards is conditional on the lease's token and the job still
running, in the statement itself: a stale lease changes nothing, and we only then look up
whether it was lost or never existed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

import orjson

from jobq.core import counters
from jobq.core.context import ClaimSettings, Context
from jobq.core.wakeups import Claimant
from jobq.domain.errors import LeaseLost, NotFound, Unauthorized
from jobq.domain.jobs import ClaimRequest, Failure, Job, JobStatus
from jobq.domain.leases import LeaseRef, parse_lease_id
from jobq.domain.retry import backoff_ms
from jobq.store import records
from jobq.store.db import dumps_json
from jobq.store.queries import Q
from jobq.store.records import NOTHING_CLAIMED, Claimed, ClaimOutcome, Leased, LeaseState

log = logging.getLogger("jobq.leases")


async def _claim_queue(ctx: Context, req: ClaimRequest, queue: str, limit: int,
                       token_id: str | None) -> ClaimOutcome:
    params: dict[str, Any] = {
        "queue": queue,
        "types": req.types,
        "limit": limit,
        "lease_ms": req.lease_ms,
        "worker_id": req.worker_id,
        "token_id": token_id,
    }
    settings = ctx.claim_settings.get(queue, ClaimSettings())
    if settings.paced:
        statement = Q.JobClaimPaced  # both claim orders; the rate_limit in the statement itself
    else:
        statement = Q.JobClaim if settings.aging_ms is None else Q.JobClaimAged
    if settings.max_running is None:
        return records.claim_outcome(await ctx.db.fetch(statement, params))
    async with ctx.db.transaction() as conn:
        await ctx.db.run(conn, Q.QueueClaimLock, {"queue": queue})
        found = await ctx.db.run(conn, Q.QueueRunningSlots, {"queue": queue})
        slots = records.scalar(found[0] if found else None)
        if slots is None:
            slots = limit
        if slots <= 0:
            # Nothing is handed out, so the token goes unchecked: the table's next read (or
            # a claim that finds room) refuses it.
            return NOTHING_CLAIMED
        return records.claim_outcome(
            await ctx.db.run(conn, statement, params | {"limit": min(limit, slots)}))


def _runs(ctx: Context, queues: list[str]) -> list[list[str]]:
    """The queues in order, in runs: each capped or paced queue alone, consecutive plain ones
    together."""
    runs: list[list[str]] = []
    for queue in queues:
        if _alone(ctx, queue) or not runs or _alone(ctx, runs[-1][0]):
            runs.append([queue])
        else:
            runs[-1].append(queue)
    return runs


def _alone(ctx: Context, queue: str) -> bool:
    return ctx.claim_settings.get(queue, ClaimSettings()).alone


async def _claim_many(ctx: Context, req: ClaimRequest, queues: list[str], limit: int,
                      token_id: str | None) -> ClaimOutcome:
    """Uncapped queues in one statement, earlier queues first (JobClaimMany): a claim naming
    100 queues used to run 100 statements, found or not."""
    params = {"queues": queues, "types": req.types, "limit": limit, "lease_ms": req.lease_ms,
              "worker_id": req.worker_id, "token_id": token_id}
    return records.claim_outcome(await ctx.db.fetch(Q.JobClaimMany, params))


def _no_one(token_id: str) -> None:
    pass


async def claim_once(ctx: Context, req: ClaimRequest, token_id: str | None = None,
                     revoked: Callable[[str], None] = _no_one) -> list[Leased]:
    """One pass over the queues in the order given (Faktory's strict order). A capped queue
    (max_running) is claimed in its own transaction, under its lock; a paced one (rate_limit)
    by JobClaimPaced, alone (in that transaction if it is capped too); each run of plain
    queues between them in one statement.

    ``token_id``: the database access token the claim is made under (None: the environment's
    admin token, or local mode). Each claim statement checks it is still live at its own
    snapshot, so a revocation committed before the statement ran, on any replica, leases
    nothing: this process's table of tokens may not have read it yet. A statement that finds
    it revoked tells ``revoked`` and raises Unauthorized, unless an earlier statement of this
    pass (which ran before the revocation committed) leased something: that is answered, and
    nothing more is claimed."""
    await ctx.refresh_caps(req.queues)
    claimed: list[Claimed] = []
    refused = False
    for run in _runs(ctx, req.queues):
        room = req.limit - len(claimed)
        if room <= 0:
            break
        if len(run) == 1:
            outcome = await _claim_queue(ctx, req, run[0], room, token_id)
            if outcome.held:
                counters.rate_held(run[0], outcome.held)
            if outcome.free_in_ms is not None and len(outcome.claimed) < room:
                # Its rate_limit kept jobs back: waiters are rung when the window has room.
                ctx.wakeups.paced(run[0], outcome.free_in_ms)
        else:
            outcome = await _claim_many(ctx, req, run, room, token_id)
        claimed.extend(outcome.claimed)
        if outcome.token_revoked:
            refused = True
            break
    if claimed:
        ctx.events.emit("claimed", [c.change for c in claimed])
    if refused:
        assert token_id is not None  # the statements never find no token revoked
        revoked(token_id)
        if not claimed:
            raise Unauthorized("the access token is revoked; nothing was claimed",
                               invalid_token=True)
    return [c.lease for c in claimed]


async def _never() -> bool:
    return False


async def claim(
    ctx: Context, req: ClaimRequest, gone: Callable[[], Awaitable[bool]] = _never,
    allowed: Callable[[], bool] | None = None, owner: str | None = None,
    revoked: Callable[[str], None] = _no_one, hung_up: asyncio.Event | None = None,
) -> list[Leased]:
    """Claim, long-polling up to ``wait_ms`` for at least one job (see core.wakeups). The
    leases' jobs carry their jsonb columns as JSON text, to be answered as they are
    (``records.LeasedJob``).

    ``gone`` tells whether the caller has hung up: a long-poll whose worker died must not
    go on to lease a job to nobody (it would sit out a whole lease and count as an expiry).
    ``hung_up``, set the moment the caller disconnects, ends the wait then rather than at
    the next bell or the end of ``wait_ms``.

    ``allowed`` tells whether the caller's access token is still valid, and is asked before
    every claim: a long-poll outlives the check made when its request came in, and a token
    revoked meanwhile must not be handed a job (Unauthorized, nothing claimed). ``owner``,
    the token's id, lets its revocation wake the long-poll (``Wakeups.revoked``), and is
    checked again by every claim statement itself (``claim_once``): ``allowed`` only knows
    what this process's table of tokens last read, and a revocation made through another
    replica reaches it up to a refresh later. ``revoked`` is told the id when a statement
    finds it revoked first, so that this process refuses it from then on.
    """
    # A claim never creates a queue: it may wait on one that does not exist yet, and the
    # enqueue that creates it wakes it as any enqueue does.

    async def take() -> list[Leased]:
        if allowed is not None and not allowed():
            raise Unauthorized("the access token was revoked while this claim waited; "
                               "nothing was claimed", invalid_token=True)
        return await claim_once(ctx, req, owner, revoked)

    leased = await ctx.wakeups.wait_for_work(
        req.queues, req.types, req.limit, req.wait_ms / 1000,
        take=take, queue_of=lambda lease: lease.job.queue, gone=gone, owner=owner,
        hung_up=hung_up, claimant=Claimant(req.worker_id, req.lease_ms, owner, allowed, hung_up,
                                           partial(give_back_soon, ctx)))
    if leased and hung_up is not None and hung_up.is_set():
        # The worker hung up while its claim ran (or an enqueue handed it a job): the answer
        # has nobody to reach. Give the jobs back now, without spending their attempts, rather
        # than leave them to a lease that expires and counts against them.
        await give_back(ctx, leased)
        return []
    return leased


async def give_back(ctx: Context, leased: list[Leased]) -> None:
    """Release leases nobody will hold (claimable again at once, attempts not spent)."""
    try:
        await release_many(ctx, [(le.lease_id, 0) for le in leased])
    except Exception as exc:  # the database is away: the leases expire instead
        log.warning("could not give back %d leases nobody will answer: %s", len(leased), exc)


def give_back_soon(ctx: Context, leased: list[Leased]) -> None:
    """``give_back``, from where nothing can wait for it (a callback, a cancelled task on its
    way out)."""
    task = asyncio.ensure_future(give_back(ctx, leased))
    _giving_back.add(task)
    task.add_done_callback(_giving_back.discard)


# Give-backs in flight, referenced until they end (the loop keeps weak references only).
_giving_back: set[asyncio.Future[None]] = set()


def _ref(lease_id: str) -> LeaseRef:
    ref = parse_lease_id(lease_id)
    if ref is None:
        raise NotFound(f"lease {lease_id!r} does not exist")
    return ref


async def _why_not(ctx: Context, ref: LeaseRef, lease_id: str, scope: str | None) -> Exception:
    row = await ctx.db.fetch_one(Q.LeaseState, {"job_id": ref.job_id, "scope": scope})
    state = None if row is None else records.lease_state(row)
    if state is None and await _deleted(ctx, [ref]):
        return LeaseLost(f"lease {lease_id!r} is no longer held: its job was deleted")
    # Tokens only grow: one above the job's latest was never handed out for it.
    if state is None or state.lease_token is None or ref.token > state.lease_token:
        return NotFound(f"lease {lease_id!r} does not exist")
    if _completed_by(ref.token, state.lease_token, state.status):
        return LeaseLost(f"lease {lease_id!r} is no longer held: it completed the job, whose "
                         "result is stored", already_completed=True)
    return LeaseLost(f"lease {lease_id!r} is no longer held")


async def _deleted(ctx: Context, refs: list[LeaseRef]) -> set[int]:
    """Of leases whose job is found nowhere, the job ids that existed and were deleted (a
    queue's purge deletes running jobs; retention, finished ones): their leases are lost,
    not unknown. Asked only when a lease operation changed nothing."""
    rows = await ctx.db.fetch(Q.LeaseJobsGone, {"job_ids": [r.job_id for r in refs],
                                                "tokens": [r.token for r in refs]})
    return {records.scalar(r) for r in rows}


def _completed_by(token: int, latest: int | None, status: str) -> bool:
    """Whether the job was completed under the lease of ``token``: the job is completed and
    no later lease was handed out (tokens only grow, and ack keeps the token; a completed job
    cannot be claimed or retried again)."""
    return status == JobStatus.COMPLETED and latest == token


async def heartbeat(ctx: Context, lease_id: str, extend_ms: int | None,
                    scope: str | None = None) -> datetime:
    """``scope`` (here and below): a regular expression of the caller's queues, None for all.
    A lease of a job outside it does not exist for the caller: it changes nothing, and is
    answered as not found."""
    ref = _ref(lease_id)
    row = await ctx.db.fetch_one(
        Q.LeaseHeartbeat,
        {"job_id": ref.job_id, "token": ref.token, "extend_ms": extend_ms, "scope": scope},
    )
    if row is None:
        raise await _why_not(ctx, ref, lease_id, scope)
    locked_until: datetime = records.scalar(row)
    return locked_until


async def ack(ctx: Context, lease_id: str, result: Any, scope: str | None = None) -> Job:
    ref = _ref(lease_id)
    row = await ctx.db.fetch_one(
        Q.LeaseAck,
        {
            "job_id": ref.job_id,
            "token": ref.token,
            "result": None if result is None else dumps_json(result),
            "scope": scope,
        },
    )
    if row is None:
        raise await _why_not(ctx, ref, lease_id, scope)
    ctx.events.emit("completed", [records.change(row)])
    return records.job(row)


class AckOutcome(NamedTuple):
    """One lease's answer in a batch (a NamedTuple: a batch of 100 builds 100 of them)."""

    lease_id: str
    ok: bool
    code: str | None = None
    already_completed: bool = False  # with lease_lost: see LeaseLost


async def ack_many(ctx: Context, acks: list[tuple[str, Any]],
                   scope: str | None = None) -> list[AckOutcome]:
    refs = [parse_lease_id(lease_id) for lease_id, _ in acks]
    # A lease named twice is acked by its first entry; the repeat is answered like a second
    # ack (lease_lost), and its result is not what gets stored.
    body: list[dict[str, Any]] = []
    sent: set[tuple[int, int]] = set()
    results = False
    for ref, (_, result) in zip(refs, acks, strict=True):
        if ref is not None and (ref.job_id, ref.token) not in sent:
            sent.add((ref.job_id, ref.token))
            body.append({"job_id": ref.job_id, "token": ref.token, "result": result})
            results = results or result is not None
    won: set[tuple[int, int]] = set()
    if body:
        # Ids, tokens and null results only (the usual batch): orjson writes the same JSON
        # ten times faster; a batch with any result goes through dumps_json's checks.
        text = dumps_json(body) if results else orjson.dumps(body).decode()
        acked = records.leases_won(
            await ctx.db.fetch(Q.LeaseAckMany, {"acks": text, "scope": scope}))
        won = acked.won
        ctx.events.emit("completed", acked.changes)
    return await _outcomes(ctx, refs, [lease_id for lease_id, _ in acks], won, scope,
                           completes=True)


async def _outcomes(ctx: Context, refs: list[LeaseRef | None], lease_ids: list[str],
                    won: set[tuple[int, int]], scope: str | None,
                    completes: bool) -> list[AckOutcome]:
    """A batch's answer per lease, in request order, once its statement ran: ``won``, the
    (job, token) pairs it changed. The others are read again to tell a lost lease from one
    that never existed. ``completes``: the batch completes jobs (an ack), so a lease named
    again after its first entry won has completed its job."""
    if len(won) == len(refs):
        # Every lease won, each named once (the common batch): nothing to read again.
        return [AckOutcome(lease_id, True) for lease_id in lease_ids]
    lost_ids = [ref.job_id for ref in refs if ref is not None and (ref.job_id, ref.token) not in won]
    states: dict[int, LeaseState] = {}
    if lost_ids:
        states = records.lease_states(
            await ctx.db.fetch(Q.LeaseStateMany, {"job_ids": lost_ids, "scope": scope}))
    missing = [ref for ref in refs if ref is not None and ref.job_id in lost_ids
               and ref.job_id not in states]
    deleted = await _deleted(ctx, missing) if missing else set()
    outcomes: list[AckOutcome] = []
    credited: set[tuple[int, int]] = set()
    for ref, lease_id in zip(refs, lease_ids, strict=True):
        if ref is not None and (ref.job_id, ref.token) in won:
            if (ref.job_id, ref.token) in credited:  # done by an earlier entry of this batch
                outcomes.append(AckOutcome(lease_id, False, "lease_lost",
                                           already_completed=completes))
            else:
                credited.add((ref.job_id, ref.token))
                outcomes.append(AckOutcome(lease_id, True))
            continue
        if ref is not None and ref.job_id in deleted:
            outcomes.append(AckOutcome(lease_id, False, "lease_lost"))
            continue
        state = states.get(ref.job_id) if ref is not None else None
        latest = state.lease_token if state is not None else None
        existed = ref is not None and latest is not None and ref.token <= latest
        if not existed:
            outcomes.append(AckOutcome(lease_id, False, "not_found"))
            continue
        assert ref is not None and state is not None
        ours = _completed_by(ref.token, latest, state.status)
        outcomes.append(AckOutcome(lease_id, False, "lease_lost", already_completed=ours))
    return outcomes


async def fail(ctx: Context, lease_id: str, failure: Failure, scope: str | None = None) -> Job:
    ref = _ref(lease_id)
    key = {"job_id": ref.job_id, "token": ref.token, "scope": scope}
    delay_ms = failure.retry_in_ms
    if delay_ms is None and failure.retry:
        # Read, then write on the same lease condition: attempt cannot change while the
        # lease is held, so a lease lost in between makes LeaseFail change nothing.
        inputs = await ctx.db.fetch_one(Q.LeaseBackoffInputs, key)
        if inputs is None:
            raise await _why_not(ctx, ref, lease_id, scope)
        delay_ms = backoff_ms(*records.backoff_inputs(inputs))
    row = await ctx.db.fetch_one(
        Q.LeaseFail,
        key | {"error": failure.error, "retry": failure.retry, "delay_ms": delay_ms or 0},
    )
    if row is None:
        raise await _why_not(ctx, ref, lease_id, scope)
    job = records.job(row)
    ctx.events.emit("dead" if job.status == JobStatus.DEAD else "failed", [records.change(row)])
    if job.status == JobStatus.FAILED:
        # Waiters re-read when the next job becomes visible; this one may be the next.
        ctx.wakeups.jobs_added([(job.queue, job.visible_at)])
    return job


async def release(ctx: Context, lease_id: str, delay_ms: int = 0, scope: str | None = None) -> Job:
    """Give a held job back, claimable after ``delay_ms``, without spending its attempt: a
    stop (a deploy, a worker shutting down) is not the job's failure. Fenced as ack and fail:
    a lease no longer held changes nothing (LeaseLost)."""
    ref = _ref(lease_id)
    row = await ctx.db.fetch_one(
        Q.LeaseRelease,
        {"job_id": ref.job_id, "token": ref.token, "delay_ms": delay_ms, "scope": scope},
    )
    if row is None:
        raise await _why_not(ctx, ref, lease_id, scope)
    done = records.lease_released(row)
    job = done.job
    ctx.events.emit("released", [done.change])
    # Claimable now (ring the waiting long-polls) or when its delay is up.
    ctx.wakeups.jobs_added([(job.queue, job.visible_at)])
    return job


async def release_many(ctx: Context, releases: list[tuple[str, int]],
                       scope: str | None = None) -> list[AckOutcome]:
    """``releases``: (lease id, delay_ms) pairs. Answered per lease in request order, as
    ack_many: a lease named twice is released by its first entry, the repeat is lease_lost."""
    refs = [parse_lease_id(lease_id) for lease_id, _ in releases]
    body: list[dict[str, Any]] = []
    sent: set[tuple[int, int]] = set()
    for ref, (_, delay_ms) in zip(refs, releases, strict=True):
        if ref is not None and (ref.job_id, ref.token) not in sent:
            sent.add((ref.job_id, ref.token))
            body.append({"job_id": ref.job_id, "token": ref.token, "delay_ms": delay_ms})
    won: set[tuple[int, int]] = set()
    if body:
        released = [records.lease_released(r) for r in await ctx.db.fetch(
            Q.LeaseReleaseMany, {"releases": dumps_json(body), "scope": scope})]
        won = {(r.job.id, r.lease_token) for r in released}
        if released:
            ctx.events.emit("released", [r.change for r in released])
            ctx.wakeups.jobs_added([(r.job.queue, r.job.visible_at) for r in released])
    return await _outcomes(ctx, refs, [lease_id for lease_id, _ in releases], won, scope,
                           completes=False)
