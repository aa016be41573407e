"""Lifecycle events of jobs: one hook the core calls after a change has committed, feeding
the counters and one structured log line per job and event (one record per batch: jobq.logs)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from jobq.core import counters

log = logging.getLogger("jobq.events")


def _duration_ms(event: str, row: Mapping[str, Any]) -> int | None:
    """claimed: how long the job waited since visible; completed: how long it ran."""
    start: datetime | None
    end: datetime | None
    if event == "claimed":
        start, end = row.get("visible_at"), row.get("claimed_at")
    elif event in ("completed", "failed", "dead"):
        start, end = row.get("claimed_at"), row.get("completed_at")
    else:
        return None
    if start is None or end is None:
        return None
    return max(int((end - start).total_seconds() * 1000), 0)


class Events:
    def emit(self, event: str, rows: Iterable[Mapping[str, Any]]) -> None:
        batch = rows if isinstance(rows, list) else list(rows)
        counters.observe(event, batch)
        if not batch or not log.isEnabledFor(logging.INFO):
            return
        timed = event in _TIMED
        # One record for the whole batch; the formatters write a line per job (jobq.logs).
        log.info(event, extra={"event": event, "jobs": [
            {
                "job_id": str(row.get("id")),
                "queue": row.get("queue"),
                "type": row.get("type"),
                "worker_id": row.get("worker_id"),
                "attempt": row.get("attempt"),
                "duration_ms": _duration_ms(event, row) if timed else None,
            }
            for row in batch
        ]})


_TIMED = frozenset({"claimed", "completed", "failed", "dead"})
