"""problem+json (RFC 9457): the one table from errors to answers, at run time. How the OpenAPI
document declares those answers is jobq.api.document's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from jobq.api.resolved import resolved_routes
from jobq.descriptors import exhausted
from jobq.domain import errors as e
from jobq.domain.rates import retry_after_s

PROBLEM = "application/problem+json"
# RFC 6750's challenge, on every 401.
BEARER_CHALLENGE = 'Bearer realm="jobq"'
# Every answer's ``type`` is this service's own page about its code, ``GET /problems/{code}``
# (routes/problem_pages.py), as a relative URI reference (RFC 9457 3.1.1 allows one; it
# resolves against the request's URL, so it names the replica, host and port the client
# already talks to, without trusting a Host header to build an absolute one). Behind a proxy
# that serves jobq under a path prefix the client resolves it outside that prefix.
TYPE_BASE = "/problems/"


@dataclass(frozen=True, slots=True)
class Kind:
    """One ``code``: its title (the same on every answer of that code, as RFC 9457 wants), the
    HTTP statuses it comes with, what it means and what the caller can do about it."""

    title: str
    statuses: tuple[int, ...]
    meaning: str
    action: str


# The one table of codes: the answers' titles, the /problems pages and the OpenAPI enum.
KINDS: dict[str, Kind] = {
    "validation_error": Kind(
        "Validation error", (422, 415),
        "The request does not fit the API: a body that is not JSON, not a JSON object, a field "
        "unknown or of the wrong JSON type (nothing is coerced), a value out of range, or a "
        "query parameter the route does not take. `errors[]` lists each thing wrong, with "
        "`loc` naming where (`body`, `query` or `path`, then field names and list indexes).",
        "Fix the request as `errors[]` says; sending it again unchanged gives the same answer."),
    "not_found": Kind(
        "Not found", (404,),
        "No such job, lease, queue, schedule, token or topic subscription, or one of a queue "
        "outside the access "
        "token's queue pattern (answered as if absent, so that a token learns nothing about "
        "other tenants).",
        "Check the id or name. A job stays readable until its retention ends; a lease id is "
        "never reused."),
    "lease_lost": Kind(
        "Lease lost", (409,),
        "The lease is no longer the job's: it expired and the job was released (and perhaps "
        "claimed by another worker), or the job was cancelled, acked or failed with it already. "
        "With `already_completed: true` this very lease completed the job before (a retried "
        "ack whose first answer was lost); the result is stored.",
        "Stop working on the job and do not retry the call: another attempt owns the job now. "
        "Heartbeat before `locked_until` to keep a lease for long work."),
    "invalid_state": Kind(
        "Invalid state", (409,),
        "The job is not in a status this call applies to: cancelling a job that already "
        "finished, retrying one that is pending or running.",
        "Read the job (`GET /v1/jobs/{id}`) to see its status; nothing was changed."),
    "idempotency_conflict": Kind(
        "Idempotency conflict", (409,),
        "An enqueue reused an `idempotency_key` of a job that is still remembered, with a "
        "different body.",
        "Send the same body as the first time to get the first job back, or use a new key for "
        "a new job."),
    "queue_not_empty": Kind(
        "Queue not empty", (409,),
        "A queue's delete was refused: the queue still holds jobs waiting, running, failed "
        "and awaiting a retry, or dead (`counts`, by status), or schedules whose job targets "
        "it (`schedules`) or topics subscribed to it (`topics`) still name it. Nothing was "
        "deleted.",
        "Purge its jobs with `?purge=true` (running ones lose their leases), and delete the "
        "schedules and topic subscriptions named, then delete it again."),
    "queue_full": Kind(
        "Queue full", (429,),
        "The queue holds its `max_depth` of waiting jobs; nothing was enqueued (a batch: none "
        "of its jobs; a topic publish: no job in any of the topic's queues).",
        "Wait the `Retry-After` seconds and send it again, or raise the queue's `max_depth` "
        "(`PATCH /v1/queues/{name}`)."),
    "queue_rate_limited": Kind(
        "Queue rate limited", (429,),
        "The queue's `enqueue_rate` (a token bucket: `burst` jobs at once, refilled at `jobs` "
        "per `per_ms`) holds fewer jobs than the request brings; nothing was enqueued (a "
        "batch: none of its jobs). `retry_after_ms` is when the bucket holds them all, "
        "`Retry-After` the same in whole seconds, rounded up.",
        "Wait `retry_after_ms` and send it again unchanged (the SDKs' `retry_overload` does), "
        "or raise the queue's `enqueue_rate` (`PATCH /v1/queues/{name}`)."),
    "token_rate_limited": Kind(
        "Token rate limited", (429,),
        "The access token's own `enqueue_rate` (a token bucket, as a queue's) holds fewer jobs "
        "than the request brings; nothing was enqueued. `retry_after_ms` is when it holds "
        "them all, `Retry-After` the same in whole seconds, rounded up.",
        "Wait `retry_after_ms` and send it again unchanged, or have an admin raise the "
        "token's rate (`PATCH /v1/tokens/{id}`, `jobq tokens limit`)."),
    "queue_overloaded": Kind(
        "Queue overloaded", (429,),
        "The queue is past its soft thresholds (`soft_depth` waiting jobs, or its oldest "
        "claimable job waiting `soft_lag_ms`), and this enqueue fell in the share that is "
        "refused to slow producers down: 1 − 1/overload of them, where overload is how many "
        "times the threshold the queue is at. Nothing was enqueued. `retry_after_ms` grows "
        "with the overload: 1 s per threshold past it, from 100 ms to 60 s.",
        "Wait `retry_after_ms` and send it again unchanged: producers that do so slow down to "
        "what the workers take. Add workers, or raise the thresholds."),
    "unauthorized": Kind(
        "Unauthorized", (401,),
        "The service has access tokens and the request carried none, or one that is unknown "
        "or revoked, or an `Authorization` header that is not `Bearer <token>`.",
        "Send `Authorization: Bearer <token>` with a valid token (`jobq tokens create`). "
        "Sending the same token again cannot help."),
    "forbidden": Kind(
        "Forbidden", (403,),
        "The token is valid but its role may not make this call, or a queue the request names "
        "(for a topic publish: a queue subscribed to the topic) is outside the token's queue "
        "pattern.",
        "Use a token of a role the operation admits (each operation in the OpenAPI document "
        "says which), for the queues it names."),
    "payload_too_large": Kind(
        "Payload too large", (413,),
        "The request body is over the service's size limit (`JOBQ_MAX_BODY_BYTES`, default "
        "1 MiB); nothing of it was read into a job.",
        "Send a smaller body: keep large data elsewhere and put a reference in the payload, or "
        "split a batch."),
    "method_not_allowed": Kind(
        "Method not allowed", (405,),
        "The path exists but does not answer this method; `Allow` lists those it does.",
        "Use one of the methods in `Allow`."),
    "unavailable": Kind(
        "Service unavailable", (503,),
        "The database did not answer in time, the service has not read its access tokens yet, "
        "the service process is out of file descriptors (too many open connections), "
        "or (on `/readyz`) the schema is not the one this code needs. Nothing was changed.",
        "Wait the `Retry-After` seconds and send it again; a call with an `idempotency_key` "
        "is safe to repeat."),
    "too_many_long_polls": Kind(
        "Too many long-polls", (503,),
        "A claim with `wait_ms` came while this service process already holds as many "
        "waiting claims as it may (`JOBQ_MAX_LONG_POLLS`, by default derived from its file "
        "descriptor limit), and there was no job to hand it at once (the jobs of queues that "
        "waiting claims name go to those). It was answered at once instead of waiting, with "
        "`Connection: close`; nothing was claimed. Acks, heartbeats and enqueues are not "
        "affected.",
        "Wait the `Retry-After` seconds and claim again (another replica may have room). The "
        "SDK's worker does so on its own. An operator may raise the descriptor limit "
        "(`ulimit -n`, the hard limit) or run more replicas."),
    "bad_request": Kind(
        "Bad request", (400,),
        "What arrived is not an HTTP/1.1 request the service can parse; the connection is "
        "closed.",
        "Check the client or proxy in between: this is below the API."),
    "request_timeout": Kind(
        "Request timeout", (408,),
        "The request line and headers did not all arrive within `JOBQ_HEADER_TIMEOUT_S` "
        "(default 10 s); the connection is closed.",
        "Send the whole request promptly; check for a slow or stalled link."),
    "internal": Kind(
        "Internal error", (500,),
        "A bug in the service; it is logged with its traceback. Whatever the call committed "
        "before is kept, nothing half-done.",
        "Report it with the time and request; reading the job tells whether the call took "
        "effect."),
}

CODES = tuple(KINDS)


def _kind(code: str) -> tuple[int, str, str]:
    return KINDS[code].statuses[0], code, KINDS[code].title


# error class -> (status, code, title)
TABLE: dict[type[e.JobqError], tuple[int, str, str]] = {
    e.NotFound: _kind("not_found"),
    e.LeaseLost: _kind("lease_lost"),
    e.InvalidState: _kind("invalid_state"),
    e.IdempotencyConflict: _kind("idempotency_conflict"),
    e.QueueFull: _kind("queue_full"),
    e.QueueRateLimited: _kind("queue_rate_limited"),
    e.TokenRateLimited: _kind("token_rate_limited"),
    e.QueueOverloaded: _kind("queue_overloaded"),
    e.QueueNotEmpty: _kind("queue_not_empty"),
    e.Unauthorized: _kind("unauthorized"),
    e.Forbidden: _kind("forbidden"),
    e.InvalidInput: _kind("validation_error"),
    e.Unavailable: _kind("unavailable"),
    e.TooManyLongPolls: _kind("too_many_long_polls"),
}

# Plain HTTP errors raised by Starlette itself (unknown route, wrong method, ...). A 400 is
# answered as a 422 (``install``), a 5xx as ``unavailable``.
HTTP_CODES: dict[int, tuple[str, str]] = {
    status: (code, KINDS[code].title)
    for status, code in ((401, "unauthorized"), (403, "forbidden"), (404, "not_found"),
                         (405, "method_not_allowed"), (413, "payload_too_large"),
                         (415, "validation_error"))
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


def _json_error(err: dict[str, Any], text: Any) -> dict[str, Any]:
    """FastAPI reports a body that does not parse as ``loc: ["body", <offset>], msg: "JSON decode
    error"``. Say where in words a person finds in an editor, and what the parser expected."""
    pos = err.get("loc", ("body", 0))[-1]
    what = str((err.get("ctx") or {}).get("error") or "not valid JSON")
    what = what[:1].lower() + what[1:]
    if not isinstance(pos, int) or not isinstance(text, str):
        return {"loc": ["body"], "msg": f"invalid JSON: {what}"}
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)  # 1-based, as the json module counts
    return {"loc": ["body"], "msg": f"invalid JSON at line {line}, column {column}: {what}"}


# pydantic's words for a body that is missing or not an object, said of the body as a whole.
_WHOLE_BODY = {
    "missing": "a JSON object body is required",
    "model_attributes_type": "the body must be a JSON object ({...})",
    "dict_type": "the body must be a JSON object ({...})",
}


def _not_json(content_type: str | None) -> dict[str, Any]:
    sent = f"with content-type {content_type}" if content_type else "with no content-type"
    return {"loc": ["body"], "msg": f"the body must be JSON sent with content-type: "
                                    f"application/json; this one came {sent}"}


def validation_problem(errors: list[dict[str, Any]], *, body: Any = None,
                       content_type: str | None = None) -> Response:
    """``body`` is what FastAPI read: the decoded text for a JSON syntax error, the raw bytes
    when the content type was not JSON (FastAPI then validates the bytes, and its message,
    "Input should be a valid dictionary", would hide the real mistake)."""
    if isinstance(body, (bytes, bytearray)) and body.strip():
        # The body's own errors are the content type's fault; a bad path or query value
        # is a mistake of its own, and still named.
        others = [err for err in errors if tuple(err.get("loc", ()))[:1] != ("body",)]
        return validation_problem([*others, _not_json(content_type)])
    items = [_json_error(err, body) if err.get("type") == "json_invalid"
             else {"loc": ["body"], "msg": _WHOLE_BODY[err["type"]]}
             if tuple(err.get("loc", ())) == ("body",) and err.get("type") in _WHOLE_BODY
             else {"loc": _loc(err.get("loc", ())), "msg": _msg(err)} for err in errors]
    detail = "; ".join(f"{'.'.join(map(str, i['loc']))}: {i['msg']}" for i in items[:5])
    return problem(422, "validation_error", "Validation error", detail or "invalid request",
                   errors=items)


def from_error(exc: e.JobqError) -> Response:
    status, code, title = TABLE.get(type(exc)) or _kind("internal")
    headers: dict[str, str] | None = None
    if isinstance(exc, e.Throttled):
        # The header in whole seconds (RFC 9110), rounded up; the body to the millisecond,
        # for clients that can wait less than a second.
        return problem(status, code, title, exc.detail,
                       headers={"Retry-After": str(retry_after_s(exc.retry_after_ms))},
                       retry_after_ms=exc.retry_after_ms)
    if isinstance(exc, e.QueueFull):
        return problem(status, code, title, exc.detail,
                       headers={"Retry-After": str(exc.retry_after_s)},
                       retry_after_ms=exc.retry_after_s * 1000)
    if isinstance(exc, e.Unavailable):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, e.TooManyLongPolls):
        # The connection is what the cap protects: give its descriptor back now; the worker
        # comes back on a new one after Retry-After.
        headers = {"Retry-After": str(exc.retry_after_s), "Connection": "close"}
    if isinstance(exc, e.Unauthorized):
        headers = {"WWW-Authenticate": BEARER_CHALLENGE + (', error="invalid_token"'
                                                           if exc.invalid_token else "")}
    if isinstance(exc, e.LeaseLost) and exc.already_completed:
        return problem(status, code, title, exc.detail, already_completed=True)
    if isinstance(exc, e.QueueNotEmpty):
        return problem(status, code, title, exc.detail, counts=exc.counts,
                       schedules=exc.schedules, topics=exc.topics)
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

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, (RequestValidationError, ValidationError))
        if isinstance(exc, RequestValidationError):
            return validation_problem(list(exc.errors()), body=exc.body,
                                      content_type=request.headers.get("content-type"))
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
        code, title = HTTP_CODES.get(exc.status_code, _kind("validation_error")[1:])
        if exc.status_code >= 500:
            code, title = "unavailable", "Service unavailable"
        detail = exc.detail if isinstance(exc.detail, str) else title
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": _allowed_methods(request)}
        return problem(exc.status_code, code, title, detail, headers=headers)

    async def on_os_error(request: Request, exc: Exception) -> Response:
        # Out of descriptors (EMFILE, ENFILE) is load, not a bug: a 503 to come back after.
        # Any other OSError is still one, for on_unexpected to log with its traceback.
        if not exhausted(exc):
            raise exc
        retry_after = request.app.state.settings.retry_after_s
        return from_error(e.Unavailable(
            "the service has no file descriptor left (too many open connections); nothing "
            "was changed", retry_after))

    async def on_unexpected(_: Request, exc: Exception) -> Response:
        # A bug of ours. Still problem+json, and logged with its traceback by Starlette.
        return problem(500, "internal", KINDS["internal"].title, "an unexpected error occurred")

    app.add_exception_handler(e.JobqError, on_jobq_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(ValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(OSError, on_os_error)
    app.add_exception_handler(Exception, on_unexpected)
