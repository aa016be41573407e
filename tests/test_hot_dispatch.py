"""jobq.api.hot: a request for a hot route (a DirectRoute FastAPI would serve with the handler
that calls ``guarded`` and the endpoint) is answered past FastAPI's routing, and answered as
the full stack answers it: status, headers and body, for good input, bad JSON, an oversize
body, a missing, unknown or under-privileged token, a wrong method, an unknown query
parameter, a lease that is not there, and an exception no handler answers."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from jobq.api import problems
from jobq.api.access import SCOPE_KEY, guarded
from jobq.api.direct import DirectRoute
from jobq.api.hot import HotPaths, JobqApp
from jobq.domain.access import LOCAL
from tests.conftest import make_settings, running_app

pytestmark = pytest.mark.timeout(120)

ASGI = Callable[[Any, Any, Any], Awaitable[None]]
HOT_KEY = "jobq.hot_route"


def _sides(app: Any) -> tuple[ASGI, ASGI, list[bool]]:
    """The app as served (hot paths in front), and its full stack alone (what Starlette's
    ``__call__`` does, without the hot paths); ``took`` records, per request through the
    first, whether the hot path answered it."""
    took: list[bool] = []

    async def served(scope: Any, receive: Any, send: Any) -> None:
        try:
            await app(scope, receive, send)
        finally:
            if scope["type"] == "http":
                took.append(HOT_KEY in scope)

    async def full(scope: Any, receive: Any, send: Any) -> None:
        if app.middleware_stack is None:
            app.middleware_stack = app.build_middleware_stack()
        stack = app.middleware_stack
        assert isinstance(stack, HotPaths)
        scope["app"] = app
        await stack.full(scope, receive, send)
        assert HOT_KEY not in scope

    return served, full, took


def _client(asgi: ASGI, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi, raise_app_exceptions=False),
                             base_url="http://jobq", headers=headers)


_IDS = re.compile(r"""(?<="id":")[^"]+|(?<="lease_id":")[^"]+|(?<=/v1/jobs/)\w+"""
                  r"""|(?<=job )\d+|(?<=lease ')[^']+""")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+Z")


def _normal(text: str) -> str:
    return _TIME.sub("<time>", _IDS.sub("<id>", text))


def _answer(r: httpx.Response, side: str = "") -> tuple[Any, ...]:
    def normal(text: str) -> str:
        return _normal(text.replace(side, "@") if side else text)

    headers = {k: normal(v) for k, v in r.headers.items() if k != "content-length"}
    body: Any = normal(r.text)
    if r.headers.get("content-type", "").endswith("json"):
        body = json.loads(body)
    return r.status_code, headers, body


@pytest.fixture
async def pair(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, list[bool]]]:
    async with running_app(make_settings(database_url, max_body_bytes=4096)) as app:
        served, full, took = _sides(app)
        async with _client(served) as hot, _client(full) as whole:
            yield hot, whole, took


async def _lease(c: httpx.AsyncClient, queue: str) -> str:
    r = await c.post("/v1/jobs", json={"queue": queue, "type": "t"})
    assert r.status_code == 201, r.text
    r = await c.post("/v1/leases", json={"queues": [queue], "worker_id": "w"})
    assert r.status_code == 200, r.text
    return str(r.json()["leases"][0]["lease_id"])


async def _big() -> Any:
    """A body over the limit without a Content-Length (chunked): refused as it streams."""
    yield b'{"type": "t", "payload": "'
    yield b"x" * 5000
    yield b'"}'


def _for(side: str, value: Any) -> Any:
    """A case's arguments for one side: "@" in a string (a queue, a key) is the side's name,
    so that each side's jobs are its own; a callable is called (a fresh body stream)."""
    if isinstance(value, str):
        return value.replace("@", side)
    if isinstance(value, dict):
        return {k: _for(side, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_for(side, v) for v in value]
    if callable(value):
        return value()
    return value


CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    # (method, path, httpx arguments, whether the hot path takes it)
    ("POST", "/v1/jobs", {"json": {"type": "t", "payload": {"a": [1, 2.5, None]}}}, True),
    ("POST", "/v1/jobs", {"json": {"type": "t", "idempotency_key": "k@"}}, True),
    ("POST", "/v1/jobs", {"json": {"type": "t", "idempotency_key": "k@"}}, True),  # a replay: 200
    ("POST", "/v1/jobs", {"json": {"type": "other", "idempotency_key": "k@"}}, True),  # 409
    ("POST", "/v1/jobs", {"content": b'{"type": ', "headers": {"content-type": "application/json"}}, True),
    ("POST", "/v1/jobs", {"content": b'{"type": "t"}', "headers": {"content-type": "text/plain"}}, True),
    ("POST", "/v1/jobs", {"content": b"\xff\xfe", "headers": {"content-type": "application/json"}}, True),
    ("POST", "/v1/jobs", {"json": {"type": "t", "payload": {"s": "a\u0000b"}}}, True),
    ("POST", "/v1/jobs", {"json": {"type": "t", "payload": "x" * 5000}}, True),  # Content-Length
    ("POST", "/v1/jobs", {"content": _big, "headers": {"content-type": "application/json"}}, True),
    ("POST", "/v1/jobs", {"json": {"type": "t"}, "params": {"x": "1"}}, True),
    ("POST", "/v1/jobs/batch", {"json": {"jobs": [{"type": "a"}, {"type": "b", "queue": "q2"}]}}, True),
    ("POST", "/v1/jobs/batch", {"json": {"jobs": []}}, True),
    ("POST", "/v1/leases", {"json": {"queues": ["none"], "worker_id": "w"}}, True),
    ("POST", "/v1/leases", {"json": {"queues": [], "worker_id": "w"}}, True),
    ("POST", "/v1/leases/nope/heartbeat", {"json": {}}, True),
    ("POST", "/v1/leases/nope/ack", {}, True),
    ("POST", "/v1/leases/nope/fail", {"json": {"error": "x"}}, True),
    ("POST", "/v1/leases/nope/release", {"json": {"delay_ms": -1}}, True),
    ("POST", "/v1/leases/ack", {"json": {"acks": [{"lease_id": "nope"}]}}, True),
    ("POST", "/v1/leases/release", {"json": {"releases": [{"lease_id": "nope"}]}}, True),
    # not hot: another method, path or route; answered by the full stack on both sides
    ("GET", "/v1/leases/nope/ack", {}, False),
    ("PUT", "/v1/jobs", {"json": {"type": "t"}}, False),
    ("POST", "/v1/leases/a/b/ack", {}, False),
    ("POST", "/v1/leases//ack", {}, False),
    ("POST", "/v1/jobs/", {"json": {"type": "t"}}, False),
    ("GET", "/v1/jobs/0", {}, False),
    ("GET", "/healthz", {}, False),
]


async def test_the_hot_path_answers_as_the_full_stack(
        pair: tuple[httpx.AsyncClient, httpx.AsyncClient, list[bool]]) -> None:
    hot, whole, took = pair
    for method, path, kwargs, is_hot in CASES:
        took.clear()
        a = await hot.request(method, path, **_for("sideA", kwargs))
        b = await whole.request(method, path, **_for("sideB", kwargs))
        assert took == [is_hot], (method, path)
        assert _answer(a, "sideA") == _answer(b, "sideB"), (method, path, a.text, b.text)
    # A lease's calls, with its id in the path: each side its own lease.
    for call, kwargs in (("heartbeat", {"json": {"extend_ms": 5000}}), ("ack", {"json": {"result": 1}}),
                         ("fail", {"json": {"error": "boom"}}), ("release", {})):
        answers = []
        for side, c in (("sideA", hot), ("sideB", whole)):
            lease = await _lease(c, f"q-{call}-{side}")
            answers.append(_answer(await c.post(f"/v1/leases/{lease}/{call}", **kwargs), side))
            # and again: the lease is gone now (409 lease_lost, or 200 for a heartbeat)
            answers.append(_answer(await c.post(f"/v1/leases/{lease}/{call}", **kwargs), side))
        assert answers[:2] == answers[2:], call
        assert answers[0][0] == 200, answers[0]


async def test_tokens_and_scopes_are_checked_alike(database_url: str) -> None:
    token = "admin-token-" + "x" * 20
    async with running_app(make_settings(database_url, admin_token=token)) as app:
        served, full, took = _sides(app)
        made: dict[str, dict[str, str]] = {}
        async with _client(served, {"Authorization": f"Bearer {token}"}) as admin:
            for name, role, queues in (("producer", "producer", "a.*"), ("worker", "worker", "*")):
                r = await admin.post("/v1/tokens", json={"role": role, "queues": queues})
                assert r.status_code == 201, r.text
                made[name] = {"Authorization": f"Bearer {r.json()['token']}"}
        cases: list[tuple[dict[str, str], str, dict[str, Any]]] = [
            ({}, "/v1/jobs", {"json": {"type": "t", "queue": "a.1"}}),  # no token
            ({"Authorization": "Bearer nope"}, "/v1/jobs", {"json": {"type": "t"}}),
            ({"Authorization": "Basic eDp5"}, "/v1/leases/x/ack", {}),
            (made["producer"], "/v1/jobs", {"json": {"type": "t", "queue": "a.1"}}),
            (made["producer"], "/v1/jobs", {"json": {"type": "t", "queue": "b"}}),  # outside a.*
            (made["producer"], "/v1/jobs/batch", {"json": {"jobs": [{"type": "t", "queue": "b"}]}}),
            (made["producer"], "/v1/leases", {"json": {"queues": ["a.1"], "worker_id": "w"}}),  # role
            (made["worker"], "/v1/jobs", {"json": {"type": "t"}}),  # role
            (made["worker"], "/v1/leases", {"json": {"queues": ["a.1"], "worker_id": "w"}}),
            (made["worker"], "/v1/leases/nope/ack", {}),
        ]
        async with _client(served) as hot, _client(full) as whole:
            for headers, path, kwargs in cases:
                took.clear()
                a = await hot.post(path, headers=headers, **kwargs)
                b = await whole.post(path, headers=headers, **kwargs)
                assert took == [True], path
                assert _answer(a) == _answer(b), (headers, path, a.text, b.text)
                assert a.status_code != 500, a.text


async def test_an_exception_no_handler_answers_is_the_500_problem_and_raised_on() -> None:
    router = APIRouter(prefix="/x", route_class=DirectRoute)

    @router.post("/{what}")
    async def create_job(what: str, request: Request) -> Response:  # a name with a rule
        if what == "bug":
            raise RuntimeError("a bug")
        if what == "emfile":
            raise OSError(24, "Too many open files")
        if what == "oserror":
            raise OSError(2, "No such file")
        return Response(what)

    app = JobqApp()
    app.state.settings = make_settings("postgresql://nobody@127.0.0.1:1/none")
    problems.install(app)
    app.include_router(router, dependencies=[Depends(guarded)])

    served, full, took = _sides(app)

    async def full_with_principal(scope: Any, receive: Any, send: Any) -> None:
        scope[SCOPE_KEY] = LOCAL  # what Authenticate leaves
        await full(scope, receive, send)

    async def hot_with_principal(scope: Any, receive: Any, send: Any) -> None:
        scope[SCOPE_KEY] = LOCAL
        await served(scope, receive, send)

    async with _client(hot_with_principal) as hot, _client(full_with_principal) as whole:
        for what in ("fine", "bug", "emfile", "oserror"):
            took.clear()
            a, b = await hot.post(f"/x/{what}"), await whole.post(f"/x/{what}")
            assert took == [True]
            assert _answer(a) == _answer(b), what
        assert (await hot.post("/x/bug")).status_code == 500
        assert (await hot.post("/x/emfile")).status_code == 503
    # raised on, for the server to log, on both sides
    for asgi in (hot_with_principal, full_with_principal):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi),
                                     base_url="http://t") as c:
            with pytest.raises(RuntimeError, match="a bug"):
                await c.post("/x/bug")


async def test_a_request_fastapis_telemetry_traces_takes_the_full_stack() -> None:
    """With an OpenTelemetry provider, FastAPI's telemetry records the route its router
    picks: such a request is left to the full stack."""
    from opentelemetry import trace

    class Provider(trace.TracerProvider):  # a configured provider (FastAPI skips a NoOp one)
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
            return trace.NoOpTracer()

    router = APIRouter(prefix="/x", route_class=DirectRoute)

    @router.post("/{what}")
    async def create_job(what: str, request: Request) -> Response:
        return Response(what)

    for telemetry, hot in ((None, True), ({"tracer_provider": Provider()}, False)):
        app = JobqApp(telemetry=telemetry)  # type: ignore[arg-type]
        problems.install(app)
        app.include_router(router, dependencies=[Depends(guarded)])
        served, _, took = _sides(app)

        async def with_principal(scope: Any, receive: Any, send: Any,
                                 served: ASGI = served) -> None:
            scope[SCOPE_KEY] = LOCAL
            await served(scope, receive, send)

        async with _client(with_principal) as c:
            r = await c.post("/x/fine")
        assert (r.status_code, r.text, took) == (200, "fine", [hot])


async def test_an_app_with_middleware_of_its_own_keeps_the_full_stack() -> None:
    """HotPaths builds the app's middleware a second time around a hot handler; it does so
    only for Authenticate and BodyLimit, which keep no state of their own. A middleware
    added beside them (its own collectors, its own counters) must exist once, so such an
    app answers every request through the full stack, and the middleware sees each."""
    router = APIRouter(prefix="/x", route_class=DirectRoute)

    @router.post("/{what}")
    async def create_job(what: str, request: Request) -> Response:
        return Response(what)

    made: list[int] = []
    seen: list[str] = []

    class Counting:
        def __init__(self, app: Any) -> None:
            made.append(1)
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append(scope["path"])
            await self.app(scope, receive, send)

    app = JobqApp()
    problems.install(app)
    app.include_router(router, dependencies=[Depends(guarded)])
    app.add_middleware(Counting)
    app.middleware_stack = app.build_middleware_stack()
    assert not isinstance(app.middleware_stack, HotPaths)
    assert made == [1]

    async def with_principal(scope: Any, receive: Any, send: Any) -> None:
        scope[SCOPE_KEY] = LOCAL
        await app(scope, receive, send)

    async with _client(with_principal) as client:
        answer = await client.post("/x/fine")
    assert (answer.status_code, answer.text) == (200, "fine")
    assert seen == ["/x/fine"] and made == [1]
