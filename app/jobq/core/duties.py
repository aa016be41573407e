"""Background duties that exactly one replica does at a time: retention, which is the upkeep
of the finished jobs' history (jobq.store.history): partitions past their range dropped whole,
the jobs no partition drop takes deleted one by one, partitions made ahead; and, with it, the
rows of worker processes that stopped beating an hour ago.

Lease expiry is not among them: every replica reaps (see reaper.py), since the reap
statement shares work safely and the contract wants expiry within 1 s even while a new
leader is being chosen. Nor are aging keys: every write sets its job's key, and a change of
aging_ms re-keys the jobs of writers that read the old setting (store/queue_settings.py).
"""

from __future__ import annotations

import asyncio
import logging
import time

from jobq.core import activity, maintenance
from jobq.core.context import Context
from jobq.store import history
from jobq.store.leader import Leadership
from jobq.store.queries import Q

log = logging.getLogger("jobq.duties")

RETENTION_BATCH = 1000
RETENTION_EVERY_S = 10.0
# How often the leader checks that it still holds the lock, and looks whether retention is due.
LEAD_EVERY_S = 1.0
TAKEOVER_EVERY_S = 1.0
# After failures in a row (the database away, or no connection slot free for the lock's
# session), the next try waits twice as long each time, up to this: one log line per try,
# not one a second for as long as a database over its connection budget stays full.
TAKEOVER_BACKOFF_MAX_S = 5.0
# Between retention batches, so deletes never hog the table or the disk.
RETENTION_PAUSE_S = 0.05


async def delete_expired(ctx: Context) -> int:
    """Retention: drop the history partitions whose range has passed (a partition holds the
    jobs expiring in its range; dropped, its disk comes back at once), delete in small batches
    the expired jobs no drop takes (the DEFAULT partition's, and those of a queue whose
    retention was lowered after they finished), and make the partitions ahead. Returns how
    many jobs went."""
    _, total = await history.drop_expired(ctx.db)
    while True:
        deleted = await history.delete_expired(ctx.db, RETENTION_BATCH)
        total += deleted
        if deleted < RETENTION_BATCH:
            break
        await asyncio.sleep(RETENTION_PAUSE_S)
    await history.create_ahead(ctx.db, ctx.history_partition_s)
    return total


async def lead(ctx: Context, leadership: Leadership) -> None:
    """Run the duties while we hold the lock; return when the lock's session is lost."""
    ctx.is_leader = True
    log.info("this process now runs the background duties")
    last_retention = 0.0
    try:
        while True:
            await leadership.check()
            await maintenance.tend(ctx)  # ANALYZE and VACUUM where autovacuum does not
            if time.monotonic() - last_retention >= RETENTION_EVERY_S:
                deleted = await delete_expired(ctx)
                if deleted:
                    log.info("retention deleted %d finished jobs", deleted)
                # Workers silent for an hour: no listing window reaches them any more.
                await activity.forget_workers(ctx)
                # Rate limits' state no window or bucket needs any more (idle tenants' keys).
                await ctx.db.fetch(Q.RateStateForget)
                last_retention = time.monotonic()
            await asyncio.sleep(LEAD_EVERY_S)
    finally:
        ctx.is_leader = False


async def run_duties(ctx: Context, leadership: Leadership) -> None:
    await maintenance.check_at_start(ctx)  # every process: warn if autovacuum is off
    failures = 0
    while True:
        try:
            if await leadership.try_acquire():
                await lead(ctx, leadership)
            failures = 0
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database went away; try again, maybe as a follower
            failures += 1
            pause = retry_pause(failures)
            log.warning("background duties interrupted: %s; trying again in %.1f s", exc, pause)
            await leadership.release()
            await asyncio.sleep(pause - TAKEOVER_EVERY_S)
        await asyncio.sleep(TAKEOVER_EVERY_S)


def retry_pause(failures: int) -> float:
    """The pause before the next try after ``failures`` failures in a row: 1, 2, 4, then 5 s."""
    return min(TAKEOVER_BACKOFF_MAX_S, TAKEOVER_EVERY_S * 2 ** (failures - 1))
