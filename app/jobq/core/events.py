"""Lifecycle events of jobs: one hook the core calls after a change has committed, feeding
the counters and one structured log line per job and event (one record per batch: jobq.logs)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from jobq.core import counters
from jobq.store.records import JobChange

log = logging.getLogger("jobq.events")


def _duration_ms(event: str, change: JobChange) -> int | None:
    """claimed: how long the job waited since visible; completed: how long it ran."""
    start: datetime | None
    end: datetime | None
    if event == "claimed":
        start, end = change.visible_at, change.claimed_at
    elif event in ("completed", "failed", "dead"):
        start, end = change.claimed_at, change.completed_at
    else:
        return None
    if start is None or end is None:
        return None
    return max(int((end - start).total_seconds() * 1000), 0)


class Events:
    def emit(self, event: str, changes: Iterable[JobChange]) -> None:
        batch = changes if isinstance(changes, list) else list(changes)
        counters.observe(event, batch)
        if not batch or not log.isEnabledFor(logging.INFO):
            return
        timed = event in _TIMED
        # One record for the whole batch; the formatters write a line per job (jobq.logs).
        log.info(event, extra={"event": event, "jobs": [
            {
                "job_id": str(c.id),
                "queue": c.queue,
                "type": c.type,
                "worker_id": c.worker_id,
                "attempt": c.attempt,
                "duration_ms": _duration_ms(event, c) if timed else None,
            }
            for c in batch
        ]})


_TIMED = frozenset({"claimed", "completed", "failed", "dead"})
