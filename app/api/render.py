"""Rows to JSON bytes. orjson on the hot path; the standard library for what orjson refuses
(integers wider than 64 bits, which PostgreSQL's jsonb keeps)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import orjson
from starlette.responses import Response

from jobq.store.db import Row

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


def job(row: Row) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "queue": row["queue"],
        "type": row["type"],
        "payload": row["payload"],
        "priority": row["priority"],
        "status": row["status"],
        "attempt": row["attempt"],
        "max_attempts": row["max_attempts"],
        "idempotency_key": row["idempotency_key"],
        "created_at": row["created_at"],
        "visible_at": row["visible_at"],
        "locked_until": row["locked_until"],
        "worker_id": row["worker_id"],
        "completed_at": row["completed_at"],
        "last_error": row["last_error"],
        "errors": row["errors"],
        "result": row["result"],
    }
