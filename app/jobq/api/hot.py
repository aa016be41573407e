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

Why a table in front of FastAPI and not a route class (``APIRoute.get_route_handler``): a
route class still pays for the middlewares, the route scan and FastAPI's request wrapper.
Measured in process with the core stubbed out, FastAPI's way with a route handler that does
nothing at all costs 50-70 us a request; the whole hot path, handler included, 35-50 us.
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
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobq.domain.jsontext import orjson_would_round

try:
    # Recent FastAPI keeps an included router whole; this yields its routes as resolved
    # (prefix, router dependencies), each with its ``original_route``.
    from fastapi.routing import iter_route_contexts
except ImportError:  # pragma: no cover - older FastAPI copies included routes into the app
    def iter_route_contexts(routes: Sequence[Any]) -> Any:
        return iter(routes)

_MARK = "__jobq_hot__"
# What the body's validation answers for a body the hot paths leave to FastAPI.
_PASS = object()
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
class _Call:
    """One dependency call of a request. Values live in a list, in call order: ``args``
    names the earlier values this call takes, by index."""

    call: Callable[..., Awaitable[Any]]
    request_name: str | None
    args: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class HotRoute:
    route: BaseRoute  # the APIRoute as declared (its endpoint, its OpenAPI entry)
    path: str
    methods: frozenset[str]
    regex: Any  # re.Pattern[str], the route's own
    convertors: dict[str, Any]  # the path's {parameters}
    path_names: tuple[str, ...]  # those the endpoint takes
    endpoint: Callable[..., Awaitable[Response]]
    body: Any  # fastapi's ModelField of the body parameter, or None
    validate: Callable[[Any], Any] | None  # the body's validation: the value, or _PASS
    request_name: str | None
    # The dependencies in FastAPI's order, sub-dependencies first, each cached one called
    # once; and the endpoint's parameters they fill.
    calls: tuple[_Call, ...]
    dep_args: tuple[tuple[str, int], ...]
    # Earlier routes, not hot, that could answer the same method first: FastAPI takes the
    # first full match, so when one of them matches, the request goes FastAPI's way.
    shadows: tuple[Callable[[Scope], bool], ...]


def resolved_routes(routes: Sequence[BaseRoute]) -> list[Any]:
    """An app's routes in routing order, as FastAPI resolved them: each with its full path,
    regex, methods, endpoint and dependant (router dependencies included)."""
    return list(iter_route_contexts(routes))


def original_route(rc: Any) -> BaseRoute:
    route: BaseRoute = getattr(rc, "original_route", rc)
    return route


def hot_routes(routes: Sequence[BaseRoute]) -> tuple[HotRoute, ...]:
    """The hot table of an app: its routes marked ``@hot``, in routing order, compiled.
    Raises HotRouteError for a marked route whose needs this layer cannot honour."""
    contexts = resolved_routes(routes)
    table = []
    for i, rc in enumerate(contexts):
        if isinstance(original_route(rc), APIRoute) and is_hot(rc):
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
    calls, dep_args = _plan(rc, dependant)
    body = dependant.body_params[0] if dependant.body_params else None
    return HotRoute(
        route=original_route(rc),
        path=rc.path,
        methods=methods,
        regex=rc.path_regex,
        convertors=dict(rc.param_convertors),
        path_names=tuple(f.name for f in dependant.path_params),
        endpoint=rc.endpoint,
        body=body,
        validate=_validator(body) if body is not None else None,
        request_name=dependant.request_param_name,
        calls=calls,
        dep_args=dep_args,
        shadows=tuple(_shadow(e) for e in earlier if not is_hot(e)
                      and (e.methods is None or methods & set(e.methods))
                      and not _disjoint(rc, e)),
    )


def _disjoint(rc: Any, other: Any) -> bool:
    """True when no path can match both routes' regexes. Conservative: False is "maybe"."""
    theirs = getattr(other, "path_format", None)
    if theirs is None or getattr(other, "path_regex", None) is None:
        return False
    ours: str = rc.path_format
    if "{" not in theirs:
        return rc.path_regex.match(theirs) is None
    if "{" not in ours:
        return other.path_regex.match(ours) is None
    # Each matches only paths that start with the literal text before its first parameter.
    a, b = ours.split("{", 1)[0], theirs.split("{", 1)[0]
    return not (a.startswith(b) or b.startswith(a))


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


def _plan(rc: Any, dependant: Dependant) -> tuple[tuple[_Call, ...], tuple[tuple[str, int], ...]]:
    """The endpoint's dependencies as FastAPI solves them: depth first, a dependency's own
    dependencies before it, and a cached one (``use_cache``, the default) called only the
    first time its callable appears in the request."""
    calls: list[_Call] = []
    first: dict[Any, int] = {}

    def visit(dep: Dependant) -> int:
        _check_dependency(rc, dep)
        args = [(sub.name, visit(sub)) for sub in dep.dependencies]
        if dep.use_cache and dep.call in first:
            return first[dep.call]
        assert dep.call is not None
        calls.append(_Call(dep.call, dep.request_param_name,
                           tuple((n, i) for n, i in args if n is not None)))
        first.setdefault(dep.call, len(calls) - 1)
        return len(calls) - 1

    top = [(dep.name, visit(dep)) for dep in dependant.dependencies]
    # Unnamed: ``dependencies=[...]`` of a route or router, run for their effect only.
    return tuple(calls), tuple((n, i) for n, i in top if n is not None)


def _check_dependency(rc: Any, dependant: Dependant) -> None:
    name = getattr(dependant.call, "__name__", repr(dependant.call))
    what = f"its dependency {name}"
    if (dependant.path_params or dependant.query_params or dependant.header_params
            or dependant.cookie_params or dependant.body_params):
        raise _refuse(rc, f"{what} reads the request's parameters or body")
    _check_no_extras(rc, dependant, what)
    if dependant.call is None or not _is_coroutine_callable(dependant.call):
        # A plain def runs in a thread pool, a generator around the response: not here.
        raise _refuse(rc, f"{what} is not an async function returning a value")


def _validator(field: Any) -> Callable[[Any], Any]:
    """FastAPI validates the body with a TypeAdapter of the parameter's annotation, its
    metadata and its Field. For a JSON value and a parameter with no metadata that is the
    annotation's own validation, cheaper called directly (a model's ``model_validate``)."""
    info = field.field_info
    if info.metadata:
        def validate_field(value: Any) -> Any:
            valid, errors = field.validate(value, {}, loc=("body",))
            return _PASS if errors else valid
        return validate_field
    validate: Callable[[Any], Any]
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
        validate = info.annotation.model_validate
    else:
        validate = TypeAdapter(info.annotation).validate_python

    def validate_json(value: Any) -> Any:
        try:
            return validate(value)
        except ValidationError:
            return _PASS
    return validate_json


def _is_coroutine_callable(call: Callable[..., Any]) -> bool:
    if inspect.isclass(call):
        return False
    if inspect.isroutine(call):
        return inspect.iscoroutinefunction(call)
    return inspect.iscoroutinefunction(getattr(call, "__call__", None))  # noqa: B004


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


def _parse(hr: HotRoute, body: bytes) -> Any:
    """The validated body, as FastAPI would hand it to the endpoint, or ``_PASS``."""
    field, validate = hr.body, hr.validate
    assert validate is not None
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
    return validate(value)


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
                or (hr.shadows and any(shadowed(scope) for shadowed in hr.shadows))):
            await self.app(scope, receive, send)
            return
        path_params: dict[str, Any] = {}
        kwargs: dict[str, Any] = {}
        if hr.convertors:
            for name, value in match.groupdict().items():
                path_params[name] = hr.convertors[name].convert(value)
            for name in hr.path_names:
                kwargs[name] = path_params[name]
        body = b""
        if hr.body is not None:
            read = await _read_body(receive)
            if read is None:
                return
            body = read
            parsed = _parse(hr, body)
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
            if hr.calls:
                values: list[Any] = []
                for c in hr.calls:
                    args = {name: values[i] for name, i in c.args} if c.args else {}
                    if c.request_name:
                        args[c.request_name] = request
                    values.append(await c.call(**args))
                for name, i in hr.dep_args:
                    kwargs[name] = values[i]
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
