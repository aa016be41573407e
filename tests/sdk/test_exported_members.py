"""Pin the public surface: adding or removing a name is a visible, reviewed change."""

from __future__ import annotations

import json
import subprocess
import sys

import jobq
import jobq.client
import jobq.worker

CLIENT_API = [
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

WORKER_API = ["Discard", "Handler", "Retry", "Worker", "load_handlers", "run_worker"]


# `from jobq import ...`: the SDK's names and the version, nothing of the server.
TOP_LEVEL_API = sorted([*CLIENT_API, *WORKER_API, "__version__"])


def public_names(module: object) -> list[str]:
    return sorted(name for name in vars(module) if not name.startswith("_"))


def test_client_all_is_pinned() -> None:
    assert sorted(jobq.client.__all__) == CLIENT_API


def test_worker_all_is_pinned() -> None:
    assert sorted(jobq.worker.__all__) == WORKER_API


def test_top_level_all_is_pinned() -> None:
    assert sorted(jobq.__all__) == TOP_LEVEL_API


def test_from_jobq_import_gives_the_sdk_s_objects() -> None:
    from jobq import AsyncClient, Client, Discard, Retry, Worker

    assert (Client, AsyncClient) == (jobq.client.Client, jobq.client.AsyncClient)
    assert (Worker, Retry, Discard) == (jobq.worker.Worker, jobq.worker.Retry, jobq.worker.Discard)
    star: dict[str, object] = {}
    exec("from jobq import *", star)
    assert sorted(k for k in star if k != "__builtins__") == TOP_LEVEL_API
    for name in jobq.client.__all__:
        assert getattr(jobq, name) is getattr(jobq.client, name)
    for name in jobq.worker.__all__:
        assert getattr(jobq, name) is getattr(jobq.worker, name)
    assert isinstance(jobq.__version__, str)


def test_everything_in_all_exists_and_nothing_else_is_public() -> None:
    for module in (jobq.client, jobq.worker):
        for name in module.__all__:
            assert getattr(module, name) is not None
        # Implementation lives in private _modules; the package shows only __all__.
        assert public_names(module) == sorted(module.__all__)


def test_every_error_descends_from_jobq_error() -> None:
    for name in jobq.client.__all__:
        obj = getattr(jobq.client, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, jobq.client.JobqError), name


def test_sdk_and_worker_import_nothing_from_the_server() -> None:
    # A fresh interpreter, so modules other tests imported do not count.
    code = (
        "import json, sys, jobq, jobq.client, jobq.worker; "
        "print(json.dumps(sorted(m.split('.')[0] if not m.startswith('jobq.') else m "
        "for m in sys.modules)))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(run.stdout))
    ours = {m for m in loaded if m.startswith("jobq.")}
    # jobq.limits: the contract's numbers, standard library only, shared with the server.
    assert all(m.startswith(("jobq.client", "jobq.worker")) or m == "jobq.limits" for m in ours), ours
    assert not loaded & {"fastapi", "sqlalchemy", "psycopg", "pydantic", "alembic"}
