"""Operators: the dead-letter queue, /v1/dead."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query
from starlette.responses import Response

from jobq.api import render
from jobq.api.access import caller, require_queues
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import DeadFilter, Purged, QueueName, Replayed, Text255
from jobq.core import dead as core
from jobq.core.context import Context
from jobq.domain.access import Principal

router = APIRouter(prefix="/v1/dead", tags=["dead letters"])


@router.post("/replay", response_model=Replayed, summary="Replay dead jobs",
             responses=answers(*GUARDED, 413, 422))
async def replay_dead(body: DeadFilter | None = Body(default=None),
                      ctx: Context = Depends(context), who: Principal = Depends(caller)) -> Response:
    """Matching dead jobs (all of them, or the oldest `limit`) go back to `pending`, visible
    now, `attempt` reset to 0, `errors` kept. Works in batches, so a large replay holds no
    long lock. A token for some queues replays only jobs of those."""
    f = body or DeadFilter()
    if f.queue is not None:
        require_queues(who, (f.queue,))
    n = await core.replay(ctx, queue=f.queue, type_=f.type, limit=f.limit, scope=who.scope_regex)
    return render.json_response({"replayed": n})


@router.delete("", response_model=Purged, summary="Purge dead jobs", responses=answers(*GUARDED, 422))
async def purge_dead(
    queue: Annotated[QueueName | None, Query()] = None,
    type: Annotated[Text255 | None, Query()] = None,  # noqa: A002 - the contract's name
    limit: Annotated[int | None, Query(ge=1)] = None,
    ctx: Context = Depends(context),
    who: Principal = Depends(caller),
) -> Response:
    """Deletes matching dead jobs (all, or the oldest `limit`). A token for some queues
    purges only jobs of those."""
    if queue is not None:
        require_queues(who, (queue,))
    n = await core.purge(ctx, queue=queue, type_=type, limit=limit, scope=who.scope_regex)
    return render.json_response({"purged": n})


@router.delete("/{job_id}", status_code=204, response_class=Response, summary="Purge one dead job",
               responses={204: {"description": "purged"},
                          **answers(*GUARDED, notes={404: "`not_found`: no such job",
                                                     409: "`invalid_state`: the job is not dead"})})
async def purge_dead_job(job_id: str, ctx: Context = Depends(context),
                         who: Principal = Depends(caller)) -> Response:
    """Deletes one dead job, by id. A job of another status is `409` (cancel or retry it
    instead); one outside the token's queues is `404`, as if it did not exist."""
    await core.purge_one(ctx, job_id, who.scope_regex)
    return Response(status_code=204)
