"""The SDK's one exception tree. Every error the SDK raises on purpose is a ``JobqError``.

    JobqError
    ├── TransportError            no HTTP answer: connection refused or reset, timeout, DNS
    ├── WaitTimeout               wait(): the job did not finish in time (also a TimeoutError)
    ├── JobFailed                 wait(): the job ended dead or cancelled; ``.job`` has it
    └── APIError                  the service answered 4xx/5xx; ``status``, ``code``, ``detail``
        ├── ValidationError       422 validation_error; ``errors`` lists ``{"loc", "msg"}``
        ├── Unauthorized          401 unauthorized: no token, or an unknown one
        ├── Forbidden             403 forbidden: role or queue pattern does not allow the call
        ├── NotFound              404 not_found: unknown job, lease, queue or schedule
        ├── MethodNotAllowed      405 method_not_allowed
        ├── Conflict              409
        │   ├── LeaseLost             lease_lost: the lease is no longer held; stop working
        │   ├── IdempotencyConflict   idempotency_conflict: same key, other type or payload
        │   ├── QueueNotEmpty         queue_not_empty: a queue's delete met jobs or references
        │   └── InvalidState          invalid_state: the job's status forbids the operation
        ├── PayloadTooLarge       413 payload_too_large: the body is over the size limit
        ├── RetryableError        come back later; ``retry_after`` seconds (None if not said)
        │   ├── QueueFull             429 queue_full: the queue is at its max_depth
        │   ├── RateLimited           429 queue_rate_limited, token_rate_limited: an enqueue rate
        │   ├── Overloaded            429 queue_overloaded: past the queue's soft thresholds
        │   └── Unavailable           503 unavailable: the database cannot be reached
        └── ServerError           any other 5xx (the contract promises none; proxies may)

The class is chosen from the problem+json ``code`` first and the HTTP status second, so
an answer from a proxy that is not problem+json still lands on a sensible class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobq.client._models import Job


class JobqError(Exception):
    """Root of every error the SDK raises on purpose."""


class TransportError(JobqError):
    """The request got no HTTP answer. The underlying httpx error is ``__cause__``; ``url``
    is the base URL that was tried."""

    url: str | None = None


class WaitTimeout(JobqError, TimeoutError):
    """``wait()`` gave up before the job reached a final status."""

    def __init__(self, job_id: str, timeout: float) -> None:
        super().__init__(f"job {job_id} did not finish within {timeout:g} s")
        self.job_id = job_id
        self.timeout = timeout


class JobFailed(JobqError):
    """``wait()`` saw the job end ``dead`` or ``cancelled`` instead of ``completed``."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.id} ended {job.status}: {job.last_error or 'no error text'}")
        self.job = job


class APIError(JobqError):
    """The service answered with an error status (RFC 9457 problem details in ``body``)."""

    def __init__(
        self,
        status: int,
        code: str | None = None,
        title: str | None = None,
        detail: str | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.body = body or {}
        label = f"{status} {code}" if code else str(status)
        super().__init__(f"{label}: {detail or title or 'no detail'}")


class ValidationError(APIError):
    """422: the request was malformed. ``errors`` is the service's ``[{"loc", "msg"}]``."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        errors = self.body.get("errors")
        return errors if isinstance(errors, list) else []


class Unauthorized(APIError):
    pass


class Forbidden(APIError):
    pass


class NotFound(APIError):
    pass


class MethodNotAllowed(APIError):
    pass


class Conflict(APIError):
    pass


class LeaseLost(Conflict):
    """``already_completed``: this very lease completed the job and its result is stored (an
    ack retried after its answer was lost); false when the lease was lost to an expiry, a
    cancel or another worker."""

    @property
    def already_completed(self) -> bool:
        return self.body.get("already_completed") is True


class IdempotencyConflict(Conflict):
    pass


class InvalidState(Conflict):
    pass


class QueueNotEmpty(Conflict):
    """A queue's delete was refused. ``counts``: its jobs that block it, by status (nonzero
    only); ``schedules`` and ``topics``: the schedules and topic subscriptions naming it."""

    @property
    def counts(self) -> dict[str, int]:
        counts = self.body.get("counts")
        return counts if isinstance(counts, dict) else {}

    @property
    def schedules(self) -> list[str]:
        names = self.body.get("schedules")
        return names if isinstance(names, list) else []

    @property
    def topics(self) -> list[str]:
        names = self.body.get("topics")
        return names if isinstance(names, list) else []


class PayloadTooLarge(APIError):
    pass


class RetryableError(APIError):
    """The service asks the caller to come back later.

    ``retry_after`` is how long to wait, in seconds: the body's ``retry_after_ms`` when the
    service sent one (to the millisecond), else the ``Retry-After`` header (whole seconds),
    or None when neither was sent.
    """

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class QueueFull(RetryableError):
    pass


class RateLimited(RetryableError):
    """An enqueue rate (the queue's, or the token's: ``code`` says which) holds fewer jobs
    than the request brought; nothing was enqueued. ``retry_after``: when it holds them all."""


class Overloaded(RetryableError):
    """The queue is past its soft thresholds and this enqueue fell in the share refused to
    slow producers down; nothing was enqueued."""


class Unavailable(RetryableError):
    pass


class ServerError(APIError):
    pass


_BY_CODE: dict[str, type[APIError]] = {
    "validation_error": ValidationError,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "lease_lost": LeaseLost,
    "idempotency_conflict": IdempotencyConflict,
    "invalid_state": InvalidState,
    "queue_not_empty": QueueNotEmpty,
    "payload_too_large": PayloadTooLarge,
    "queue_full": QueueFull,
    "queue_rate_limited": RateLimited,
    "token_rate_limited": RateLimited,
    "queue_overloaded": Overloaded,
    "unavailable": Unavailable,
    # A long-poll past the service's cap of waiting claims: come back after Retry-After.
    "too_many_long_polls": Unavailable,
}

_BY_STATUS: dict[int, type[APIError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationError,
    # A 429 without our code (a proxy's rate limit, say) is still "come back later".
    429: RetryableError,
    503: Unavailable,
}


def error_class(status: int, code: str | None) -> type[APIError]:
    """The class for an error answer: by ``code`` when known, else by status."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else APIError
