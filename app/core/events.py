"""Lifecycle events of jobs: one hook the core calls, feeding logs and metrics."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger("jobq.events")


class Events:
    """Receives ``emit(event, rows)`` after the change it reports has committed."""

    def emit(self, event: str, rows: Iterable[Mapping[str, Any]]) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        for row in rows:
            log.info(
                event,
                extra={
                    "event": event,
                    "job_id": str(row.get("id")),
                    "queue": row.get("queue"),
                    "type": row.get("type"),
                    "worker_id": row.get("worker_id"),
                    "attempt": row.get("attempt"),
                },
            )
