"""problem+json (RFC 9457): the one table from errors to answers, and how the OpenAPI document
declares those answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from jobq.api.hot import resolved_routes
from jobq.domain import errors as e

PROBLEM = "application/problem+json"
# RFC 6750's challenge, on every 401.
BEARER_CHALLENGE = 'Bearer realm="jobq"'
TYPE_BASE = "https://jobq.dev/problems/"

# error class -> (status, code, title)
TABLE: dict[type[e.JobqError], tuple[int, str, str]] = {
    e.NotFound: (404, "not_found", "Not found"),
    e.LeaseLost: (409, "lease_lost", "Lease lost"),
    e.InvalidState: (409, "invalid_state", "Invalid state"),
    e.IdempotencyConflict: (409, "idempotency_conflict", "Idempotency conflict"),
    e.QueueFull: (429, "queue_full", "Queue full"),
    e.Unauthorized: (401, "unauthorized", "Unauthorized"),
    e.Forbidden: (403, "forbidden", "Forbidden"),
    e.InvalidInput: (422, "validation_error", "Validation error"),
    e.Unavailable: (503, "unavailable", "Service unavailable"),
}

# Plain HTTP errors raised by Starlette itself (unknown route, wrong method, ...).
HTTP_CODES: dict[int, tuple[str, str]] = {
    400: ("validation_error", "Bad request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden", "Forbidden"),
    404: ("not_found", "Not found"),
    405: ("method_not_allowed", "Method not allowed"),
    413: ("payload_too_large", "Payload too large"),
    415: ("validation_error", "Unsupported media type"),
}


def problem(
    status: int,
    code: str,
    title: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    body = {"type": TYPE_BASE + code, "title": title, "status": status, "detail": detail,
            "code": code, **extra}
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM, headers=headers)


def _loc(loc: tuple[Any, ...] | list[Any]) -> list[str | int]:
    return [p if isinstance(p, int) else str(p) for p in loc]


def _msg(err: dict[str, Any]) -> str:
    # pydantic prefixes what our validators raise with "Value error, ": our words stand alone.
    return str(err.get("msg", "invalid")).removeprefix("Value error, ")


def validation_problem(errors: list[dict[str, Any]]) -> Response:
    items = [{"loc": _loc(err.get("loc", ())), "msg": _msg(err)} for err in errors]
    detail = "; ".join(f"{'.'.join(map(str, i['loc']))}: {i['msg']}" for i in items[:5])
    return problem(422, "validation_error", "Validation error", detail or "invalid request",
                   errors=items)


def from_error(exc: e.JobqError) -> Response:
    status, code, title = TABLE.get(type(exc), (500, "internal", "Internal error"))
    headers: dict[str, str] | None = None
    if isinstance(exc, (e.QueueFull, e.Unavailable)):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, e.Unauthorized):
        headers = {"WWW-Authenticate": BEARER_CHALLENGE}
    if isinstance(exc, e.LeaseLost) and exc.already_completed:
        return problem(status, code, title, exc.detail, already_completed=True)
    if isinstance(exc, e.InvalidInput):
        return problem(status, code, title, exc.detail,
                       errors=[{"loc": _loc(exc.loc or ["body"]), "msg": exc.detail}])
    return problem(status, code, title, exc.detail, headers=headers)


_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> str:
    """Every method the path answers to. Starlette's own Allow names only the first route
    that matched the path, and GET and POST /v1/jobs are two routes (RFC 9110: Allow lists
    the target's methods); the resolved routes include those of included routers.
    A path that some route spells out literally is that route's resource, not a value of
    another route's parameter: /v1/jobs/batch is the batch endpoint (POST), not job "batch"
    of GET /v1/jobs/{job_id}, which could only answer 404 there."""
    path = request.scope["path"]
    matching = [rc for rc in resolved_routes(request.app.router.routes)
                if rc.path_regex.match(path)]
    literal = [rc for rc in matching if "{" not in rc.path]
    methods = {m for rc in literal or matching for m in getattr(rc, "methods", None) or ()}
    return ", ".join(m for m in _METHODS if m in methods)


def install(app: FastAPI) -> None:
    async def on_jobq_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, e.JobqError)
        return from_error(exc)

    async def on_validation(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, (RequestValidationError, ValidationError))
        return validation_problem(list(exc.errors()))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's 400 is a body it could not decode at all (not UTF-8, nested past the
            # parser's recursion limit, an integer too long to read). The contract makes
            # every malformed body a 422 with ``errors``, like any other bad JSON.
            return validation_problem([{"loc": ["body"], "msg": "the body could not be read "
                                        "as JSON (not UTF-8, nested too deeply, or a number "
                                        "too long)"}])
        code, title = HTTP_CODES.get(exc.status_code, ("validation_error", "Bad request"))
        if exc.status_code >= 500:
            code, title = "unavailable", "Service unavailable"
        detail = exc.detail if isinstance(exc.detail, str) else title
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": _allowed_methods(request)}
        return problem(exc.status_code, code, title, detail, headers=headers)

    async def on_unexpected(_: Request, exc: Exception) -> Response:
        # A bug of ours. Still problem+json, and logged with its traceback by Starlette.
        return problem(500, "internal", "Internal error", "an unexpected error occurred")

    app.add_exception_handler(e.JobqError, on_jobq_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(ValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)


# ---------------------------------------------------------------------------------------------
# The OpenAPI side. Every route lists, with ``responses=answers(...)``, the error statuses it
# can answer; each is declared as problem+json with the schemas below. The property-based fuzz
# (tests/test_fuzz.py) holds the service to these declarations: an undeclared status, content
# type or header fails it.

CODES = ("validation_error", "not_found", "lease_lost", "queue_full", "idempotency_conflict",
         "invalid_state", "unauthorized", "forbidden", "payload_too_large", "method_not_allowed",
         "unavailable", "bad_request", "request_timeout")

_REF = "#/components/schemas/"

SCHEMAS: dict[str, dict[str, Any]] = {
    "Problem": {
        "title": "Problem",
        "description": "RFC 9457 problem details with our own `code`: the body of every 4xx and 5xx.",
        "type": "object",
        "required": ["type", "title", "status", "detail", "code"],
        "properties": {
            "type": {"type": "string", "description": f"`{TYPE_BASE}{{code}}`"},
            "title": {"type": "string"},
            "status": {"type": "integer", "description": "the HTTP status of the answer"},
            "detail": {"type": "string"},
            "code": {"type": "string", "enum": list(CODES)},
            "errors": {"type": "array", "items": {"$ref": _REF + "ProblemItem"},
                       "description": "`validation_error` only: each thing wrong, and where"},
            "already_completed": {
                "type": "boolean",
                "description": "`lease_lost` only, and only when true: this very lease completed "
                "the job, whose result is stored (a retried ack whose first answer was lost)"},
        },
    },
    "ProblemItem": {
        "title": "ProblemItem",
        "type": "object",
        "required": ["loc", "msg"],
        "properties": {
            "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "description": "`body`, `query` or `path`, then names and list indexes"},
            "msg": {"type": "string"},
        },
    },
}

# What each status means wherever it is answered; a route may say more (``notes``).
MEANING: dict[int, str] = {
    401: "`unauthorized`: once any access token exists, a call without a known bearer token",
    403: "`forbidden`: the token's role may not make this call, or the queue is outside its pattern",
    404: "`not_found`",
    409: "`invalid_state`",
    413: "`payload_too_large`: the body is over the size limit (default 1 MiB)",
    422: "`validation_error`: the request does not fit this document; `errors` says where",
    429: "`queue_full`, with `Retry-After` in whole seconds; nothing enqueued",
    503: "`unavailable`: the database did not answer in time; try again after `Retry-After` seconds",
}

_RETRY_AFTER = {"Retry-After": {"description": "whole seconds, at least 1", "required": True,
                                "schema": {"type": "string", "pattern": "^[0-9]+$"}}}
HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "required": True,
                               "schema": {"type": "string"}}},
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}

# Every call but the probes is behind the access tokens and reads the database.
GUARDED = (401, 403, 503)


def answers(*statuses: int, notes: Mapping[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each status as problem+json, described by ``notes`` or by
    ``MEANING``."""
    notes = notes or {}
    declared: dict[int | str, dict[str, Any]] = {}
    for status in sorted(set(statuses) | set(notes)):
        answer: dict[str, Any] = {
            "description": notes.get(status) or MEANING[status],
            "content": {PROBLEM: {"schema": {"$ref": _REF + "Problem"}}},
        }
        if status in HEADERS:
            answer["headers"] = HEADERS[status]
        declared[status] = answer
    return declared


def install_document(app: FastAPI) -> None:
    """Adds the problem schemas to the app's OpenAPI document, and takes out the 422 FastAPI
    declares on its own for every route with a parameter: that one names a body we never send
    (``HTTPValidationError``), and routes whose parameters cannot be wrong (a job id is any
    string; an unknown one is a 404) never answer 422 at all. Routes that can declare it with
    ``answers(422)``."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()  # FastAPI's, cached on the app: adjusted once, in place
            for path in document.get("paths", {}).values():
                for operation in path.values():
                    responses = operation.get("responses", {})
                    schema = responses.get("422", {}).get("content", {}).get("application/json", {})
                    if schema.get("schema", {}).get("$ref") == _REF + "HTTPValidationError":
                        del responses["422"]
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            schemas.update(SCHEMAS)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
