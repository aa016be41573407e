"""Operators: who is working (/v1/workers) and how fast (/v1/throughput). Both are read
from PostgreSQL, not from this process, so every replica answers the same. Workers report
themselves here too (/v1/workers/{worker_id}/beat)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query
from starlette.responses import Response

from jobq.api import render
from jobq.api.access import caller, require_queues
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import Text255, Throughput, WorkerBeatBody, WorkerBeatPublic, WorkerList
from jobq.core import activity as core
from jobq.core.context import Context
from jobq.domain.access import Principal

router = APIRouter(prefix="/v1", tags=["activity"])

MAX_WINDOW_S = 3600
MAX_MINUTES = 60


@router.get("/workers", response_model=WorkerList, summary="Workers seen recently", responses=answers(*GUARDED, 422))
async def list_workers(
    window_s: Annotated[
        int, Query(ge=1, le=MAX_WINDOW_S, description="how far back a finished job makes its worker seen")
    ] = 300,
    ctx: Context = Depends(context),
) -> Response:
    """The workers that beat (`POST /v1/workers/{worker_id}/beat`) within the last
    `window_s` seconds, hold running jobs now, or finished a job (completed, or failed for
    good) within the window, merged by `worker_id`, with their running jobs (at most 1000
    workers). A beating worker is listed while idle, with what it said of itself (`host`,
    `pid`, `concurrency`, `in_flight`, `started_at`, `state`: null for a worker known only
    from its jobs). A worker that neither beats nor got a job leaves no trace. A worker
    silent for an hour is forgotten. Costs a read of the workers table (a row per worker),
    of the running jobs and of the jobs finished in the window."""
    return render.json_response({"window_s": window_s, "workers": await core.workers(ctx, window_s)})


@router.post("/workers/{worker_id:path}/beat", response_model=WorkerBeatPublic,
             summary="A worker reports itself", responses=answers(*GUARDED, 404, 413, 422))
async def beat_worker(
    worker_id: Annotated[Text255, Path(description="the `worker_id` it claims with (percent-encoded)")],
    body: WorkerBeatBody | None = Body(default=None),
    ctx: Context = Depends(context),
    who: Principal = Depends(caller),
) -> Response:
    """A worker process says it is alive, and what it is: every 10 s or so, and when its
    state changes (`stopping` when told to stop, `stopped` at exit). One upsert of its row,
    `last_seen_at` now; a field left out keeps what an earlier beat said, so a beat may be
    `{}` or no body at all. `queues` outside the token's queues are `403`. Answers the
    worker's record as its beats made it; `GET /v1/workers` adds what its jobs say. A
    `worker_id` holding a line break names no path: `404`."""
    b = body or WorkerBeatBody()
    if b.queues:
        require_queues(who, b.queues)
    row = await core.beat(ctx, b.to_domain(worker_id))
    return render.json_response(row._asdict())


@router.get(
    "/throughput", response_model=Throughput, summary="Jobs finished per minute", responses=answers(*GUARDED, 422)
)
async def get_throughput(
    minutes: Annotated[int, Query(ge=1, le=MAX_MINUTES, description="how many minutes back")] = 15,
    ctx: Context = Depends(context),
) -> Response:
    """Per queue, the jobs that completed and that died in each of the last `minutes`
    minutes, counted from the jobs' `completed_at`. Jobs a queue's `retention_ms` has
    already deleted are not counted, so a retention shorter than the window undercounts.
    Costs a read of the jobs finished in the window (an index range per queue)."""
    return render.json_response({"minutes": minutes, "queues": await core.throughput(ctx, minutes)})
