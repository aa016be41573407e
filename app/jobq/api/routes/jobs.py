"""Producers and operators: /v1/jobs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from jobq.api import render
from jobq.api.access import admitted, caller, require_queues
from jobq.api.bodies import JsonBody
from jobq.api.deps import context, context_of
from jobq.api.direct import DirectRoute
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import (
    JobBatchCreate,
    JobBatchPublic,
    JobCreate,
    JobPage,
    JobPublic,
    QueueName,
    SearchText,
    Text255,
)
from jobq.core import enqueue as enq
from jobq.core import jobs as core_jobs
from jobq.core.context import Context
from jobq.domain.access import Principal
from jobq.domain.jobs import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, MAX_SEARCH_LENGTH, JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=DirectRoute)

# Read by the endpoints themselves, with orjson (jobq.api.bodies): these are a producer's calls.
CREATE: JsonBody[JobCreate] = JsonBody(JobCreate)
CREATE_MANY: JsonBody[JobBatchCreate] = JsonBody(JobBatchCreate)

_IDEMPOTENCY = {409: "`idempotency_conflict`: the key names a job with another type or payload"}
_ENQUEUE_RESPONSES = {
    200: {"model": JobPublic, "description": "idempotent replay: the existing job, nothing new"},
    201: {"description": "enqueued", "headers": {"Location": {
        "description": "`/v1/jobs/{id}`", "required": True, "schema": {"type": "string"}}}},
    **answers(*GUARDED, 413, 422, 429, notes=_IDEMPOTENCY),
}
_JOB = {404: "`not_found`: no such job"}


def _producer(who: Principal) -> enq.Producer | None:
    """The caller's token, as far as its own enqueue rate goes (None: it has none)."""
    if who.token_id is None or who.enqueue_rate is None:
        return None
    return enq.Producer(who.token_id, who.enqueue_rate)


@router.post("", status_code=201, response_model=JobPublic, responses=_ENQUEUE_RESPONSES,
             summary="Enqueue one job", openapi_extra=CREATE.openapi)
async def create_job(request: Request) -> Response:
    """Committed before the answer. `delay_ms` or `run_at` (not both) delay the job; a
    `run_at` in the past makes it visible at once. A queue at or above its `max_depth` of
    waiting (`pending` + `failed`) jobs answers 429. With concurrent producers the depth
    check reads committed counts, so the limit may be passed by at most the number of
    enqueues in flight at that moment. Beyond the queue's or the token's `enqueue_rate`, or
    past the queue's soft thresholds for a share of enqueues, 429 too, with its own `code`
    and `retry_after_ms` (see the guide's rate limits).

    A job claimable at once, enqueued while a long-poll of this service process waits for it,
    may be leased to that long-poll in the enqueue's own statement and commit (the guide's
    "handed over in the enqueue" says when): the answer then shows it `running`, `attempt`
    1, with the long-poll's `worker_id` and `locked_until`."""
    ctx, who = context_of(request), admitted(request)
    body = await CREATE.read(request)
    require_queues(who, (body.queue,))
    out = await enq.enqueue(ctx, body.to_domain(), _producer(who))
    job = render.job(out.job)
    if not out.created:
        return render.json_response(job, 200)
    return render.json_response(job, 201, {"Location": f"/v1/jobs/{out.job.id}"})


@router.post("/batch", status_code=201, response_model=JobBatchPublic,
             responses=answers(*GUARDED, 413, 422, notes={
                 **_IDEMPOTENCY, 429: "`queue_full`: a target queue would pass max_depth; "
                                      "`queue_rate_limited` or `token_rate_limited`: a bucket "
                                      "holds fewer jobs than the batch (`retry_after_ms`: when it "
                                      "holds them all); `queue_overloaded`: past soft thresholds. "
                                      "Nothing enqueued. `Retry-After` in whole seconds"}),
             summary="Enqueue up to 1000 jobs, all or nothing", openapi_extra=CREATE_MANY.openapi)
async def create_jobs(request: Request) -> Response:
    """One transaction. Jobs come back in request order; an idempotent replay comes back as
    the existing job, and two jobs of one batch with the same key in the same queue are one
    job. A 409 for any conflicting key, or a 429, enqueues nothing."""
    ctx, who = context_of(request), admitted(request)
    body = await CREATE_MANY.read(request)
    if not who.queues.is_all:  # the common case costs one test, not one call per job
        for i, j in enumerate(body.jobs):
            require_queues(who, (j.queue,), f"jobs[{i}].queue")
    outs = await enq.enqueue_many(ctx, [j.to_domain() for j in body.jobs], _producer(who))
    return render.json_response({"jobs": [render.job(o.job) for o in outs]}, 201)


@router.get("", response_model=JobPage, summary="List jobs, newest first",
            responses=answers(*GUARDED, 422))
async def list_jobs(
    queue: Annotated[QueueName | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    type: Annotated[Text255 | None, Query()] = None,  # noqa: A002 - the contract's name
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    search: Annotated[SearchText | None, Query(
        description="only jobs whose payload (its JSON text) or `last_error` contains this "
                    f"text, ignoring case; 1 to {MAX_SEARCH_LENGTH} characters. Scans: see above")] = None,
    ctx: Context = Depends(context),
    who: Principal = Depends(caller),
) -> Response:
    """Keyset-paginated: pass `next_cursor` as `cursor` for the next page; it is null on the
    last page. Jobs enqueued after the first page was read do not shift later pages. A
    token for some queues lists only jobs of those.

    `search` scans rather than looks up (no index finds a substring of a payload): each page
    examines at most the newest 5,000 jobs that the other filters select (after `cursor`;
    that many from each queue and status it covers) and holds those that match. A page of a
    search may therefore hold fewer than `limit` jobs, or none, and still have a
    `next_cursor`, which goes on past the jobs examined. The payload's JSON text is
    PostgreSQL's rendering of it (`{"key": "value", "n": 1}`: a space after `:` and `,`)."""
    if queue is not None:
        require_queues(who, (queue,))
    jobs, next_cursor = await core_jobs.list_jobs(
        ctx, queue=queue, status=status, type_=type, limit=limit, cursor=cursor,
        scope=who.scope_regex, search=search)
    return render.json_response({"jobs": [render.job(j) for j in jobs], "next_cursor": next_cursor})


@router.get("/{job_id}", response_model=JobPublic, summary="Read a job",
            responses=answers(*GUARDED, notes=_JOB))
async def get_job(job_id: str, ctx: Context = Depends(context),
                  who: Principal = Depends(caller)) -> Response:
    """A job outside the token's queues is `404`, as if it did not exist: ids leak nothing."""
    return render.json_response(render.job(await core_jobs.get(ctx, job_id, who.scope_regex)))


@router.post("/{job_id}/cancel", response_model=JobPublic, summary="Cancel a job",
             responses=answers(*GUARDED, notes={**_JOB, 409: "`invalid_state`: the job has finished"}))
async def cancel_job(job_id: str, ctx: Context = Depends(context),
                     who: Principal = Depends(caller)) -> Response:
    """A waiting job becomes `cancelled`; so does a running one, whose lease dies: its
    worker's next heartbeat, ack or fail answers `409 lease_lost`."""
    return render.json_response(render.job(await core_jobs.cancel(ctx, job_id, who.scope_regex)))


@router.post("/{job_id}/retry", response_model=JobPublic, summary="Retry a job now",
             responses=answers(*GUARDED, notes={
                 **_JOB, 409: "`invalid_state`: not dead, cancelled or failed"}))
async def retry_job(job_id: str, ctx: Context = Depends(context),
                    who: Principal = Depends(caller)) -> Response:
    """A `dead`, `cancelled` or `failed` job goes back to `pending`, visible now, `attempt`
    reset to 0 and `errors` kept. Old lease ids stay dead."""
    return render.json_response(render.job(await core_jobs.retry(ctx, job_id, who.scope_regex)))


@router.delete("/{job_id}", status_code=204, response_class=Response, summary="Delete a job",
               responses={204: {"description": "deleted"},
                          **answers(*GUARDED, notes={**_JOB, 409: "`invalid_state`: the job is running"})})
async def delete_job(job_id: str, ctx: Context = Depends(context),
                     who: Principal = Depends(caller)) -> Response:
    """Deletes a job for good, whatever its status but `running` (cancel a running job
    first: its worker holds a lease): waiting, failed, or finished. Its idempotency key is
    free again, and the queue's counts drop by one. One outside the token's queues is
    `404`, as if it did not exist."""
    await core_jobs.delete(ctx, job_id, who.scope_regex)
    return Response(status_code=204)
