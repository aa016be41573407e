"""Operator actions on single jobs: read, cancel, retry."""

from __future__ import annotations

import base64

from jobq.core.context import Context
from jobq.domain.errors import InvalidInput, InvalidState, NotFound
from jobq.domain.jobs import SEARCH_SCAN, Job, JobStatus
from jobq.domain.leases import parse_job_id
from jobq.store import listing, records
from jobq.store.queries import Q
from jobq.store.records import JobChange


def _id(job_id: str) -> int:
    value = parse_job_id(job_id)
    if value is None:
        raise NotFound(f"job {job_id!r} does not exist")
    return value


async def get(ctx: Context, job_id: str, scope: str | None = None) -> Job:
    """``scope`` (here and below): a regular expression of the caller's queues, None for all;
    a job outside it is not found."""
    row = await ctx.db.fetch_one(Q.JobGet, {"job_id": _id(job_id), "scope": scope})
    if row is None:
        raise NotFound(f"job {job_id!r} does not exist")
    return records.job(row)


async def _conditional(ctx: Context, sql: str, job_id: str, verb: str,
                       scope: str | None) -> tuple[Job, JobChange]:
    row = await ctx.db.fetch_one(sql, {"job_id": _id(job_id), "scope": scope})
    if row is not None:
        return records.job(row), records.change(row)
    current = await get(ctx, job_id, scope)  # raises NotFound
    raise InvalidState(f"job {job_id} is {current.status}: it cannot be {verb}")


async def cancel(ctx: Context, job_id: str, scope: str | None = None) -> Job:
    job, change = await _conditional(ctx, Q.JobCancel, job_id, "cancelled", scope)
    ctx.events.emit("cancelled", [change])
    return job


async def retry(ctx: Context, job_id: str, scope: str | None = None) -> Job:
    job, change = await _conditional(ctx, Q.JobRetry, job_id, "retried", scope)
    ctx.events.emit("retried", [change])
    ctx.wakeups.publish({job.queue: 1})
    return job


async def delete(ctx: Context, job_id: str, scope: str | None = None) -> None:
    """Delete a job that is not running, waiting or finished, for good (its idempotency key
    is free again). NotFound for no such job; InvalidState for a running one (cancel it
    first: its worker holds a lease)."""
    for _ in range(2):
        row = await ctx.db.fetch_one(Q.JobDelete, {"job_id": _id(job_id), "scope": scope})
        if row is not None:
            ctx.events.emit("deleted", [records.change(row)])
            return
        current = await get(ctx, job_id, scope)  # raises NotFound
        if current.status is JobStatus.RUNNING:
            raise InvalidState(f"job {job_id} is running: cancel it before deleting it")
        # Not running, yet not deleted: a retry moved it between the two tables while the
        # statement ran (its snapshot saw it in neither). Once more finds it where it is now.
    raise InvalidState(f"job {job_id} is {current.status}: it changed while being deleted; try again")


async def list_jobs(
    ctx: Context,
    *,
    queue: str | None,
    status: str | None,
    type_: str | None,
    limit: int,
    cursor: str | None,
    scope: str | None = None,
    search: str | None = None,
) -> tuple[list[Job], str | None]:
    """A page of jobs, newest first, and the cursor of the next page (None on the last).

    With ``search``, the page holds the matches among the next SEARCH_SCAN jobs the other
    filters select (listing.jobs_page), so it may be short, or empty, and still have a next
    page: the cursor then points past the last job examined."""
    before = decode_cursor(cursor) if cursor else None
    sql, params = listing.jobs_page(queue=queue, status=status, type_=type_, before_id=before,
                                    limit=limit, scope=scope, search=search)
    page = records.job_page(await ctx.db.fetch(sql, params), search is not None)
    jobs = page.jobs
    if len(jobs) > limit:
        jobs = jobs[:limit]
        return jobs, encode_cursor(jobs[-1].id)
    if page.scan_n >= SEARCH_SCAN and page.scan_low is not None:
        # Every job the scan examined was looked at; older ones may match.
        return jobs, encode_cursor(page.scan_low)
    return jobs, None


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, value = raw.partition(":")
        if prefix != "id" or not value.isdigit() or not value.isascii():
            raise ValueError
        number = int(value)
        if number > 2**63 - 1:
            raise ValueError
        return number
    except ValueError:
        raise InvalidInput("cursor is not one this service handed out", ["query", "cursor"]) from None
