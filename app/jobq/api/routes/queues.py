"""Operators: /v1/queues."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from starlette.responses import Response

from jobq.api import render
from jobq.api.access import caller, require_queues
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import QueueList, QueueName, QueuePublic, QueueSettingsPatch
from jobq.core import queues as core
from jobq.core.context import Context
from jobq.domain.access import Principal

router = APIRouter(prefix="/v1/queues", tags=["queues"])

# The name goes through Annotated[..., Path()]: written as `name: QueueName = Path()`, FastAPI
# drops QueueName's pattern, and a PATCH could create a queue no enqueue could ever name.


@router.get("", response_model=QueueList, summary="List queues", responses=answers(*GUARDED))
async def list_queues(ctx: Context = Depends(context), who: Principal = Depends(caller)) -> Response:
    """Counts come from counters kept by triggers, not from counting rows, so this stays
    fast however many finished jobs the table holds. A token for some queues lists those."""
    entries = [q for q in await core.list_queues(ctx) if who.sees(q["name"])]
    return render.json_response({"queues": entries})


@router.get("/{name}", response_model=QueuePublic, summary="Read a queue",
            responses=answers(*GUARDED, 422, notes={404: "`not_found`: no such queue"}))
async def get_queue(name: Annotated[QueueName, Path()],
                    ctx: Context = Depends(context), who: Principal = Depends(caller)) -> Response:
    require_queues(who, (name,))
    return render.json_response(await core.get_queue(ctx, name))


@router.patch("/{name}", response_model=QueuePublic, summary="Change a queue's settings",
              responses=answers(*GUARDED, 413, 422))
async def patch_queue(body: QueueSettingsPatch, name: Annotated[QueueName, Path()],
                      ctx: Context = Depends(context), who: Principal = Depends(caller)) -> Response:
    """Only the settings given change. A queue that does not exist yet is created with the
    defaults first. Running caps and pauses apply to claims within 1 s on every replica."""
    require_queues(who, (name,))
    return render.json_response(await core.update_queue(ctx, name, body.changes()))
