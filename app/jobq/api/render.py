"""Domain objects to JSON bytes. orjson on the hot path; the standard library for what orjson refuses
(integers wider than 64 bits, which PostgreSQL's jsonb keeps)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import orjson
from starlette.responses import Response

from jobq.domain.jobs import Job

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


def job(j: Job) -> dict[str, Any]:
    return {
        "id": str(j.id),
        "queue": j.queue,
        "type": j.type,
        "payload": j.payload,
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
        "errors": j.errors,
        "result": j.result,
        "releases": j.releases,
    }
