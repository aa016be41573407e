"""The /metrics scrape: the process's counters (``core.counters``) and gauges of depth and lag,
read from the database at scrape time so that every process reports the same truth."""

from __future__ import annotations

import os
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Metric, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from jobq.core import counters, maintenance
from jobq.core.context import Context
from jobq.core.counters import OTHER
from jobq.domain.jobs import JobStatus
from jobq.store import records
from jobq.store.queries import Q

_WAITING = frozenset({JobStatus.PENDING.value, JobStatus.FAILED.value})




@dataclass(frozen=True)
class QueueBound:
    """Which queues get series of their own: at most ``limit``, the busiest (most waiting
    jobs) of those matching ``pattern`` (a regular expression; None: every queue)."""

    limit: int
    pattern: str | None = None


UNBOUNDED = QueueBound(limit=2**31 - 1)


def bound_counters(bound: QueueBound) -> None:
    """The same bound for this process's counters and histograms by queue (at start)."""
    counters.bound_queues(bound.limit, bound.pattern)


async def _queue_gauges(ctx: Context, bound: QueueBound) -> list[Metric]:
    """Depths, counts by status and lag, per shown queue and summed in ``queue="_other"``.

    Before this bound, 10,000 queues made a scrape of 2.6 s and 4 MB (~90,000 series).
    The totals are exact: every counter is read and each one lands in its queue's series or
    in ``_other``, so ``sum(jobq_jobs)`` is the true number of jobs whatever is shown."""
    db = ctx.db
    async with db.connection() as conn:
        shown: list[str] = [records.scalar(r) for r in await db.run(
            conn, Q.MetricsShownQueues, {"pattern": bound.pattern, "limit": bound.limit})]
        # A row of queue NULL sums every queue not shown (records.JobCount / QueueLag).
        counts = [records.job_count(r) for r in await db.run(conn, Q.MetricsDepthsShown, {"shown": shown})]
        lag = [records.queue_lag(r) for r in await db.run(conn, Q.MetricsOldestWaitingShown, {"shown": shown})]
    # The shown queues' counters too, at 0 if this process has counted nothing for them yet:
    # a queue made by a settings call, or busy on another replica, is scraped at 0 before its
    # first job here, so increase() counts that job.
    counters.start_queues(shown)
    waiting = GaugeMetricFamily("jobq_waiting_jobs", "Jobs waiting (pending + failed), by queue "
                                "and type", labels=["queue", "type"])
    by_status = GaugeMetricFamily("jobq_jobs", "Jobs by queue and status",
                                  labels=["queue", "status"])
    oldest = GaugeMetricFamily("jobq_oldest_waiting_seconds", "Age of the oldest job claimable "
                               "now, from its visible_at (0 when none); for _other the largest "
                               "of those queues", labels=["queue"])
    waiting_acc: dict[tuple[str, str], int] = {}
    status_acc: dict[tuple[str, str], int] = {}
    for c in counts:
        q, t, s, n = c.queue or OTHER, c.type, c.status, c.n
        status_acc[(q, s)] = status_acc.get((q, s), 0) + n
        # A series that drops to zero is reported as 0, not left out: a vanished series
        # reads as "no data" (and ``sum by (queue)`` as nothing) rather than as an empty
        # queue. So every (queue, type) that still has a job in any status has a waiting
        # count, and every shown queue (and _other) every status.
        waiting_acc[(q, t)] = waiting_acc.get((q, t), 0) + (n if s in _WAITING else 0)
    for q in (*shown, OTHER):
        for status in JobStatus:
            status_acc.setdefault((q, status.value), 0)
    for (q, t), n in sorted(waiting_acc.items()):
        waiting.add_metric([q, t], n)
    for (q, s), n in sorted(status_acc.items()):
        by_status.add_metric([q, s], n)
    lag_ms = {r.queue or OTHER: r.oldest_waiting_ms or 0 for r in lag}
    for q in sorted((*shown, OTHER)):
        oldest.add_metric([q], lag_ms.get(q, 0) / 1000)
    return [waiting, by_status, oldest]


async def _database_gauges(ctx: Context, bound: QueueBound) -> list[Metric]:
    """Every gauge read from the database at scrape time (a new one: one more line here)."""
    return [*await _queue_gauges(ctx, bound)]


async def exposition(ctx: Context, bound: QueueBound = UNBOUNDED) -> bytes:
    """The /metrics body: this process's (or all workers') counters, plus database gauges."""
    gauges = await _database_gauges(ctx, bound)

    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
        process_part = generate_latest(registry)
    else:
        process_part = generate_latest(REGISTRY)
    db_registry = CollectorRegistry()

    class _Gauges:
        def collect(self):  # type: ignore[no-untyped-def]
            return gauges

    db_registry.register(_Gauges())  # type: ignore[arg-type]
    return process_part + generate_latest(db_registry) + await _table_gauges(ctx)


async def _table_gauges(ctx: Context) -> bytes:
    """Dead row versions per jobq table (the statistics collector's estimate): what VACUUM,
    autovacuum's or the leader's (core/maintenance.py), has yet to reclaim. A count that only
    grows under steady churn says nothing reclaims it."""
    dead = GaugeMetricFamily("jobq_table_dead_tuples", "Dead row versions in each of jobq's "
                             "tables, not yet reclaimed by VACUUM", labels=["table"])
    for table in await maintenance.table_stats(ctx):
        dead.add_metric([table.name], table.dead)
    registry = CollectorRegistry()

    class _Tables:
        def collect(self):  # type: ignore[no-untyped-def]
            return [dead]

    registry.register(_Tables())  # type: ignore[arg-type]
    return generate_latest(registry)
