"""The in-process Prometheus counters and histograms that job events feed.

They live in the process (prometheus-client's multiprocess mode joins uvicorn workers;
Prometheus sums replicas). Reading them out, with the database's gauges, is ``core.metrics``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from jobq.store.records import JobChange

# No `*_created` twin of every counter and histogram (the Unix time each series began): it
# doubles the lines /metrics prints, and Prometheus' own rate() does not need it.
disable_created_metrics()

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                   60, 300, 900, 3600)

JOBS = Counter("jobq_jobs_total", "Job lifecycle events, by queue and event",
               ["queue", "event"])
REJECTED = Counter("jobq_enqueue_rejected_total", "Enqueues refused with 429 queue_full",
                   ["queue"])
RUN_SECONDS = Histogram("jobq_job_run_seconds", "Run time of completed jobs: claim to ack",
                        ["queue"], buckets=LATENCY_BUCKETS)
# The codes of enqueues refused by a rate limit or backpressure (jobq.api.problems).
LIMITED_CODES = ("queue_rate_limited", "token_rate_limited", "queue_overloaded")
RATE_HELD = Counter("jobq_rate_limited_jobs_total", "Claimable jobs that claims asked for and "
                    "their queue's rate_limit held back (counted per claim)", ["queue"])
ENQUEUE_LIMITED = Counter("jobq_enqueue_limited_total", "Enqueue requests refused with 429 "
                          "by a rate limit or backpressure, by queue and code "
                          "(queue_rate_limited, token_rate_limited, queue_overloaded)",
                          ["queue", "code"])
PICKUP_SECONDS = Histogram("jobq_job_pickup_seconds",
                           "Pickup latency: visible_at to claim", ["queue"],
                           buckets=LATENCY_BUCKETS)

SCHEDULE_FIRES = Counter("jobq_schedule_fires_total", "Jobs enqueued by a schedule's fires "
                         "(a catch-up run counts once)", ["schedule"])
SCHEDULE_MISFIRES = Counter("jobq_schedule_misfires_total", "Fire times a schedule missed "
                            "(service down, or a queue full): skipped, or folded into one "
                            "catch-up run", ["schedule"])
# The most recent value across processes: each fire happens in one process only.
SCHEDULE_LAG = Gauge("jobq_schedule_last_fire_lag_seconds", "How late the last fire's job was "
                     "enqueued after its fire time", ["schedule"], multiprocess_mode="mostrecent")


TOPIC_PUBLISHES = Counter("jobq_topic_publishes_total", "Publishes that committed, to a topic "
                          "with subscriptions (each enqueues one job per subscribed queue; "
                          "replays count too)", ["topic"])


def topic_published(topic: str) -> None:
    TOPIC_PUBLISHES.labels(topic).inc()


def schedule_fired(schedule: str, lag_s: float) -> None:
    SCHEDULE_FIRES.labels(schedule).inc()
    SCHEDULE_LAG.labels(schedule).set(max(lag_s, 0.0))


def schedule_missed(schedule: str, n: int) -> None:
    if n > 0:
        SCHEDULE_MISFIRES.labels(schedule).inc(n)


# Every event a job's change is counted under (core.events' callers emit no other; a test
# holds them to this list). A queue's series of each start at 0 when this process first sees
# the queue: Prometheus' increase() and rate() count from a series' first sample, so one born
# at its first increment, or at 200 after a burst, reads as no increase at all.
EVENTS = ("enqueued", "claimed", "completed", "failed", "dead", "lease_expired", "released",
          "cancelled", "retried", "replayed", "purged", "deleted")


def observe(event: str, changes: Sequence[JobChange]) -> None:
    # Label children are looked up in our own dicts: ``labels()`` takes a lock and builds
    # its key on every call, and runs for every request.
    histogram, times = _TIMED.get(event, (None, _NO_TIMES))
    if len(changes) == 1:  # single mode: no per-queue tally to build
        change = changes[0]
        q = change.queue or "?"
        _job_counter(q, event).inc()
        if histogram is not None:
            start, end = times(change)
            if start and end:
                _timer(histogram, q).observe(max((end - start).total_seconds(), 0.0))
        return
    counts: dict[str, int] = {}
    if histogram is None:
        for change in changes:
            q = change.queue or "?"
            counts[q] = counts.get(q, 0) + 1
    else:
        # Each job's time is observed on its own (a histogram takes no batch), in the order
        # the jobs came; the queue's child and its observe are looked up once per batch.
        observers: dict[str, Callable[[float], None]] = {}
        for change in changes:
            q = change.queue or "?"
            observe_one = observers.get(q)
            if observe_one is None:
                observe_one = observers[q] = _timer(histogram, q).observe
                counts[q] = 1
            else:
                counts[q] += 1
            start, end = times(change)
            if start and end:
                seconds = (end - start).total_seconds()
                observe_one(seconds if seconds > 0.0 else 0.0)
    for q, n in counts.items():
        _job_counter(q, event).inc(n)


# The label of the queues whose counts are not shown one by one. No queue can be called that
# (a name starts with a letter or digit). /metrics' gauges use it too (core.metrics).
OTHER = "_other"


class _QueueLabels:
    """The ``queue`` label a count goes under: the queue's own name for the first ``limit``
    queues (matching ``pattern``, a regular expression) this process counts anything for,
    ``_other`` for the rest. Sticky until the process ends: a counter's series may not move
    from one label to another, or ``rate()`` would read the move as a reset. Unbounded, every
    queue active on one process added ~50 series (events, two histograms of 20 lines)."""

    def __init__(self, limit: int, pattern: str | None) -> None:
        self.limit = limit
        self.match = re.compile(pattern).match if pattern is not None else None
        self.own: set[str] = set()

    def __call__(self, queue: str) -> str:
        if queue in self.own:
            return queue
        if len(self.own) < self.limit and (self.match is None or self.match(queue)):
            self.own.add(queue)
            return queue
        return OTHER


_label = _QueueLabels(2**31 - 1, None)
_JOB_COUNTERS: dict[tuple[str, str], Any] = {}
_TIMERS: dict[tuple[Histogram, str], Any] = {}
_STARTED: set[str] = set()  # queues whose series exist in this process (start_queues)


def start_queues(queues: Iterable[str]) -> None:
    """Make every series by queue of these queues exist, at 0 where nothing was counted yet:
    each event's ``jobq_jobs_total``, ``jobq_enqueue_rejected_total``, the rate limits'
    counters and both histograms.
    Called for a queue's first count in this process, and by /metrics for every queue it
    shows (so a queue made by a settings call, or first used on another replica, has its
    zeros scraped before its first job here)."""
    for queue in queues:
        if queue in _STARTED:
            continue
        _STARTED.add(queue)
        for event in EVENTS:
            _job_counter(queue, event)
        for histogram in (RUN_SECONDS, PICKUP_SECONDS):
            _timer(histogram, queue)
        REJECTED.labels(_label(queue))
        RATE_HELD.labels(_label(queue))
        for code in LIMITED_CODES:
            ENQUEUE_LIMITED.labels(_label(queue), code)


def bound_queues(limit: int, pattern: str | None) -> None:
    """Give at most ``limit`` queues (of those matching ``pattern``) series of their own in
    this process's counters and histograms (JOBQ_METRICS_QUEUES, JOBQ_METRICS_QUEUE_PATTERN)."""
    global _label
    _label = _QueueLabels(limit, pattern)
    _JOB_COUNTERS.clear()
    _TIMERS.clear()
    _STARTED.clear()


def _job_counter(queue: str, event: str) -> Any:
    child = _JOB_COUNTERS.get((queue, event))
    if child is None:
        child = _JOB_COUNTERS[(queue, event)] = JOBS.labels(_label(queue), event)
        start_queues((queue,))  # the queue's first count here: its other series, at 0
    return child


def _timer(histogram: Histogram, queue: str) -> Any:
    child = _TIMERS.get((histogram, queue))
    if child is None:
        child = _TIMERS[(histogram, queue)] = histogram.labels(_label(queue))
    return child


Times = Callable[[JobChange], tuple[datetime | None, datetime | None]]


def _no_times(change: JobChange) -> tuple[datetime | None, datetime | None]:
    return None, None


_NO_TIMES: Times = _no_times

# event -> (histogram, the change's start and end times)
_TIMED: dict[str, tuple[Histogram, Times]] = {
    "claimed": (PICKUP_SECONDS, lambda c: (c.visible_at, c.claimed_at)),
    "completed": (RUN_SECONDS, lambda c: (c.claimed_at, c.completed_at)),
}


def rejected(queue: str) -> None:
    start_queues((queue,))
    REJECTED.labels(_label(queue)).inc()


def rate_held(queue: str, n: int) -> None:
    start_queues((queue,))
    RATE_HELD.labels(_label(queue)).inc(n)


def enqueue_limited(queue: str, code: str) -> None:
    start_queues((queue,))
    ENQUEUE_LIMITED.labels(_label(queue), code).inc()


def forget_queue(queue: str) -> None:
    """A deleted queue's series leave this process's /metrics, and its label is freed for
    another queue under JOBQ_METRICS_QUEUES. Other replicas keep theirs until they restart,
    as do uvicorn workers in multiprocess mode (prometheus-client cannot remove a series
    from its files)."""
    _STARTED.discard(queue)  # made again, it starts its series at 0 again
    events = [event for q, event in _JOB_COUNTERS if q == queue]
    for event in events:
        del _JOB_COUNTERS[(queue, event)]
    for key in [k for k in _TIMERS if k[1] == queue]:
        del _TIMERS[key]
    if queue not in _label.own:
        return  # counted under _other, which other queues share
    _label.own.discard(queue)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    for event in events:
        JOBS.remove(queue, event)
    for metric in (REJECTED, RATE_HELD, RUN_SECONDS, PICKUP_SECONDS):
        metric.remove(queue)
    for code in LIMITED_CODES:
        ENQUEUE_LIMITED.remove(queue, code)
