"""Workers: /v1/leases."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from jobq.api import render
from jobq.api.access import admitted, require_queues
from jobq.api.bodies import JsonBody
from jobq.api.deps import context_of
from jobq.api.direct import DirectRoute
from jobq.api.document import GUARDED, answers
from jobq.api.longpolls import LongPolls, hangup_watch
from jobq.api.schemas import (
    AckBody,
    AckManyBody,
    AckManyPublic,
    ClaimBody,
    FailBody,
    HeartbeatBody,
    HeartbeatPublic,
    JobPublic,
    LeaseList,
    ReleaseBody,
    ReleaseManyBody,
)
from jobq.core import leases as core
from jobq.core.tokens import TokenTable
from jobq.domain.errors import TooManyLongPolls
from jobq.domain.jobs import Failure

router = APIRouter(prefix="/v1/leases", tags=["leases"], route_class=DirectRoute)

# Read by the endpoints themselves, with orjson (jobq.api.bodies): these are a worker's calls.
CLAIM: JsonBody[ClaimBody] = JsonBody(ClaimBody)
ACK_MANY: JsonBody[AckManyBody] = JsonBody(AckManyBody)
HEARTBEAT: JsonBody[HeartbeatBody | None] = JsonBody(HeartbeatBody | None, required=False)
ACK: JsonBody[AckBody | None] = JsonBody(AckBody | None, required=False)
FAIL: JsonBody[FailBody] = JsonBody(FailBody)
RELEASE: JsonBody[ReleaseBody | None] = JsonBody(ReleaseBody | None, required=False)
RELEASE_MANY: JsonBody[ReleaseManyBody] = JsonBody(ReleaseManyBody)

_LOST = answers(*GUARDED, 413, 422, notes={
    404: "`not_found`: no such lease",
    409: "`lease_lost`: the lease is no longer held; nothing changed. With `already_completed: "
         "true`, this very lease completed the job and its result is stored (a retry of an ack "
         "whose answer was lost)"})


_CLAIM_503 = ("`unavailable`: the database did not answer in time, or the service is out of file "
              "descriptors; `too_many_long_polls`: a claim with `wait_ms` with no job to hand it "
              "at once while this service process already holds its cap of waiting claims "
              "(`JOBQ_MAX_LONG_POLLS`), answered at once with `Connection: close`. Either way "
              "nothing was claimed: claim again after `Retry-After` seconds")


@router.post("", response_model=LeaseList, summary="Claim jobs",
             responses=answers(*GUARDED, 413, 422, notes={503: _CLAIM_503}),
             openapi_extra=CLAIM.openapi)
async def claim(request: Request) -> Response:
    """Leases up to `limit` claimable jobs. Queues are tried in the order listed, as
    Faktory's fetch does: a later queue only fills what the earlier ones left. Within a
    queue: `priority` descending, then `visible_at`, then creation. With `wait_ms`, waits
    (woken by LISTEN/NOTIFY) until at least one job is claimed or the time is up. Paused
    queues hand out nothing; a queue with `max_running` never has more running jobs. A
    long-poll whose client hung up stops without claiming; one whose token is revoked
    while it waits answers `401` within a second and claims nothing. Every claim checks its
    token in the database as it takes jobs: a token whose revocation committed before that,
    through any replica, is handed nothing (`401`).

    Each service process holds at most `JOBQ_MAX_LONG_POLLS` waiting claims (by default
    derived from its file descriptor limit, so that waiting workers never take the
    connections enqueues, acks and heartbeats need). A claim with `wait_ms` past that cap
    does not wait: it claims once (unless claims already waiting name its queues and would
    take the same jobs) and returns what it found, or, finding nothing, answers
    `503` `too_many_long_polls` at once with `Connection: close` and a `Retry-After` spread
    at random over 1 to 5 times the usual one, so that a fleet refused together does not
    come back together. Claim again after `Retry-After` seconds, as after any 503."""
    ctx, who = context_of(request), admitted(request)
    body = await CLAIM.read(request)
    require_queues(who, body.queues)
    tokens: TokenTable = request.app.state.tokens
    req = body.to_domain()
    long_polls: LongPolls = request.app.state.long_polls
    with long_polls.admit(req.wait_ms, req.queues, req.types) as may_wait:
        # Past the cap a long-poll does not wait, so that waiting workers cannot take the
        # descriptors enqueues and acks need (jobq.api.longpolls): it answers 503 at once,
        # having claimed once what it found, unless claims waiting now would take the same
        # jobs. Not looking at all would starve a queue that no waiting claim names.
        if may_wait or not long_polls.watched(req.queues, req.types):
            req = req if may_wait else replace(req, wait_ms=0)
            async with hangup_watch(request, req.wait_ms) as hung_up:
                leases = await core.claim(ctx, req, request.is_disconnected,
                                          allowed=partial(tokens.still_valid, who),
                                          owner=who.token_id, revoked=tokens.seen_revoked,
                                          hung_up=hung_up)
        else:
            leases = []
    if not leases and not may_wait:
        raise TooManyLongPolls(
            f"this service process holds its limit of {long_polls.cap} waiting claims "
            "(JOBQ_MAX_LONG_POLLS) and had no job to hand this one now; claim again after "
            "Retry-After", long_polls.retry_after(request.app.state.settings.retry_after_s))
    return render.json_response({"leases": [_lease(le) for le in leases]})


def _lease(le: core.Leased) -> dict[str, Any]:
    """A lease, its job as render.job writes a job, but the job's JSON columns go out as the
    text PostgreSQL wrote (render.as_text): a claim of 100 jobs no longer parses every
    payload, errors and releases to write it again. The same values; only the spacing inside
    them may differ."""
    return {"lease_id": le.lease_id, "locked_until": le.locked_until,
            "job": render.job(le.job, render.as_text)}


@router.post("/ack", response_model=AckManyPublic, summary="Ack many leases",
             responses=answers(*GUARDED, 413, 422), openapi_extra=ACK_MANY.openapi)
async def ack_many(request: Request) -> Response:
    """Each lease is answered on its own, in request order: one lost lease does not fail
    the others. A `lease_lost` entry with `already_completed: true` is a lease that did
    complete its job (its result is stored): the ack of a retried request whose first answer
    was lost, not work lost to another worker."""
    ctx, who = context_of(request), admitted(request)
    body = await ACK_MANY.read(request)
    outcomes = await core.ack_many(ctx, [(a.lease_id, a.result) for a in body.acks],
                                   who.scope_regex)
    return render.json_response({"results": [_result(o) for o in outcomes]})


@router.post("/release", response_model=AckManyPublic, summary="Release many leases",
             responses=answers(*GUARDED, 413, 422), openapi_extra=RELEASE_MANY.openapi)
async def release_many(request: Request) -> Response:
    """Releases each lease as `POST /v1/leases/{lease_id}/release` does, each with its own
    `delay_ms`, in one statement: what a stopping worker calls for the jobs it holds. Each
    lease is answered on its own, in request order, as in `POST /v1/leases/ack`: one lost
    lease does not fail the others."""
    ctx, who = context_of(request), admitted(request)
    body = await RELEASE_MANY.read(request)
    outcomes = await core.release_many(ctx, [(r.lease_id, r.delay_ms) for r in body.releases],
                                       who.scope_regex)
    return render.json_response({"results": [_result(o) for o in outcomes]})


def _result(o: core.AckOutcome) -> dict[str, object]:
    if o.ok:
        return {"lease_id": o.lease_id, "ok": True}
    if o.already_completed:
        return {"lease_id": o.lease_id, "ok": False, "code": o.code, "already_completed": True}
    return {"lease_id": o.lease_id, "ok": False, "code": o.code}


@router.post("/{lease_id}/heartbeat", response_model=HeartbeatPublic, responses=_LOST,
             summary="Extend a lease", openapi_extra=HEARTBEAT.openapi)
async def heartbeat(lease_id: str, request: Request) -> Response:
    """`locked_until` becomes now + `extend_ms` (default: the lease's length). A lease past
    its `locked_until` can no longer be extended."""
    ctx, who = context_of(request), admitted(request)
    body = await HEARTBEAT.read(request)
    extend = body.extend_ms if body else None
    until = await core.heartbeat(ctx, lease_id, extend, who.scope_regex)
    return render.json_response({"locked_until": until})


@router.post("/{lease_id}/ack", response_model=JobPublic, responses=_LOST,
             summary="Complete a job", openapi_extra=ACK.openapi)
async def ack(lease_id: str, request: Request) -> Response:
    """The job becomes `completed` with `result`. A lease past its end whose expiry the
    service has not processed yet (at most 1 s) is still held, so a late ack succeeds."""
    ctx, who = context_of(request), admitted(request)
    body = await ACK.read(request)
    job = await core.ack(ctx, lease_id, body.result if body else None, who.scope_regex)
    return render.json_response(render.job(job))


@router.post("/{lease_id}/fail", response_model=JobPublic, responses=_LOST,
             summary="Report a failed attempt", openapi_extra=FAIL.openapi)
async def fail(lease_id: str, request: Request) -> Response:
    """Retries after `min(backoff_base_ms × 2^(attempt−1), backoff_max_ms) × (1 + j)`, `j`
    in [0, 0.1), or after `retry_in_ms`; `retry: false` or no attempts left: `dead`.
    `error` is required (it is what `last_error` and `errors` show)."""
    ctx, who = context_of(request), admitted(request)
    body = await FAIL.read(request)
    job = await core.fail(ctx, lease_id, Failure(body.error, body.retry, body.retry_in_ms),
                          who.scope_regex)
    return render.json_response(render.job(job))


@router.post("/{lease_id}/release", response_model=JobPublic, responses=_LOST,
             summary="Give a job back without spending an attempt", openapi_extra=RELEASE.openapi)
async def release(lease_id: str, request: Request) -> Response:
    """The job goes back to `pending`, claimable again after `delay_ms` (default 0: at
    once), and the claim is not counted against `max_attempts`: `attempt` goes back down by
    one, and nothing is added to `errors` (nor to the lease expiries that make a poison
    pill). The release is recorded in the job's `releases`. For a worker that stops (a
    deploy, Ctrl-C) or holds jobs it will not start: SQS's zero visibility timeout,
    Sidekiq's push back on shutdown. Fenced as ack and fail: the lease must still be held (a
    lease past its end not yet processed still is); the next claim gets a new lease id."""
    ctx, who = context_of(request), admitted(request)
    body = await RELEASE.read(request)
    job = await core.release(ctx, lease_id, body.delay_ms if body else 0, who.scope_regex)
    return render.json_response(render.job(job))
