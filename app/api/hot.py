"""The hot paths: the POSTs a worker fleet and its producers make for every job, served
without FastAPI's per-request machinery.

Enqueue, claim, heartbeat, ack and fail are nearly all of a busy service's requests. Through
FastAPI each one passes the exception and exit-stack middlewares, a scan of every route,
dependency solving, the standard library's JSON parser and a Response wrapper: in single
mode that was about a third of the service's CPU, more than the handlers themselves.

This layer takes those requests first. It parses the body with orjson, validates it with the
model the route declares, calls the route's own handler and maps a domain error through the
problem table. Whatever it would not answer exactly as the route does, it passes on,
untouched and with the body it read, to the FastAPI app: a body that is not JSON, that fails
validation, has another content type, is empty where the body is required, or holds a
number orjson would round (jobq.domain.jsontext). So every
error answer still comes from one place, and the OpenAPI document still describes these
routes, since they are the FastAPI routes' handlers. ``tests/test_hot_paths.py`` checks that
both ways answer alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobq.api import problems
from jobq.api.routes import jobs, leases
from jobq.api.schemas import (
    AckBody,
    AckManyBody,
    ClaimBody,
    FailBody,
    HeartbeatBody,
    JobBatchCreate,
    JobCreate,
)
from jobq.core.context import Context
from jobq.domain.errors import JobqError
from jobq.domain.jsontext import orjson_would_round

# (parsed body or None, the path's {lease_id} or "", the request, the context) -> answer
Handler = Callable[[Any, str, Request, Context], Awaitable[Response]]


@dataclass(frozen=True)
class Hot:
    model: type[BaseModel]
    optional: bool  # the route takes no body as None (``Body(default=None)``)
    handler: Handler


_EXACT: dict[str, Hot] = {
    "/v1/jobs": Hot(JobCreate, False, lambda b, _, __, ctx: jobs.create_job(b, ctx)),
    "/v1/jobs/batch": Hot(JobBatchCreate, False, lambda b, _, __, ctx: jobs.create_jobs(b, ctx)),
    "/v1/leases": Hot(ClaimBody, False, lambda b, _, req, ctx: leases.claim(b, req, ctx)),
    "/v1/leases/ack": Hot(AckManyBody, False, lambda b, _, __, ctx: leases.ack_many(b, ctx)),
}
# /v1/leases/{lease_id}/<action>
_PER_LEASE: dict[str, Hot] = {
    "ack": Hot(AckBody, True, lambda b, le, _, ctx: leases.ack(le, b, ctx)),
    "fail": Hot(FailBody, True, lambda b, le, _, ctx: leases.fail(le, b, ctx)),
    "heartbeat": Hot(HeartbeatBody, True, lambda b, le, _, ctx: leases.heartbeat(le, b, ctx)),
}
_LEASES = "/v1/leases/"


def _match(path: str) -> tuple[Hot, str] | None:
    hot = _EXACT.get(path)
    if hot is not None:
        return hot, ""
    if path.startswith(_LEASES):
        # Starlette's {lease_id} is one non-empty segment.
        lease_id, slash, action = path[len(_LEASES):].partition("/")
        if lease_id and slash:
            hot = _PER_LEASE.get(action)
            if hot is not None:
                return hot, lease_id
    return None


def _is_json(scope: Scope) -> bool:
    """Plain ``application/json``, with parameters or not. FastAPI also reads ``+json`` types,
    and no content type at all under its own rules: those go the long way."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body; None when the client left before it was whole (nothing to answer)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


# What ``_parse`` answers for a body the hot paths leave to FastAPI.
_PASS = object()


class HotPaths:
    def __init__(self, app: ASGIApp, ctx: Context) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = None
        # Behind a root path (a mount, --root-path) every request goes the long way: rare,
        # and Starlette's rules for stripping it stay in one place.
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            matched = _match(scope["path"])
        if matched is None or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        hot, lease_id = matched
        body = await _read_body(receive)
        if body is None:
            return
        parsed = self._parse(hot, body)
        if parsed is _PASS:
            await self.app(scope, _replay(body, receive), send)
            return
        request = Request(scope, receive)
        request._body = body  # read already: a handler asking for it again gets it, as in FastAPI
        try:
            response = await hot.handler(parsed, lease_id, request, self.ctx)
        except JobqError as exc:
            response = problems.from_error(exc)
        await response(scope, receive, send)

    @staticmethod
    def _parse(hot: Hot, body: bytes) -> Any:
        """The validated body, None for an absent optional one, or ``_PASS``."""
        if not body:
            return None if hot.optional else _PASS
        if orjson_would_round(body):
            return _PASS
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _PASS
        if data is None:
            return None if hot.optional else _PASS
        try:
            return hot.model.model_validate(data)
        except ValidationError:
            return _PASS


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body again, once, then whatever the client sends next (its disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
