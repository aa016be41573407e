"""Prometheus metrics. Counters and histograms live in the process (prometheus-client's
multiprocess mode joins uvicorn workers; Prometheus sums replicas). Depths and lag are read
from the database at scrape time, so every process reports the same truth."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from jobq.core.context import Context
from jobq.store.queries import Q

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                   60, 300, 900, 3600)

JOBS = Counter("jobq_jobs_total", "Job lifecycle events, by queue and event",
               ["queue", "event"])
REJECTED = Counter("jobq_enqueue_rejected_total", "Enqueues refused with 429 queue_full",
                   ["queue"])
RUN_SECONDS = Histogram("jobq_job_run_seconds", "Run time of completed jobs: claim to ack",
                        ["queue"], buckets=LATENCY_BUCKETS)
PICKUP_SECONDS = Histogram("jobq_job_pickup_seconds",
                           "Pickup latency: visible_at to claim", ["queue"],
                           buckets=LATENCY_BUCKETS)


def observe(event: str, rows: Sequence[Mapping[str, Any]]) -> None:
    # One labels() lookup per queue, not per row: it takes a lock and builds a key each time.
    histogram, start_key, end_key = _TIMED.get(event, (None, "", ""))
    counts: dict[str, int] = {}
    timers: dict[str, Any] = {}
    for row in rows:
        q = row.get("queue") or "?"
        counts[q] = counts.get(q, 0) + 1
        if histogram is None:
            continue
        start, end = row.get(start_key), row.get(end_key)
        if start and end:
            timer = timers.get(q)
            if timer is None:
                timer = timers[q] = histogram.labels(q)
            timer.observe(max((end - start).total_seconds(), 0.0))
    for q, n in counts.items():
        JOBS.labels(q, event).inc(n)


# event -> (histogram, the row's start and end times)
_TIMED: dict[str, tuple[Histogram, str, str]] = {
    "claimed": (PICKUP_SECONDS, "visible_at", "claimed_at"),
    "completed": (RUN_SECONDS, "claimed_at", "completed_at"),
}


def rejected(queue: str) -> None:
    REJECTED.labels(queue).inc()


async def exposition(ctx: Context) -> bytes:
    """The /metrics body: this process's (or all workers') counters, plus database gauges."""
    counts = await ctx.db.fetch(Q.MetricsDepths)
    lag = await ctx.db.fetch(Q.QueueOldestWaiting, {"queue": None})
    waiting = GaugeMetricFamily("jobq_waiting_jobs", "Jobs waiting (pending + failed), by queue "
                                "and type", labels=["queue", "type"])
    by_status = GaugeMetricFamily("jobq_jobs", "Jobs by queue and status",
                                  labels=["queue", "status"])
    oldest = GaugeMetricFamily("jobq_oldest_waiting_seconds", "Age of the oldest job claimable "
                               "now, from its visible_at (0 when none)", labels=["queue"])
    waiting_acc: dict[tuple[str, str], int] = {}
    status_acc: dict[tuple[str, str], int] = {}
    for r in counts:
        status_acc[(r["queue"], r["status"])] = status_acc.get((r["queue"], r["status"]), 0) + r["n"]
        if r["status"] in ("pending", "failed"):
            key = (r["queue"], r["type"])
            waiting_acc[key] = waiting_acc.get(key, 0) + r["n"]
    for (q, t), n in sorted(waiting_acc.items()):
        waiting.add_metric([q, t], n)
    for (q, s), n in sorted(status_acc.items()):
        by_status.add_metric([q, s], n)
    for r in lag:
        oldest.add_metric([r["queue"]], (r["oldest_waiting_ms"] or 0) / 1000)

    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
        process_part = generate_latest(registry)
    else:
        from prometheus_client import REGISTRY

        process_part = generate_latest(REGISTRY)
    db_registry = CollectorRegistry()

    class _Gauges:
        def collect(self):  # type: ignore[no-untyped-def]
            return [waiting, by_status, oldest]

    db_registry.register(_Gauges())  # type: ignore[arg-type]
    return process_part + generate_latest(db_registry)
