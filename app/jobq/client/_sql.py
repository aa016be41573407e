"""Enqueue inside the caller's own database transaction, through the SQL functions that the
migrations install (``jobq.enqueue_many(jsonb)``): the job exists if and only if the caller's
transaction commits.

The connection is the caller's and is used as it is: a psycopg 3 ``Connection`` or
``AsyncConnection``, any DB-API connection with ``%s`` parameters (psycopg2), or a SQLAlchemy
``Connection``/``Session`` (sync or async). Nothing here commits, rolls back or imports a
driver: SQLAlchemy's ``text`` is imported only when a SQLAlchemy object is passed.

The body sent is the one ``Client.enqueue_many`` posts (``_base.job_body``), so the two
validate alike; errors raised by the functions become the HTTP client's exceptions. After
one, the transaction is aborted, as after any failed statement: roll back (or use a
savepoint) before going on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from jobq.client import _base as b
from jobq.client._exceptions import APIError, IdempotencyConflict, QueueFull, ValidationError
from jobq.client._models import NewJob

# One statement for both forms: the single form is a batch of one.
_SQL_DBAPI = "SELECT jobq.enqueue_many(%s::jsonb)"
_SQL_ALCHEMY = "SELECT jobq.enqueue_many(CAST(:jobs AS jsonb))"

# The SQLSTATEs the functions raise (documented in the README), as the API's problem codes.
_BY_SQLSTATE: dict[str, tuple[type[APIError], int, str]] = {
    "JQ422": (ValidationError, 422, "validation_error"),
    "JQ409": (IdempotencyConflict, 409, "idempotency_conflict"),
    "JQ429": (QueueFull, 429, "queue_full"),
}


def enqueue_in_transaction(
    conn: Any,
    type: str,  # noqa: A002 - the name the rest of the SDK uses
    payload: Mapping[str, Any] | None = None,
    *,
    queue: str | None = None,
    priority: int | None = None,
    delay: b.Duration | None = None,
    run_at: datetime | None = None,
    max_attempts: int | None = None,
    idempotency_key: str | None = None,
) -> str:
    """Enqueue one job on ``conn``, in its current transaction; returns the job id. The job
    becomes visible to workers when that transaction commits, and never if it rolls back.
    Arguments mean what ``Client.enqueue``'s mean."""
    job = _one(type, payload, queue, priority, delay, run_at, max_attempts, idempotency_key)
    try:
        return enqueue_many_in_transaction(conn, [job])[0]
    except APIError as exc:
        raise _unbatched(exc) from exc.__cause__


def enqueue_many_in_transaction(conn: Any, jobs: Iterable[NewJob]) -> list[str]:
    """Enqueue up to 1000 jobs on ``conn``, all or nothing; ids in the order given (a repeated
    idempotency key answers the existing job's id)."""
    body = _body(jobs)
    try:
        if _is_sqlalchemy(conn):
            from sqlalchemy import text

            ids = conn.execute(text(_SQL_ALCHEMY), {"jobs": body}).scalar_one()
        else:
            with conn.cursor() as cur:
                cur.execute(_SQL_DBAPI, (body,))
                ids = cur.fetchone()[0]
    except Exception as exc:
        _raise_mapped(exc)
        raise
    return [str(i) for i in ids]


async def aenqueue_in_transaction(
    conn: Any,
    type: str,  # noqa: A002
    payload: Mapping[str, Any] | None = None,
    *,
    queue: str | None = None,
    priority: int | None = None,
    delay: b.Duration | None = None,
    run_at: datetime | None = None,
    max_attempts: int | None = None,
    idempotency_key: str | None = None,
) -> str:
    """``enqueue_in_transaction`` for a psycopg ``AsyncConnection`` or a SQLAlchemy
    ``AsyncConnection``/``AsyncSession``."""
    job = _one(type, payload, queue, priority, delay, run_at, max_attempts, idempotency_key)
    try:
        return (await aenqueue_many_in_transaction(conn, [job]))[0]
    except APIError as exc:
        raise _unbatched(exc) from exc.__cause__


async def aenqueue_many_in_transaction(conn: Any, jobs: Iterable[NewJob]) -> list[str]:
    """``enqueue_many_in_transaction`` for asyncio connections."""
    body = _body(jobs)
    try:
        if _is_sqlalchemy(conn):
            from sqlalchemy import text

            ids = (await conn.execute(text(_SQL_ALCHEMY), {"jobs": body})).scalar_one()
        else:
            async with conn.cursor() as cur:
                await cur.execute(_SQL_DBAPI, (body,))
                ids = (await cur.fetchone())[0]
    except Exception as exc:
        _raise_mapped(exc)
        raise
    return [str(i) for i in ids]


def _one(
    type_: str,
    payload: Mapping[str, Any] | None,
    queue: str | None,
    priority: int | None,
    delay: b.Duration | None,
    run_at: datetime | None,
    max_attempts: int | None,
    idempotency_key: str | None,
) -> NewJob:
    return NewJob(
        type=type_,
        payload=b.as_payload(payload),
        queue=queue,
        priority=priority,
        delay=delay,
        run_at=run_at,
        max_attempts=max_attempts,
        idempotency_key=idempotency_key,
    )


def _body(jobs: Iterable[NewJob]) -> str:
    return b.encode([b.job_body(j) for j in jobs]).decode()


def _is_sqlalchemy(conn: Any) -> bool:
    return any(k.__module__.startswith("sqlalchemy.") for k in type(conn).__mro__)


def _sqlstate(exc: BaseException) -> tuple[str | None, str]:
    """The SQLSTATE and primary message of a driver's error, whichever driver raised it
    (SQLAlchemy wraps it as ``.orig``; psycopg 3 says ``sqlstate``, psycopg2 ``pgcode``)."""
    orig = getattr(exc, "orig", None) or exc
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    diag = getattr(orig, "diag", None)
    message = getattr(diag, "message_primary", None) or getattr(orig, "message", None)
    if not isinstance(message, str):
        message = str(orig).splitlines()[0] if str(orig) else ""
    return (state if isinstance(state, str) else None), message


def _raise_mapped(exc: Exception) -> None:
    state, message = _sqlstate(exc)
    if state not in _BY_SQLSTATE:
        return
    cls, status, code = _BY_SQLSTATE[state]
    body: dict[str, Any] = {"status": status, "code": code, "detail": message}
    if cls is ValidationError:
        loc, _, msg = message.partition(": ")
        body["errors"] = [{"loc": ["body", *_loc(loc)], "msg": msg or message}]
    raise cls(status, code, None, message, body) from exc


def _loc(text: str) -> list[str | int]:
    """``jobs[3].queue`` -> ``["jobs", 3, "queue"]``, as the API's validation errors say."""
    out: list[str | int] = []
    for part in text.split("."):
        name, _, index = part.partition("[")
        if name:
            out.append(name)
        if index.rstrip("]").isdigit():
            out.append(int(index.rstrip("]")))
    return out


def _unbatched(exc: APIError) -> APIError:
    """The single form's error without the batch's ``jobs[0].`` prefix."""
    detail = (exc.detail or "").removeprefix("jobs[0].")
    body = dict(exc.body, detail=detail)
    if "errors" in body:
        body["errors"] = [
            {**e, "loc": ["body", *e["loc"][3:]]} if e["loc"][1:3] == ["jobs", 0] else e for e in body["errors"]
        ]
    return type(exc)(exc.status, exc.code, exc.title, detail, body)


__all__ = [
    "aenqueue_in_transaction",
    "aenqueue_many_in_transaction",
    "enqueue_in_transaction",
    "enqueue_many_in_transaction",
]
