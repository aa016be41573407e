"""Probes: /healthz (the process is up) and /readyz (database reachable, schema current)."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from starlette.responses import Response

from jobq.api import render
from jobq.api.deps import context
from jobq.api.document import answers
from jobq.api.schemas import Health, Ready
from jobq.core.context import Context
from jobq.domain.errors import Unavailable
from jobq.store.migrate import head_revision

router = APIRouter(tags=["health"])
_HEAD = head_revision()


@router.get("/healthz", summary="Liveness", response_model=Health)
async def healthz() -> Response:
    return render.json_response({"status": "ok"})


_NOT_READY = {503: "`unavailable`: the database cannot be reached, or its schema is not the one "
                   "this code needs"}


@router.get("/readyz", summary="Readiness", response_model=Ready, responses=answers(notes=_NOT_READY))
async def readyz(ctx: Context = Depends(context)) -> Response:
    current = await ctx.schema_revision()
    if current != _HEAD:
        raise Unavailable(f"schema is at {current}, the code needs {_HEAD}", ctx.db.retry_after_s)
    return render.json_response({"status": "ready", "schema": current})
