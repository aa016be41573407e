"""Admins: recurring jobs, /v1/schedules. Each fire enqueues an ordinary job (core/schedules.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path
from starlette.responses import Response

from jobq.api import render
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.examples import SCHEDULE, SCHEDULE_PATCHES, SCHEDULE_PUTS
from jobq.api.schemas import (
    ScheduleList,
    ScheduleName,
    SchedulePatch,
    SchedulePublic,
    SchedulePut,
)
from jobq.core import schedules as core
from jobq.core.context import Context

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])

# The name goes through Annotated[..., Path()], as a queue's does, so that its pattern holds.
Name = Annotated[ScheduleName, Path()]

_NOT_FOUND = {404: "`not_found`: no such schedule"}



def _one(description: str) -> dict[str, Any]:
    # The model too: FastAPI gives the response_model's schema to the route's status_code
    # alone, and PUT's 200 (a replace) would declare none (a generated client parses nothing).
    return {"description": description, "model": SchedulePublic,
            "content": {"application/json": {"example": SCHEDULE}}}


@router.get("", response_model=ScheduleList, summary="List schedules",
            responses={200: {"description": "every schedule, by name", "content": {
                "application/json": {"example": {"schedules": [SCHEDULE]}}}},
                **answers(*GUARDED)})
async def list_schedules(ctx: Context = Depends(context)) -> Response:
    """Every schedule, enabled or not, by name."""
    return render.json_response({"schedules": await core.list_all(ctx)})


@router.get("/{name}", response_model=SchedulePublic, summary="Read a schedule",
            responses={200: _one("the schedule"), **answers(*GUARDED, 422, notes=_NOT_FOUND)})
async def get_schedule(name: Name, ctx: Context = Depends(context)) -> Response:
    """`next_fire_at` is the next time it fires (null while disabled); `last_fired_at` and
    `last_job_id` say what its last fire enqueued."""
    return render.json_response(await core.get(ctx, name))


@router.put("/{name}", response_model=SchedulePublic, summary="Create or replace a schedule",
            responses={200: _one("replaced"), 201: {**_one("created"), "headers": {"Location": {
                "description": "`/v1/schedules/{name}`", "required": True,
                "schema": {"type": "string"}}}}, **answers(*GUARDED, 413, 422)},
            status_code=201)
async def put_schedule(name: Name, body: Annotated[SchedulePut, Body(openapi_examples=SCHEDULE_PUTS)],
                       ctx: Context = Depends(context)) -> Response:
    """Each fire enqueues one job from `job`, with the idempotency key
    `schedule:{name}:{fire time}` (such as `schedule:nightly-report:2026-12-04T01:00:00Z`), so
    a fire is one job however many replicas run. The job obeys its queue's `max_depth`: a
    fire that meets a full queue waits in `pending_fire_at` and is tried again every second.
    Replacing keeps `last_fired_at` and `last_job_id`; the next fire time is computed from
    now, so no fire time before the change is run."""
    job = body.job
    d = core.draft(body.cron, body.timezone, body.misfire, body.enabled, core.JobTemplate(
        type=job.type, queue=job.queue, payload=job.payload, priority=job.priority,
        max_attempts=job.max_attempts))
    out, created = await core.put(ctx, name, d)
    if created:
        return render.json_response(out, 201, {"Location": f"/v1/schedules/{name}"})
    return render.json_response(out, 200)


@router.patch("/{name}", response_model=SchedulePublic, summary="Change a schedule",
              responses={200: _one("the schedule as changed"),
                         **answers(*GUARDED, 413, 422, notes=_NOT_FOUND)})
async def patch_schedule(name: Name,
                         body: Annotated[SchedulePatch, Body(openapi_examples=SCHEDULE_PATCHES)],
                         ctx: Context = Depends(context)) -> Response:
    """Only the fields given change; `job` is a partial template, where null sets a field
    back to its default. A new `cron` or `timezone`, or `enabled: true` on a disabled
    schedule, sets the next fire time from now (no burst of the times it was off);
    `enabled: false` stops it firing and drops a fire waiting for a full queue."""
    return render.json_response(await core.update(ctx, name, body.changes()))


@router.delete("/{name}", status_code=204, response_class=Response, summary="Delete a schedule",
               responses={204: {"description": "deleted"}, **answers(*GUARDED, 422, notes=_NOT_FOUND)})
async def delete_schedule(name: Name, ctx: Context = Depends(context)) -> Response:
    """The jobs it enqueued stay where they are."""
    await core.delete(ctx, name)
    return Response(status_code=204)
