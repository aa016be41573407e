"""Operators: /v1/queues."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import Response

from jobq.api import render
from jobq.api.access import caller, require_queues
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import QueueList, QueueName, QueuePublic, QueueSettingsPatch
from jobq.core import queues as core
from jobq.core.context import Context
from jobq.domain.access import Principal
from jobq.domain.jobs import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT

router = APIRouter(prefix="/v1/queues", tags=["queues"])

# The name goes through Annotated[..., Path()]: written as `name: QueueName = Path()`, FastAPI
# drops QueueName's pattern, and a PATCH could create a queue no enqueue could ever name.


@router.get("", response_model=QueueList, summary="List queues, by name, a page at a time",
            responses=answers(*GUARDED, 422))
async def list_queues(
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT, description=(
        f"queues per page (default {DEFAULT_LIST_LIMIT}, at most {MAX_LIST_LIMIT})"))
    ] = DEFAULT_LIST_LIMIT,
    cursor: Annotated[str | None, Query(max_length=200, description=(
        "`next_cursor` of the previous page; absent: the first page"))] = None,
    prefix: Annotated[QueueName | None, Query(description=(
        "only queues whose name starts with this"))] = None,
    ctx: Context = Depends(context), who: Principal = Depends(caller),
) -> Response:
    """Paginated by name: pass `next_cursor` as `cursor` for the next page; it is null on
    the last page. A client that sends no `cursor` gets the first page only (`limit`,
    default 100): to see every queue, follow `next_cursor`. A queue created after a page
    was read shows up on a later page if its name sorts after that page's last one.
    Counts come from counters kept by triggers, read for the page's queues only, so a page
    costs the same however many queues and jobs there are. A token for some queues lists
    only those, page after full page."""
    entries, next_cursor = await core.list_queues(
        ctx, limit=limit, cursor=cursor, prefix=prefix, scope=who.scope_regex)
    return render.json_response({"queues": entries, "next_cursor": next_cursor})


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


@router.delete("/{name}", status_code=204, response_class=Response, summary="Delete a queue",
               responses={204: {"description": "deleted"},
                          **answers(*GUARDED, 422, notes={
                              404: "`not_found`: no such queue",
                              409: "`queue_not_empty`: the queue holds jobs waiting, running, "
                                   "failed or dead (`counts` by status), or schedules or topic "
                                   "subscriptions name it (`schedules`, `topics`); nothing was "
                                   "deleted"})})
async def delete_queue(
    name: Annotated[QueueName, Path()],
    purge: Annotated[bool, Query(description=(
        "delete the queue's jobs too, whatever their status: running jobs lose their leases "
        "(a later heartbeat, ack or fail answers `409 lease_lost`)"))] = False,
    ctx: Context = Depends(context), who: Principal = Depends(caller),
) -> Response:
    """Deletes the queue: its settings, its completed and cancelled jobs (so it shows up
    nowhere any more: not in `GET /v1/queues`, `GET /v1/jobs?queue=`, `/metrics` or the
    dashboard), and its counts. Refused with `409 queue_not_empty` while it holds a job
    waiting (`pending`), running, failed and awaiting a retry, or dead; the answer's
    `counts` says how many of each. With `purge=true` those jobs are deleted first, in
    batches of 1000 (no lock on a table, none held long).

    Schedules whose job targets the queue and topics subscribed to it are never deleted
    with it: while any names it the delete is refused (`409 queue_not_empty`, naming them
    in `schedules` and `topics`), with or without `purge`. Delete those schedules (or point
    them at another queue) and unsubscribe the queue first.

    An enqueue to the queue while it is deleted is never lost: it either commits first (and
    the delete answers 409, or purges it) or comes after and creates the queue again with
    the defaults, as any first enqueue does. A claim waiting on the queue keeps waiting."""
    require_queues(who, (name,))
    await core.delete_queue(ctx, name, purge=purge)
    return Response(status_code=204)
