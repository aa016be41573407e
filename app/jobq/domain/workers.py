"""Worker processes as they report themselves (``POST /v1/workers/{worker_id}/beat``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class WorkerState(StrEnum):
    """What a worker process says it is doing."""

    RUNNING = "running"
    """Claiming and running jobs."""
    STOPPING = "stopping"
    """Told to stop: claims nothing more, finishes (or releases) what it holds."""
    STOPPED = "stopped"
    """Gone: its last beat, at exit."""


FORGET_AFTER_S = 3600
"""A worker that has not beaten for this long is forgotten (its row deleted by the duties
leader): no listing window reaches further back (``GET /v1/workers``' ``window_s`` is at
most an hour)."""


@dataclass(frozen=True, slots=True)
class Beat:
    """One beat: what the worker says of itself; None is "not said" (what it said before stays)."""

    worker_id: str
    host: str | None = None
    pid: int | None = None
    concurrency: int | None = None
    queues: list[str] | None = None
    in_flight: int | None = None
    started_at: datetime | None = None
    state: WorkerState | None = None
