"""The jobq SDK: producers, operators and workers talk to the service through this.

    from jobq.client import Client

    with Client("http://127.0.0.1:8000", token="…") as jobq:
        job = jobq.enqueue("email.welcome", {"user_id": 42}, queue="email", delay=5)
        done = jobq.wait(job.id, timeout=60)
        print(done.result)

``AsyncClient`` offers the same calls for asyncio. Errors form one tree under
``JobqError`` (drawn in ``jobq.client._exceptions``). Only httpx (with h11, which httpx
brings) and the standard library are imported, so the SDK can be installed next to any application.
"""

from jobq.client._async_client import AsyncClient
from jobq.client._base import UNSET
from jobq.client._client import Client
from jobq.client._exceptions import (
    APIError,
    Conflict,
    Forbidden,
    IdempotencyConflict,
    InvalidState,
    JobFailed,
    JobqError,
    LeaseLost,
    MethodNotAllowed,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    QueueFull,
    QueueNotEmpty,
    RateLimited,
    RetryableError,
    ServerError,
    TransportError,
    Unauthorized,
    Unavailable,
    ValidationError,
    WaitTimeout,
)
from jobq.client._models import (
    AckResult,
    Job,
    JobError,
    JobPage,
    JobRelease,
    JobStatus,
    Lease,
    NewJob,
    Queue,
    QueueCounts,
    QueuePage,
    QueueSettings,
    ReleaseResult,
    Schedule,
    ScheduleJob,
    Subscription,
    Topic,
)
from jobq.client._sql import (
    aenqueue_in_transaction,
    aenqueue_many_in_transaction,
    enqueue_in_transaction,
    enqueue_many_in_transaction,
)

__all__ = [
    "APIError",
    "AckResult",
    "AsyncClient",
    "Client",
    "Conflict",
    "Forbidden",
    "IdempotencyConflict",
    "InvalidState",
    "Job",
    "JobError",
    "JobFailed",
    "JobPage",
    "JobRelease",
    "JobStatus",
    "JobqError",
    "Lease",
    "LeaseLost",
    "MethodNotAllowed",
    "NewJob",
    "NotFound",
    "Overloaded",
    "PayloadTooLarge",
    "Queue",
    "QueueCounts",
    "QueueFull",
    "QueueNotEmpty",
    "QueuePage",
    "QueueSettings",
    "RateLimited",
    "ReleaseResult",
    "RetryableError",
    "Schedule",
    "ScheduleJob",
    "ServerError",
    "Subscription",
    "Topic",
    "TransportError",
    "UNSET",
    "Unauthorized",
    "Unavailable",
    "ValidationError",
    "WaitTimeout",
    "aenqueue_in_transaction",
    "aenqueue_many_in_transaction",
    "enqueue_in_transaction",
    "enqueue_many_in_transaction",
]
