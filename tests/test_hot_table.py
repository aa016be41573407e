"""One declaration per endpoint: the hot paths are derived from the app's routes, honour or
refuse every dependency of a hot route, and sit inside the request-wide layer.

No database here: every request below is answered before a handler would touch one (a
dependency refuses it, the body limit refuses it, or the endpoint is a test's own).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
from fastapi import APIRouter, Depends, FastAPI, Header, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.responses import Response

import jobq.api.app as app_module
from jobq.api import hot as hot_module
from jobq.api import problems, render
from jobq.api.app import create_app
from jobq.api.hot import (
    HotPaths,
    HotRouteError,
    hot,
    hot_routes,
    is_hot,
    original_route,
    resolved_routes,
)
from jobq.api.routes import leases
from jobq.domain.errors import Forbidden
from tests.conftest import make_settings

JSON = {"content-type": "application/json"}
NO_DATABASE = "postgresql://nobody@127.0.0.1:1/none"  # the pool opens in the lifespan only


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq")


def _installed_table(app: FastAPI) -> tuple[hot_module.HotRoute, ...]:
    [middleware] = [m for m in app.user_middleware if m.cls is HotPaths]
    routes: tuple[hot_module.HotRoute, ...] = middleware.kwargs["routes"]
    return routes


def _build(*routers: tuple[APIRouter, list[Any]], hot_paths: bool = True) -> FastAPI:
    """An app wired as create_app wires its routes: problem table, routers, hot table."""
    app = FastAPI()
    problems.install(app)
    app.state.ctx = None
    for router, dependencies in routers:
        app.include_router(router, dependencies=dependencies)
    table = hot_routes(app.router.routes)
    if hot_paths:
        app.add_middleware(HotPaths, routes=table)
    return app


# (1) the table is the routes marked hot, read from the app


def test_the_hot_table_is_exactly_the_routes_marked_hot() -> None:
    app = create_app(make_settings(NO_DATABASE))
    marked = [(rc.path, frozenset(rc.methods)) for rc in resolved_routes(app.router.routes)
              if isinstance(original_route(rc), APIRoute) and is_hot(rc)]
    table = _installed_table(app)
    assert [(h.path, h.methods) for h in table] == marked
    # Each entry is the route FastAPI routes to and documents, not a copy of its path.
    assert all(h.route is original_route(rc) and h.regex is rc.path_regex
               for h, rc in zip(table, [rc for rc in resolved_routes(app.router.routes)
                                       if is_hot(rc)], strict=True))
    assert {h.route.name for h in table} == {
        "create_job", "create_jobs", "claim", "ack_many", "ack", "fail", "heartbeat"}
    assert all(h.methods == {"POST"} for h in table)


def test_the_hot_paths_declare_no_path_of_their_own() -> None:
    assert not re.search(r"['\"]/v1", inspect.getsource(hot_module))


_CALLS: list[str] = []


async def _shared(request: Request) -> str:
    _CALLS.append("shared")
    return request.headers.get("x-who", "nobody")


async def _outer(who: str = Depends(_shared)) -> str:
    _CALLS.append("outer")
    return who.upper()


class _EchoBody(BaseModel):
    n: int
    tags: list[str] = []


async def test_a_route_marked_hot_anywhere_joins_the_table_and_is_answered_hot(
        passed_on: list[str]) -> None:
    """A new route of any shape the layer supports: marked, it is in the table and answered
    on the hot path, exactly as FastAPI answers it."""
    _CALLS.clear()
    router = APIRouter(prefix="/extra")

    @router.post("/{name}/echo")
    @hot
    async def echo(name: str, body: _EchoBody, request: Request, who: str = Depends(_shared),
                   loud: str = Depends(_outer)) -> Response:
        return render.json_response({"name": name, "n": body.n, "tags": body.tags, "who": who,
                                     "loud": loud, "path": request.url.path})

    answers = []
    for hot_paths in (True, False):
        app = _build((router, []), hot_paths=hot_paths)
        if hot_paths:
            assert [h.route.endpoint for h in _installed_table(app)] == [echo]
        async with _client(app) as c:
            before = len(passed_on)
            r = await c.post("/extra/bob/echo", content=b'{"n": 3, "tags": ["a"]}',
                             headers={**JSON, "x-who": "ann"})
            assert len(passed_on) == before  # the hot app answered it itself
            answers.append((r.status_code, r.headers["content-type"], r.content))
            bad = await c.post("/extra/bob/echo", content=b'{"n": "x"}', headers=JSON)
            answers.append((bad.status_code, bad.headers["content-type"], bad.content))
    assert answers[0] == answers[2] and answers[1] == answers[3]
    assert orjson.loads(answers[0][2]) == {"name": "bob", "n": 3, "tags": ["a"], "who": "ann",
                                           "loud": "ANN", "path": "/extra/bob/echo"}
    assert answers[1][0] == 422
    # A dependency used twice runs once per request, on either way (FastAPI runs them
    # before it validates the body).
    assert _CALLS == ["shared", "outer"] * 4


# (2) a dependency added to a hot route runs there, or the app is not built


async def test_a_dependency_added_to_hot_routes_runs_on_the_hot_path(
        passed_on: list[str]) -> None:
    calls: list[str] = []

    async def gate(request: Request) -> None:
        calls.append(request.url.path)
        if request.headers.get("x-pass") != "yes":
            raise Forbidden("no pass")

    app = _build((leases.router, [Depends(gate)]))
    assert {h.route.name for h in _installed_table(app)} == {
        "claim", "ack_many", "ack", "fail", "heartbeat"}
    plain = _build((leases.router, [Depends(gate)]), hot_paths=False)
    cases = [("/v1/leases", b'{"queues": ["q"], "worker_id": "w"}'),
             ("/v1/leases/ack", b'{"acks": [{"lease_id": "x"}]}'),
             ("/v1/leases/x/ack", b"{}"), ("/v1/leases/x/fail", b'{"error": "e"}'),
             ("/v1/leases/x/heartbeat", b"")]
    async with _client(app) as hot_client, _client(plain) as plain_client:
        for path, body in cases:
            answers = []
            for c in (hot_client, plain_client):
                answers.append(await c.post(path, content=body, headers=JSON))
            assert passed_on == []  # every hot answer came from the hot path
            assert answers[0].status_code == 403
            assert answers[0].json()["code"] == "forbidden"
            assert (answers[0].headers["content-type"], answers[0].content) == (
                answers[1].headers["content-type"], answers[1].content)
    assert calls == [path for path, _ in cases for _ in (1, 2)]


async def _needs_header(x_token: str = Header()) -> None:
    pass


def _sync_dependency() -> None:
    pass


async def _yielding() -> AsyncIterator[None]:
    yield


def _threaded_yield() -> Iterator[None]:
    yield


class _Resource:
    def __init__(self, request: Request) -> None:
        self.request = request


async def _with_query(limit: int = 10) -> int:
    return limit


UNHONOURED: list[Callable[..., Any]] = [
    _needs_header, _sync_dependency, _yielding, _threaded_yield, _Resource, _with_query]


@pytest.mark.parametrize("dependency", UNHONOURED, ids=lambda d: d.__name__)
def test_a_dependency_the_hot_paths_cannot_run_stops_the_build(
        dependency: Callable[..., Any]) -> None:
    with pytest.raises(HotRouteError, match="is marked @hot"):
        _build((leases.router, [Depends(dependency)]))


async def _outer_needs_header(inner: None = Depends(_needs_header)) -> None:
    pass


def test_a_nested_dependency_the_hot_paths_cannot_run_stops_the_build() -> None:
    with pytest.raises(HotRouteError, match="_needs_header"):
        _build((leases.router, [Depends(_outer_needs_header)]))


def test_create_app_refuses_a_hot_route_with_a_dependency_it_cannot_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    guarded = APIRouter()
    guarded.include_router(leases.router, dependencies=[Depends(_needs_header)])
    monkeypatch.setattr(app_module, "leases", SimpleNamespace(router=guarded))
    with pytest.raises(HotRouteError, match="/v1/leases"):
        create_app(make_settings(NO_DATABASE))
    # Without the hot paths too: the build does not depend on which way will answer.
    with pytest.raises(HotRouteError):
        create_app(make_settings(NO_DATABASE), hot_paths=False)


def test_a_hot_route_with_a_query_parameter_stops_the_build() -> None:
    router = APIRouter()

    @router.post("/q")
    @hot
    async def with_query(limit: int = 1) -> Response:
        return Response()

    with pytest.raises(HotRouteError, match="query"):
        _build((router, []))


# (3) every route passes the request-wide layer, whichever way it is answered


def _routes(app: FastAPI) -> list[tuple[str, str, bool, bool]]:
    """(method, a concrete path, takes a body, hot) for every route of the app."""
    out = []
    for rc in resolved_routes(app.router.routes):
        if not isinstance(original_route(rc), APIRoute):
            continue
        path = re.sub(r"\{[^}]+\}", "x", rc.path)
        for method in sorted(rc.methods):
            out.append((method, path, rc.dependant.body_params != [], is_hot(rc)))
    return out


async def test_the_body_limit_holds_on_every_route(passed_on: list[str]) -> None:
    app = create_app(make_settings(NO_DATABASE, max_body_bytes=1024))
    app.state.tokens.loaded = True  # no database to read tokens from: local mode, as read
    routes = _routes(app)
    assert any(hot for *_, hot in routes) and any(not hot for *_, hot in routes)
    big = orjson.dumps({"type": "t", "payload": {"x": "y" * 2000}})

    async def chunks() -> AsyncIterator[bytes]:
        # No Content-Length: the limit must hold while the body streams in.
        for i in range(0, len(big), 256):
            yield big[i:i + 256]

    async with _client(app) as c:
        for method, path, takes_body, is_hot_route in routes:
            r = await c.request(method, path, content=big, headers=JSON)
            assert r.status_code == 413, (method, path, r.text)
            assert r.json()["code"] == "payload_too_large"
            if not takes_body:
                continue
            before = len(passed_on)
            r = await c.request(method, path, content=chunks(), headers=JSON)
            assert r.status_code == 413, (method, path, r.text)
            assert r.json()["code"] == "payload_too_large"
            # Refused while the hot path read it, or while FastAPI did.
            assert (len(passed_on) == before) is is_hot_route
