"""Operator actions on single jobs: read, cancel, retry."""

from __future__ import annotations

from app.core.context import Context
from app.domain.errors import InvalidState, NotFound
from app.domain.jobs import JobStatus
from app.domain.leases import parse_job_id
from app.store.db import Row
from app.store.queries import Q


def _id(job_id: str) -> int:
    value = parse_job_id(job_id)
    if value is None:
        raise NotFound(f"job {job_id!r} does not exist")
    return value


async def get(ctx: Context, job_id: str) -> Row:
    row = await ctx.db.fetch_one(Q.JobGet, {"job_id": _id(job_id)})
    if row is None:
        raise NotFound(f"job {job_id!r} does not exist")
    return row


async def _conditional(ctx: Context, sql: str, job_id: str, verb: str) -> Row:
    row = await ctx.db.fetch_one(sql, {"job_id": _id(job_id)})
    if row is not None:
        return row
    current = await get(ctx, job_id)  # raises NotFound
    raise InvalidState(f"job {job_id} is {current['status']}: it cannot be {verb}")


async def cancel(ctx: Context, job_id: str) -> Row:
    row = await _conditional(ctx, Q.JobCancel, job_id, "cancelled")
    ctx.events.emit("cancelled", [row])
    return row


async def retry(ctx: Context, job_id: str) -> Row:
    row = await _conditional(ctx, Q.JobRetry, job_id, "retried")
    ctx.events.emit("retried", [row])
    ctx.wakeups.publish([row["queue"]])
    return row


def is_waiting(status: str) -> bool:
    return status in (JobStatus.PENDING, JobStatus.FAILED)
