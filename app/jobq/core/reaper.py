"""Lease expiry. Every service process runs the reaper: the statement skips rows another
reaper holds, so replicas share the work and none is special; if one dies, the others go on."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from jobq.core.context import Context
from jobq.domain.errors import JobqError
from jobq.domain.jobs import JobStatus
from jobq.store import records
from jobq.store.queries import Q

log = logging.getLogger("jobq.reaper")

REAP_BATCH = 500


async def reap_once(ctx: Context) -> int:
    """Process up to one batch of expired leases; returns how many."""
    expired = records.changes(await ctx.db.fetch(Q.JobReapExpired, {"limit": REAP_BATCH}))
    if expired:
        ctx.events.emit("lease_expired", expired)
        dead = [c for c in expired if c.status == JobStatus.DEAD]
        if dead:
            ctx.events.emit("dead", dead)
        ctx.wakeups.publish(Counter(c.queue for c in expired if c.status == JobStatus.PENDING))
    return len(expired)


async def run_reaper(ctx: Context, interval_s: float) -> None:
    while True:
        try:
            while await reap_once(ctx) == REAP_BATCH:
                pass  # a backlog: keep going without sleeping
        except JobqError as exc:
            log.warning("lease reaper: %s", exc.detail)
        except Exception:  # never let the reaper die; the next round may succeed
            log.exception("lease reaper failed")
        await asyncio.sleep(interval_s)
