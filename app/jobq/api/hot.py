"""The hot paths: a request for a route ``DirectRoute`` calls directly (the worker's and
producer's POSTs) goes from the app's entry through the app's own middleware (tokens, body
limit) to its handler, past FastAPI's routing and Starlette's exception layers.

Why: between uvicorn and the endpoint, a request passes about ten ASGI layers (Starlette's
``ServerErrorMiddleware`` and ``ExceptionMiddleware``, FastAPI's telemetry, body-limit and
exit-stack middlewares, the router, the included routers' matching, the route's
``request_response`` with two exit stacks and its own exception wrapper). For these routes
they do nothing but find the route and map exceptions to answers, and cost about as much CPU
as the enqueue endpoint's own Python (py-spy, issue 28).

``HotPaths`` is what ``JobqApp.build_middleware_stack`` returns: the stack FastAPI builds,
with this in front of it. It answers a request itself only when it is sure the full stack
would pick the same route and do nothing more than what it does here:

- the route: one whose method and path (``path_regex``, as FastAPI resolved the app's
  routes, in routing order) this request matches, a ``DirectRoute`` whose handler
  (``direct_handler``) calls ``guarded`` and the endpoint, with ``guarded`` as its only
  dependency as resolved and only ``str`` path parameters; and no route before it in
  routing order that could match the same request (``_may_overlap``: when unsure, the
  route is left to the full stack). Every other request (another method, another path, a
  404, a 405) goes to the full stack, which answers it as before.
- the middleware: the app's own ``user_middleware`` (``Authenticate``, ``BodyLimit``),
  built a second time around the handler, so a middleware added to the app is on this path
  too (STYLE 11: nothing added to one path and missed on the other).
- the exceptions: the app's exception handlers, looked up as Starlette's route does (status
  handlers for an ``HTTPException``, then the exception's classes in order), and for one
  they do not answer, the app's 500 handler, with the exception raised on for the server to
  log, as ``ServerErrorMiddleware`` does.
- the scope: ``route`` (the route as declared, whose name ``access.caller`` reads),
  ``endpoint``, ``path_params`` and ``router``, as the router sets them.

What it leaves to the full stack: an app in debug mode or with FastAPI's own
``max_body_size``, a request under a ``root_path``, inside a mounted app's body limit, or
traced by FastAPI's telemetry (an OpenTelemetry provider configured: the span wants the
route FastAPI's router records).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.convertors import StringConvertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobq.api.access import Authenticate, guarded
from jobq.api.direct import DirectRoute, Handler
from jobq.api.limits import BodyLimit
from jobq.api.resolved import original_route, resolved_routes

try:  # Starlette's body limit (1.x); older releases have none, and no such scope key to see
    from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
except ImportError:  # pragma: no cover - the locked Starlette has it
    MAX_BODY_SIZE_SCOPE_KEY = "starlette.max_body_size"

# The app middleware HotPaths builds a second time around a hot route's handler: these two
# keep no state of their own (the token table is shared, the limit is a number), so two
# instances act as one. An app with any other middleware keeps the full stack for every
# request rather than have a second instance of it (its collectors, its counters).
HOT_MIDDLEWARE = (Authenticate, BodyLimit)

# Set by FastAPI's native telemetry on a request it traces (None or its record).
TELEMETRY_SCOPE_KEY = "fastapi.telemetry"
# Where HotPaths leaves the route it found, for the handler inside the middleware.
_ENTRY_KEY = "jobq.hot_route"


class JobqApp(FastAPI):
    """FastAPI, with ``HotPaths`` in front of the stack it builds."""

    def build_middleware_stack(self) -> ASGIApp:
        full = super().build_middleware_stack()
        return HotPaths.around(self, full)


@dataclass(frozen=True, slots=True)
class _Entry:
    route: DirectRoute  # as declared: scope["route"]
    handler: Handler


class HotPaths:
    """See the module's docstring."""

    def __init__(self, app: FastAPI, full: ASGIApp, literal: dict[str, dict[str, _Entry]],
                 patterns: dict[str, list[tuple[re.Pattern[str], _Entry]]],
                 error_handler: Any, handlers: dict[Any, Any], status_handlers: dict[int, Any]) -> None:
        self.full = full
        self.app = full  # as middleware name what they wrap: FastAPI walks the stack by .app
        self.router = app.router
        self.literal = literal
        self.patterns = patterns
        self.error_handler = error_handler
        self.handlers = handlers
        self.status_handlers = status_handlers
        # The app's middleware, as Starlette builds it (the first added outermost), around
        # the route's handler instead of Starlette's ExceptionMiddleware and the router.
        inner: ASGIApp = self._route
        for cls, args, kwargs in reversed(app.user_middleware):
            inner = cls(inner, *args, **kwargs)
        self.inner = inner

    @classmethod
    def around(cls, app: FastAPI, full: ASGIApp) -> ASGIApp:
        """``full`` with the hot paths in front; ``full`` alone when nothing can take them."""
        if app.debug or getattr(app, "max_body_size", None) is not None:
            return full
        if any(m.cls not in HOT_MIDDLEWARE for m in app.user_middleware):
            return full
        error_handler = None
        handlers: dict[Any, Any] = {}
        status_handlers: dict[int, Any] = {}
        for key, value in app.exception_handlers.items():  # split as Starlette splits them
            if key in (500, Exception):
                error_handler = _awaitable(value)
            elif isinstance(key, int):
                status_handlers[key] = _awaitable(value)
            else:
                handlers[key] = _awaitable(value)
        if error_handler is None or HTTPException not in handlers:
            # Starlette's own plain-text answers: not worth repeating here.
            return full
        literal, patterns = _hot_routes(resolved_routes(app.router.routes))
        if not literal and not patterns:
            return full
        return cls(app, full, literal, patterns, error_handler, handlers, status_handlers)

    def find(self, method: str, path: str) -> tuple[_Entry, dict[str, Any]] | None:
        """The hot route the full stack would serve this request with, and its path
        parameters; None for every other request."""
        by_path = self.literal.get(method)
        if by_path is not None:
            entry = by_path.get(path)
            if entry is not None:
                return entry, {}
        for regex, entry in self.patterns.get(method, ()):
            match = regex.match(path)
            if match is not None:
                return entry, match.groupdict()
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope.get("root_path") or TELEMETRY_SCOPE_KEY in scope
                or MAX_BODY_SIZE_SCOPE_KEY in scope):
            await self.full(scope, receive, send)
            return
        found = self.find(scope["method"], scope["path"])
        if found is None:
            await self.full(scope, receive, send)
            return
        entry, params = found
        scope[_ENTRY_KEY] = entry
        scope["route"] = entry.route
        scope["endpoint"] = entry.route.endpoint
        scope["path_params"] = params
        if "router" not in scope:
            scope["router"] = self.router
        # Starlette's ServerErrorMiddleware: an exception no handler answered is the app's
        # 500 (unless the answer began), and is raised on for the server to log.
        sender = _Sender(send)

        try:
            await self.inner(scope, receive, sender)
        except Exception as exc:
            response = await self.error_handler(Request(scope), exc)
            if not sender.started:
                await response(scope, receive, send)
            raise exc

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route's handler, its exceptions answered by the app's handlers as Starlette's
        route answers them (``request_response``)."""
        entry: _Entry = scope[_ENTRY_KEY]
        request = Request(scope, receive, send)
        sender = _Sender(send)

        try:
            response = await entry.handler(request)
            await response(scope, receive, sender)
        except Exception as exc:
            handler = None
            if isinstance(exc, HTTPException):
                handler = self.status_handlers.get(exc.status_code)
            if handler is None:
                handler = self._handler_of(exc)
            if handler is None:
                raise exc
            if sender.started:
                raise RuntimeError("Caught handled exception, but response already started.") from exc
            answer = await handler(request, exc)
            if answer is not None:
                await answer(scope, receive, sender)
            exc.__traceback__ = None  # as Starlette: a reused exception keeps no frames

    def _handler_of(self, exc: Exception) -> Any:
        handlers = self.handlers
        for cls in type(exc).__mro__:
            if cls in handlers:
                return handlers[cls]
        return None


class _Sender:
    """``send``, remembering whether the answer began (an exception after that cannot be
    answered any more)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self.send(message)


def _awaitable(handler: Any) -> Any:
    """An exception handler as an async function: a plain one runs in the thread pool, as
    Starlette runs it."""
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
            type(target).__call__):  # an object whose __call__ is async
        return handler

    async def in_thread(request: Request, exc: Exception) -> Any:
        return await run_in_threadpool(handler, request, exc)

    return in_thread


def _hot_routes(routes: Sequence[Any]) -> tuple[dict[str, dict[str, _Entry]],
                                                dict[str, list[tuple[re.Pattern[str], _Entry]]]]:
    """The routes HotPaths may serve (see the module), by method: fixed paths in a dict,
    the others as their regexes. ``routes`` as resolved, in routing order."""
    literal: dict[str, dict[str, _Entry]] = {}
    patterns: dict[str, list[tuple[re.Pattern[str], _Entry]]] = {}
    for i, rc in enumerate(routes):
        declared = original_route(rc)
        if not isinstance(declared, DirectRoute):
            continue
        handler = declared.direct_handler()
        if handler is None or not rc.methods or getattr(rc, "max_body_size", None) is not None:
            continue
        if [d.call for d in rc.dependant.dependencies] != [guarded]:
            continue  # check_direct refuses such an app; never skip a dependency here
        if not all(isinstance(c, StringConvertor) for c in rc.param_convertors.values()):
            continue  # a convertor would change the value: FastAPI's routing converts it
        if any(_may_overlap(earlier, rc) for earlier in routes[:i]):
            continue
        entry = _Entry(declared, handler)
        for method in rc.methods:
            if rc.param_convertors:
                patterns.setdefault(method, []).append((rc.path_regex, entry))
            else:
                literal.setdefault(method, {})[rc.path] = entry
    return literal, patterns


def _may_overlap(earlier: Any, later: Any) -> bool:
    """Whether one request could match both routes (method and path): then the router serves
    it with the earlier one. True when unsure."""
    if not isinstance(original_route(earlier), Route):  # a mount, or what else: unsure
        return True
    methods_a, methods_b = earlier.methods, later.methods
    if methods_a is not None and methods_b is not None and not set(methods_a) & set(methods_b):
        return False
    a, b = earlier.path_format, later.path_format
    if not isinstance(a, str) or not isinstance(b, str):
        return True
    # Each regex is anchored: a path matching both starts with both fixed heads, and ends
    # with both fixed tails.
    head_a, head_b = a.partition("{")[0], b.partition("{")[0]
    if not (head_a.startswith(head_b) or head_b.startswith(head_a)):
        return False
    tail_a, tail_b = a.rpartition("}")[2], b.rpartition("}")[2]
    if "{" in a and "{" in b and not (tail_a.endswith(tail_b) or tail_b.endswith(tail_a)):
        return False
    # Segment by segment, where every parameter is a whole segment of one plain string
    # (``[^/]+``): a fixed segment meets a parameter or the same fixed segment.
    sa, sb = a.split("/"), b.split("/")
    plain = all(_plain_segment(s, r) for s, r in ((sa, earlier), (sb, later)))
    if not plain:
        return True
    if len(sa) != len(sb):
        return False
    for x, y in zip(sa, sb, strict=True):
        x_param, y_param = x.startswith("{"), y.startswith("{")
        if x_param and y_param:
            continue
        if x_param or y_param:
            if (y if x_param else x) == "":  # a parameter is never empty
                return False
            continue
        if x != y:
            return False
    return True


def _plain_segment(segments: list[str], route: Any) -> bool:
    if not all(isinstance(c, StringConvertor) for c in route.param_convertors.values()):
        return False
    return all("{" not in s or (s.startswith("{") and s.endswith("}") and s.count("{") == 1)
               for s in segments)
