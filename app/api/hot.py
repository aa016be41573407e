"""The hot paths: the routes marked ``@hot`` (enqueue, claim, heartbeat, ack, fail) served
without FastAPI's per-request machinery.

Those requests are nearly all of a busy service's. Through FastAPI each one passes the
exception and exit-stack middlewares, a scan of every route, dependency solving, the
standard library's JSON parser and a Response wrapper: in single mode that was about a third
of the service's CPU, more than the handlers themselves.

There is no second declaration here. When the app is built, ``hot_routes`` reads the app's
own routes, as FastAPI resolved them (prefix, path regex and convertors, methods, body
field, dependencies), and keeps those whose endpoint is marked ``@hot``. For each it
compiles what the endpoint needs; a route asking for something this layer cannot give
exactly as FastAPI would (a query, header or cookie parameter, a dependency that yields or
is not async, a form body, its own body limit, a return value FastAPI would serialize) makes
``hot_routes`` raise, so ``create_app`` fails rather than serve the route without it.
Dependencies of the plain kind (async, taking at most the Request and other such
dependencies) run here as they would in FastAPI, in the same order, cached per request.

At request time ``HotPaths`` matches the path with the route's own regex, parses the body
with orjson, validates it with the route's body field and calls the endpoint. Whatever it
would not answer exactly as FastAPI does it passes on, untouched and with the body it read,
to the FastAPI app: a body that is not JSON, that fails validation, has another content
type, or holds a number orjson would round (jobq.domain.jsontext); a route shadowed by an
earlier one; dependency overrides in force. Exceptions go through the app's own exception
handlers, so every error answer still comes from one table. ``tests/test_hot_paths.py``
checks that both ways answer alike. Request-wide concerns (the body limit) are not here but
outside, in ASGI middleware that every request passes whichever way it is answered.
"""

from __future__ import annotations

import copy
import inspect
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from fastapi import params
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobq.domain.jsontext import orjson_would_round

_MARK = "__jobq_hot__"
Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Response]])


def hot(endpoint: Endpoint) -> Endpoint:
    """Marks a route's endpoint to be served by the hot paths. Put it under the route
    decorator; the route's declaration stays the one FastAPI reads."""
    setattr(endpoint, _MARK, True)
    return endpoint


def is_hot(route: object) -> bool:
    return getattr(getattr(route, "endpoint", None), _MARK, False) is True


class HotRouteError(TypeError):
    """A route marked ``@hot`` asks for something the hot paths cannot honour."""


@dataclass(frozen=True)
class _Dep:
    """One dependency to call, compiled from FastAPI's Dependant."""

    call: Callable[..., Awaitable[Any]]
    name: str | None  # the endpoint's parameter it fills; None for ``dependencies=[...]``
    request_name: str | None
    deps: tuple[_Dep, ...]
    use_cache: bool


@dataclass(frozen=True)
class HotRoute:
    route: APIRoute  # the route as declared (its endpoint, its OpenAPI entry)
    path: str
    methods: frozenset[str]
    regex: Any  # re.Pattern[str], the route's own
    convertors: dict[str, Any]  # the path's {parameters}
    path_names: tuple[str, ...]  # those the endpoint takes
    endpoint: Callable[..., Awaitable[Response]]
    body: Any  # fastapi's ModelField of the body parameter, or None
    request_name: str | None
    deps: tuple[_Dep, ...]
    # Earlier routes, not hot, that could answer the same method first: FastAPI takes the
    # first full match, so when one of them matches, the request goes FastAPI's way.
    shadows: tuple[Callable[[Scope], bool], ...]


def hot_routes(routes: Sequence[BaseRoute]) -> tuple[HotRoute, ...]:
    """The hot table of an app: its routes marked ``@hot``, in routing order, compiled.
    Raises HotRouteError for a marked route whose needs this layer cannot honour."""
    contexts = list(iter_route_contexts(routes))
    table = []
    for i, rc in enumerate(contexts):
        if isinstance(rc.original_route, APIRoute) and is_hot(rc):
            table.append(_compile(rc, contexts[:i]))
    return tuple(table)


def _refuse(rc: Any, why: str) -> HotRouteError:
    return HotRouteError(
        f"{sorted(rc.methods)} {rc.path} is marked @hot but {why}; the hot paths would "
        f"answer it differently from FastAPI. Drop @hot, or teach jobq.api.hot to honour it.")


def _compile(rc: Any, earlier: list[Any]) -> HotRoute:
    dependant: Dependant = rc.dependant
    if dependant.query_params or dependant.header_params or dependant.cookie_params:
        raise _refuse(rc, "takes query, header or cookie parameters")
    if any(f.field_info.annotation is not str or f.field_info.metadata
           for f in dependant.path_params):
        raise _refuse(rc, "has a path parameter that is not a plain str")
    if len(dependant.body_params) > 1 or any(
            isinstance(f.field_info, params.Form) or getattr(f.field_info, "embed", False)
            for f in dependant.body_params):
        raise _refuse(rc, "takes a body other than one JSON value")
    if getattr(rc, "max_body_size", None) is not None:
        raise _refuse(rc, "sets its own body limit (request limits are ASGI middleware here)")
    _check_no_extras(rc, dependant, "the endpoint")
    if not inspect.iscoroutinefunction(rc.endpoint):
        raise _refuse(rc, "its endpoint is not a coroutine function")
    returns = typing.get_type_hints(rc.endpoint).get("return")
    if not (isinstance(returns, type) and issubclass(returns, Response)):
        raise _refuse(rc, "its endpoint is not annotated to return a Response "
                      "(FastAPI would serialize anything else with the response model)")
    methods = frozenset(rc.methods)
    return HotRoute(
        route=rc.original_route,
        path=rc.path,
        methods=methods,
        regex=rc.path_regex,
        convertors=dict(rc.param_convertors),
        path_names=tuple(f.name for f in dependant.path_params),
        endpoint=rc.endpoint,
        body=dependant.body_params[0] if dependant.body_params else None,
        request_name=dependant.request_param_name,
        deps=tuple(_compile_dep(rc, d) for d in dependant.dependencies),
        shadows=tuple(_shadow(e) for e in earlier if not is_hot(e)
                      and (e.methods is None or methods & set(e.methods))),
    )


def _shadow(rc: Any) -> Callable[[Scope], bool]:
    """Whether the route answers a scope in full. A route with methods and a path regex is
    a path match (the method was checked at build time); others answer for themselves."""
    regex = getattr(rc, "path_regex", None)
    if regex is not None and rc.methods is not None:
        match = regex.match
        return lambda scope: match(scope["path"]) is not None
    return lambda scope: bool(rc.matches(scope)[0] is Match.FULL)


def _check_no_extras(rc: Any, dependant: Dependant, what: str) -> None:
    for attr in ("response_param_name", "background_tasks_param_name",
                 "security_scopes_param_name", "websocket_param_name",
                 "http_connection_param_name"):
        if getattr(dependant, attr, None):
            raise _refuse(rc, f"{what} takes a {attr.removesuffix('_param_name')} parameter")


def _compile_dep(rc: Any, dependant: Dependant) -> _Dep:
    name = getattr(dependant.call, "__name__", repr(dependant.call))
    what = f"its dependency {name}"
    if (dependant.path_params or dependant.query_params or dependant.header_params
            or dependant.cookie_params or dependant.body_params):
        raise _refuse(rc, f"{what} reads the request's parameters or body")
    _check_no_extras(rc, dependant, what)
    call = dependant.call
    if call is None or not _is_coroutine_callable(call):
        # A plain def runs in a thread pool, a generator around the response: not here.
        raise _refuse(rc, f"{what} is not an async function returning a value")
    return _Dep(call=call, name=dependant.name, request_name=dependant.request_param_name,
                deps=tuple(_compile_dep(rc, d) for d in dependant.dependencies),
                use_cache=dependant.use_cache)


def _is_coroutine_callable(call: Callable[..., Any]) -> bool:
    if inspect.isclass(call):
        return False
    if inspect.isroutine(call):
        return inspect.iscoroutinefunction(call)
    return inspect.iscoroutinefunction(getattr(call, "__call__", None))  # noqa: B004


async def _solve(deps: tuple[_Dep, ...], request: Request, kwargs: dict[str, Any],
                 cache: dict[Any, Any]) -> None:
    for dep in deps:
        if dep.use_cache and dep.call in cache:
            value = cache[dep.call]
        else:
            args: dict[str, Any] = {}
            if dep.deps:
                await _solve(dep.deps, request, args, cache)
            if dep.request_name:
                args[dep.request_name] = request
            value = await dep.call(**args)
            if dep.use_cache:
                cache[dep.call] = value
        if dep.name is not None:
            kwargs[dep.name] = value


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


def _parse(field: Any, body: bytes) -> Any:
    """The validated body, as FastAPI would hand it to the endpoint, or ``_PASS``."""
    if not body:
        # FastAPI: no body is the parameter's default, when it has one.
        if field.field_info.is_required():
            return _PASS
        value = copy.deepcopy(field.default)
        if not field.field_info.validate_default:
            return value
    else:
        if orjson_would_round(body):
            return _PASS
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _PASS
    value, errors = field.validate(value, {}, loc=("body",))
    return _PASS if errors else value


class HotPaths:
    def __init__(self, app: ASGIApp, routes: tuple[HotRoute, ...]) -> None:
        self.app = app
        self.by_method: dict[str, tuple[HotRoute, ...]] = {}
        for method in {m for r in routes for m in r.methods}:
            self.by_method[method] = tuple(r for r in routes if method in r.methods)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Behind a root path (a mount, --root-path) every request goes the long way: rare,
        # and Starlette's rules for stripping it stay in one place.
        if scope["type"] != "http" or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        for hr in self.by_method.get(scope["method"], ()):
            match = hr.regex.match(path)
            if match is not None:
                break
        else:
            await self.app(scope, receive, send)
            return
        if (getattr(scope.get("app"), "dependency_overrides", None)
                or (hr.body is not None and not _is_json(scope))
                or any(shadowed(scope) for shadowed in hr.shadows)):
            await self.app(scope, receive, send)
            return
        path_params = {k: hr.convertors[k].convert(v) for k, v in match.groupdict().items()}
        kwargs: dict[str, Any] = {k: path_params[k] for k in hr.path_names}
        body = b""
        if hr.body is not None:
            read = await _read_body(receive)
            if read is None:
                return
            body = read
            parsed = _parse(hr.body, body)
            if parsed is _PASS:
                await self.app(scope, _replay(body, receive), send)
                return
        scope["path_params"] = path_params
        scope["endpoint"] = hr.endpoint
        scope["route"] = hr.route
        request = Request(scope, receive)
        if hr.body is not None:
            kwargs[hr.body.name] = parsed
            request._body = body  # read already: a handler asking again gets it, as in FastAPI
        if hr.request_name:
            kwargs[hr.request_name] = request
        try:
            if hr.deps:
                await _solve(hr.deps, request, kwargs, {})
            response = await hr.endpoint(**kwargs)
        except Exception as exc:
            response = await _handled(exc, request)
        await response(scope, receive, send)


async def _handled(exc: Exception, request: Request) -> Response:
    """The answer the app's exception handlers give, as Starlette's ExceptionMiddleware
    would find it. What only the catch-all handles is raised on, to the outermost
    middleware, as it is on FastAPI's way."""
    handlers: dict[Any, Callable[..., Any]] = getattr(request.app, "exception_handlers", {})
    handler = None
    if isinstance(exc, HTTPException) and exc.status_code != 500:
        handler = handlers.get(exc.status_code)
    if handler is None:
        for cls in type(exc).__mro__:
            if cls is Exception:
                break
            if cls in handlers:
                handler = handlers[cls]
                break
    if handler is None:
        raise exc
    if inspect.iscoroutinefunction(handler):
        response: Response = await handler(request, exc)
    else:
        response = await run_in_threadpool(handler, request, exc)
    return response


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
