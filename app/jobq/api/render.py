"""Domain objects to JSON bytes. orjson on the hot path; the standard library for what orjson refuses
(integers wider than 64 bits, which PostgreSQL's jsonb keeps)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import orjson
from starlette.responses import Response

_OPTS = orjson.OPT_UTC_Z


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"cannot render {type(value).__name__}")


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=_OPTS)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, default=_default, separators=(",", ":")).encode()


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json",
                    headers=headers)


class JobFields(Protocol):
    """What ``job`` reads: a ``Job``, or a claim's ``LeasedJob`` (jsonb columns as text)."""

    @property
    def id(self) -> int: ...
    @property
    def queue(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def payload(self) -> Any: ...
    @property
    def priority(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def idempotency_key(self) -> str | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def visible_at(self) -> datetime: ...
    @property
    def locked_until(self) -> datetime | None: ...
    @property
    def worker_id(self) -> str | None: ...
    @property
    def completed_at(self) -> datetime | None: ...
    @property
    def last_error(self) -> str | None: ...
    @property
    def errors(self) -> Any: ...
    @property
    def result(self) -> Any: ...
    @property
    def releases(self) -> Any: ...


def _as_is(value: Any) -> Any:
    return value


def as_text(value: str | None) -> Any:
    """A jsonb column's text as PostgreSQL wrote it, written into the answer as it is."""
    return None if value is None else orjson.Fragment(value)


def job(j: JobFields, json_column: Callable[[Any], Any] = _as_is) -> dict[str, Any]:
    """A job as the API writes it; ``json_column=as_text`` for a claim's ``LeasedJob``, whose
    jsonb columns are text."""
    return {
        "id": str(j.id),
        "queue": j.queue,
        "type": j.type,
        "payload": json_column(j.payload),
        "priority": j.priority,
        "status": j.status,
        "attempt": j.attempt,
        "max_attempts": j.max_attempts,
        "idempotency_key": j.idempotency_key,
        "created_at": j.created_at,
        "visible_at": j.visible_at,
        "locked_until": j.locked_until,
        "worker_id": j.worker_id,
        "completed_at": j.completed_at,
        "last_error": j.last_error,
        "errors": json_column(j.errors),
        "result": json_column(j.result),
        "releases": json_column(j.releases),
    }
