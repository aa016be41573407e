"""Operators: who is working (/v1/workers) and how fast (/v1/throughput). Both are read
from PostgreSQL, not from this process, so every replica answers the same."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from starlette.responses import Response

from jobq.api import render
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import Throughput, WorkerList
from jobq.core import activity as core
from jobq.core.context import Context

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
    """The workers that hold running jobs now, or finished a job (completed, or failed for
    good) within the last `window_s` seconds, by `worker_id`, with their running jobs
    (at most 1000 workers). A worker that asked for work and got none leaves no trace and
    is not listed. Costs a read of the running jobs and of the jobs finished in the window."""
    return render.json_response({"window_s": window_s, "workers": await core.workers(ctx, window_s)})


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
