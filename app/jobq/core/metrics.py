"""The /metrics scrape: the process's counters (``core.counters``) and gauges of depth and lag,
read from the database at scrape time so that every process reports the same truth."""

from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from jobq.core import maintenance
from jobq.core.context import Context
from jobq.domain.jobs import JobStatus
from jobq.store import records
from jobq.store.queries import Q


async def exposition(ctx: Context) -> bytes:
    """The /metrics body: this process's (or all workers') counters, plus database gauges."""
    counts = [records.job_count(r) for r in await ctx.db.fetch(Q.MetricsDepths)]
    lag = [records.queue_lag(r) for r in await ctx.db.fetch(Q.QueueOldestWaiting, {"queue": None})]
    waiting = GaugeMetricFamily("jobq_waiting_jobs", "Jobs waiting (pending + failed), by queue "
                                "and type", labels=["queue", "type"])
    by_status = GaugeMetricFamily("jobq_jobs", "Jobs by queue and status",
                                  labels=["queue", "status"])
    oldest = GaugeMetricFamily("jobq_oldest_waiting_seconds", "Age of the oldest job claimable "
                               "now, from its visible_at (0 when none)", labels=["queue"])
    waiting_acc: dict[tuple[str, str], int] = {}
    status_acc: dict[tuple[str, str], int] = {}
    for c in counts:
        status_acc[(c.queue, c.status)] = status_acc.get((c.queue, c.status), 0) + c.n
        if c.status in ("pending", "failed"):
            key = (c.queue, c.type)
            waiting_acc[key] = waiting_acc.get(key, 0) + c.n
    # A series that drops to zero is reported as 0, not left out: a vanished series reads as
    # "no data" (and ``sum by (queue)`` as nothing) rather than as an empty queue. The grid is
    # every known queue (``lag`` lists the queues table) by every status, and every
    # (queue, type) that still has a job in any status for the waiting count.
    queues = {r.queue for r in lag} | {q for q, _ in status_acc}
    for c in counts:
        waiting_acc.setdefault((c.queue, c.type), 0)
    for q in queues:
        for status in JobStatus:
            status_acc.setdefault((q, status.value), 0)
    for (q, t), n in sorted(waiting_acc.items()):
        waiting.add_metric([q, t], n)
    for (q, s), n in sorted(status_acc.items()):
        by_status.add_metric([q, s], n)
    for r in lag:
        oldest.add_metric([r.queue], (r.oldest_waiting_ms or 0) / 1000)

    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
        process_part = generate_latest(registry)
    else:
        process_part = generate_latest(REGISTRY)
    db_registry = CollectorRegistry()

    class _Gauges:
        def collect(self):  # type: ignore[no-untyped-def]
            return [waiting, by_status, oldest]

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
