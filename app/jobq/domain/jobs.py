"""Jobs: statuses, what producers and workers ask for, and the limits of one request."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

# Re-exported (the "as" form): the contract's limits live in jobq.limits, shared with the SDK.
from jobq.limits import MAX_BATCH as MAX_BATCH
from jobq.limits import MAX_WAIT_MS as MAX_WAIT_MS


class JobStatus(StrEnum):
    """Where a job is in its life. Stored as text in ``jobs.status``."""

    PENDING = "pending"
    """Waiting: new, delayed (``visible_at`` in the future) or released after a lease expiry."""
    RUNNING = "running"
    """Leased to a worker until ``locked_until``."""
    FAILED = "failed"
    """An attempt failed; a retry is scheduled at ``visible_at``."""
    COMPLETED = "completed"
    """Acked by a worker. Final."""
    DEAD = "dead"
    """In the dead-letter queue: retries exhausted, non-retryable, or a poison pill."""
    CANCELLED = "cancelled"
    """Cancelled by an operator. Final unless retried."""


DEFAULT_QUEUE = "default"

MAX_LIST_LIMIT = 1000
DEFAULT_LIST_LIMIT = 100

SEARCH_SCAN = 5000
"""How many jobs one page of a search (``GET /v1/jobs?search=``) examines at most: the newest
the other filters select, after the cursor. No index finds a substring of a payload, so a
search scans, and this caps the cost of a page (a page may then hold fewer matches than its
limit, even none, with a cursor to go on). 5,000 payloads of a few kilobytes are tens of
milliseconds of work."""
MAX_SEARCH_LENGTH = 200

RESERVED_KEY_PREFIXES = ("topic:", "schedule:")
"""Idempotency keys the service gives the jobs it enqueues itself: a topic publish's
``topic:{topic}/{key}`` (core/topics.py) and a schedule fire's ``schedule:{name}:{time}``
(domain/schedules.py). Keys are unique per queue, so a producer who sent such a key first
would own it: the later publish or fire would meet a conflict, or be answered with the
producer's job as its own. Producers' keys may therefore not start with these."""


@dataclass(frozen=True, slots=True)
class Job:
    """A job as core hands it to the API: what a job's JSON shows, nothing else."""

    id: int
    queue: str
    type: str
    payload: dict[str, Any]
    priority: int
    status: JobStatus
    attempt: int
    max_attempts: int
    idempotency_key: str | None
    created_at: datetime
    visible_at: datetime
    locked_until: datetime | None
    worker_id: str | None
    completed_at: datetime | None
    last_error: str | None
    errors: list[dict[str, Any]]
    """One entry per failed attempt or lease expiry: attempt, at, error, kind."""
    result: Any
    releases: list[dict[str, Any]]
    """The claims given back by a release, oldest first, the 20 most recent: attempt, at,
    worker_id, delay_ms. A released claim is not an attempt spent, nor an error."""


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job as a producer asks for it, validated by the API."""

    type: str
    payload: dict[str, Any]
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    delay_ms: int | None = None
    run_at: datetime | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    worker_id: str
    queues: list[str]
    types: list[str] | None = None
    limit: int = 1
    lease_ms: int | None = None
    wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class Failure:
    error: str
    retry: bool = True
    retry_in_ms: int | None = None
