"""Operators: the dead-letter queue, /v1/dead."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query
from starlette.responses import Response

from jobq.api import render
from jobq.api.deps import context
from jobq.api.problems import GUARDED, answers
from jobq.api.schemas import DeadFilter, Purged, QueueName, Replayed, Text255
from jobq.core import dead as core
from jobq.core.context import Context

router = APIRouter(prefix="/v1/dead", tags=["dead letters"])


@router.post("/replay", response_model=Replayed, summary="Replay dead jobs",
             responses=answers(*GUARDED, 413, 422))
async def replay_dead(body: DeadFilter | None = Body(default=None),
                      ctx: Context = Depends(context)) -> Response:
    """Matching dead jobs (all of them, or the oldest `limit`) go back to `pending`, visible
    now, `attempt` reset to 0, `errors` kept. Works in batches, so a large replay holds no
    long lock."""
    f = body or DeadFilter()
    n = await core.replay(ctx, queue=f.queue, type_=f.type, limit=f.limit)
    return render.json_response({"replayed": n})


@router.delete("", response_model=Purged, summary="Purge dead jobs", responses=answers(*GUARDED, 422))
async def purge_dead(
    queue: Annotated[QueueName | None, Query()] = None,
    type: Annotated[Text255 | None, Query()] = None,  # noqa: A002 - the contract's name
    limit: Annotated[int | None, Query(ge=1)] = None,
    ctx: Context = Depends(context),
) -> Response:
    """Deletes matching dead jobs (all, or the oldest `limit`)."""
    n = await core.purge(ctx, queue=queue, type_=type, limit=limit)
    return render.json_response({"purged": n})
