"""The one exception tree of the service. The API maps each class to problem+json in one table.

    JobqError
    ├── NotFound             job, lease or queue that does not exist
    ├── LeaseLost            the lease is no longer held (expired and reclaimed, acked, cancelled)
    ├── InvalidState         the job's status does not allow the operation
    ├── IdempotencyConflict  same key in the queue, different type or payload
    ├── QueueNotEmpty        a queue's delete met jobs, schedules or topic subscriptions
    ├── QueueFull            the queue is at its max_depth
    ├── Throttled            a rate limit or backpressure refused an enqueue; come back later
    │   ├── QueueRateLimited     the queue's enqueue_rate
    │   ├── TokenRateLimited     the access token's enqueue_rate
    │   └── QueueOverloaded      the queue is past soft_depth or soft_lag_ms
    ├── Unauthorized         no token, or an unknown one
    ├── Forbidden            the token's role or queue pattern does not allow the call
    ├── InvalidInput         input that passed the schema but is still wrong (cron, timezone)
    └── Unavailable          the database cannot be reached, or no descriptor is left
        └── TooManyLongPolls a long-poll past the process's cap (nothing found to claim)
"""

from __future__ import annotations


class JobqError(Exception):
    """Root of every error the service raises on purpose."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(JobqError):
    pass


class LeaseLost(JobqError):
    """``already_completed``: the job was completed under this very lease, so its result is
    stored: a retried ack whose first answer was lost, not work lost to someone else."""

    def __init__(self, detail: str, already_completed: bool = False) -> None:
        super().__init__(detail)
        self.already_completed = already_completed


class InvalidState(JobqError):
    pass


class IdempotencyConflict(JobqError):
    pass


class QueueNotEmpty(JobqError):
    """A queue's delete was refused: ``counts`` are its jobs that block it, by status
    (nonzero only: pending, running, failed, dead), ``schedules`` and ``topics`` the schedules
    whose job targets it and the topics subscribed to it."""

    def __init__(self, detail: str, counts: dict[str, int], schedules: list[str],
                 topics: list[str]) -> None:
        super().__init__(detail)
        self.counts = counts
        self.schedules = schedules
        self.topics = topics


class QueueFull(JobqError):
    def __init__(self, detail: str, retry_after_s: int = 1) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class Throttled(JobqError):
    """An enqueue refused by a rate or by backpressure: nothing was enqueued, and sending it
    again after ``retry_after_ms`` is expected to be accepted (for a rate: it will be, unless
    others take the tokens first)."""

    def __init__(self, detail: str, retry_after_ms: int) -> None:
        super().__init__(detail)
        self.retry_after_ms = retry_after_ms


class QueueRateLimited(Throttled):
    pass


class TokenRateLimited(Throttled):
    pass


class QueueOverloaded(Throttled):
    pass


class Unauthorized(JobqError):
    """``invalid_token``: a token was presented and is not (or no longer) valid, as opposed
    to none at all; the answer's ``WWW-Authenticate`` says so (RFC 6750)."""

    def __init__(self, detail: str, invalid_token: bool = False) -> None:
        super().__init__(detail)
        self.invalid_token = invalid_token


class Forbidden(JobqError):
    pass


class InvalidInput(JobqError):
    def __init__(self, detail: str, loc: list[str | int] | None = None) -> None:
        super().__init__(detail)
        self.loc = loc or []


class Unavailable(JobqError):
    def __init__(self, detail: str = "the database is unreachable", retry_after_s: int = 1) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class TooManyLongPolls(Unavailable):
    """A claim asked to wait while the process already holds its cap of waiting claims
    (``JOBQ_MAX_LONG_POLLS``), and found nothing to claim at once."""
