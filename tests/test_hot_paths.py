"""The endpoints that read their own body (jobq.api.bodies: enqueue, claim, heartbeat, ack,
fail) answer every body as a FastAPI body parameter of the same type would, and declare it
in the OpenAPI document as FastAPI would.

Each case goes to the app, and to a reference app with the same paths whose routes declare
the same bodies FastAPI's way (a body parameter) and the same exception handlers: where the
app finds the body wrong, both answers must be the same, error words included; where the
app accepts it, the reference must accept it too.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from fastapi import Body, FastAPI
from starlette.responses import Response

from jobq.api import problems
from jobq.api.app import create_app
from jobq.api.bodies import JsonBody
from jobq.api.routes import jobs, leases
from tests.conftest import make_settings

JSON = "application/json"

# Every body the routes read themselves, by the path it is sent to.
BODIES: dict[str, JsonBody[Any]] = {
    "/v1/jobs": jobs.CREATE,
    "/v1/jobs/batch": jobs.CREATE_MANY,
    "/v1/leases": leases.CLAIM,
    "/v1/leases/ack": leases.ACK_MANY,
    "/v1/leases/{lease_id}/heartbeat": leases.HEARTBEAT,
    "/v1/leases/{lease_id}/ack": leases.ACK,
    "/v1/leases/{lease_id}/fail": leases.FAIL,
}


def _accepting(path: str, body: JsonBody[Any]) -> Any:
    """An endpoint taking ``body`` as FastAPI's body parameter, answering 204 once it is valid."""
    async def endpoint(**_: Any) -> Response:
        return Response(status_code=204)

    params = [inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, annotation=body.annotation,
                                default=Body() if body.required else Body(default=None))]
    if "{lease_id}" in path:
        params.append(inspect.Parameter("lease_id", inspect.Parameter.KEYWORD_ONLY, annotation=str))
    endpoint.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return endpoint


def reference_app() -> FastAPI:
    app = FastAPI()
    problems.install(app)
    for path, body in BODIES.items():
        app.post(path, status_code=204)(_accepting(path, body))
    return app


@pytest.fixture
async def clients(app: FastAPI) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    def client(a: FastAPI) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://jobq")

    async with client(app) as ours, client(reference_app()) as reference:
        yield ours, reference


async def lease(c: httpx.AsyncClient, queue: str = "hot") -> str:
    r = await c.post("/v1/jobs", json={"queue": queue, "type": "t"})
    assert r.status_code == 201, r.text
    r = await c.post("/v1/leases", json={"queues": [queue], "worker_id": "w"})
    assert r.status_code == 200, r.text
    return str(r.json()["leases"][0]["lease_id"])


async def send(c: httpx.AsyncClient, path: str, body: bytes | None,
               content_type: str | None) -> httpx.Response:
    headers = {"content-type": content_type} if content_type else {}
    return await c.post(path, content=body, headers=headers)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIMES = {"created_at", "visible_at", "locked_until", "completed_at", "at"}


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<time>" if k in _TIMES and v is not None else _normal(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<id>", value)
    return value


def _answer(r: httpx.Response) -> tuple[Any, ...]:
    body: Any = r.content
    if r.headers.get("content-type", "").endswith("json"):
        # The standard library's parser: orjson would read a wide integer as a float, and
        # hide a difference.
        body = _normal(json.loads(r.content))
    return (r.status_code, r.headers.get("content-type"), body)


CASES: list[tuple[str, bytes | None, str | None]] = [
    # valid bodies
    ("/v1/jobs", b'{"type": "t", "payload": {"a": [1, 2.5, "x", null, true]}, "priority": 3}', JSON),
    ("/v1/jobs", b'{"type": "t", "idempotency_key": "k"}', JSON),
    ("/v1/jobs", b'{"type": "t", "delay_ms": 60000, "max_attempts": 2}', JSON),
    ("/v1/jobs", b'{"type": "t"}', "application/json; charset=utf-8"),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "a"}, {"type": "b", "queue": "other"}]}', JSON),
    ("/v1/leases", b'{"queues": ["hot", "none"], "worker_id": "w", "limit": 5}', JSON),
    ("/v1/leases", b'{"queues": ["empty"], "worker_id": "w", "wait_ms": 0}', JSON),
    ("/v1/leases/{lease}/ack", b'{"result": {"ok": [1, 2]}}', JSON),
    ("/v1/leases/{lease}/ack", b"null", JSON),
    ("/v1/leases/{lease}/ack", b"", JSON),
    ("/v1/leases/{lease}/fail", b'{"error": "boom", "retry_in_ms": 1000}', JSON),
    ("/v1/leases/{lease}/fail", b'{"error": "boom", "retry": false}', JSON),
    ("/v1/leases/{lease}/heartbeat", b'{"extend_ms": 5000}', JSON),
    ("/v1/leases/{lease}/heartbeat", b"{}", JSON),
    ("/v1/leases/ack", b'{"acks": [{"lease_id": "nope"}]}', JSON),
    # domain errors, raised by the handlers: the problem table on both sides
    ("/v1/leases/nope/ack", b"{}", JSON),
    ("/v1/leases/nope/fail", b'{"error": "x"}', JSON),
    ("/v1/leases/nope/heartbeat", b"{}", JSON),
    ("/v1/jobs", b'{"type": "t", "payload": {"s": "a\\u0000b"}}', JSON),
    # times are RFC 3339 text in the strict models, on both ways alike
    ("/v1/jobs", b'{"type": "t", "run_at": "2030-01-01T02:00:00+02:00"}', JSON),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "t", "run_at": "0001-01-01T00:00:00Z"}]}', JSON),
    # numbers orjson would round, text it refuses, bodies that are not JSON or not valid
    ("/v1/jobs", b'{"type": "t", "payload": {"id": "12345678901234567890123"}}', JSON),
    ("/v1/jobs", b'{"type": "t", "payload": {"big": 123456789012345678901234567890}}', JSON),
    ("/v1/jobs", b'{"type": "t", "payload": {"neg": -9223372036854775809}}', JSON),
    ("/v1/jobs", b'{"type": "t", "payload": {"x": NaN}}', JSON),
    ("/v1/jobs", b'{"type": "t", "payload": {"x": 1e400}}', JSON),
    ("/v1/jobs", b'{"type": "\\ud800"}', JSON),
    ("/v1/jobs", b'{"type": "t",', JSON),
    ("/v1/jobs", b'\xff\xfe{"type": "t"}', JSON),
    ("/v1/jobs", b'{"type": "t", "colour": "red"}', JSON),
    ("/v1/jobs", b'{"type": 5}', JSON),
    ("/v1/jobs", b'{"type": "t", "delay_ms": 1, "run_at": "2030-01-01T00:00:00Z"}', JSON),
    ("/v1/jobs", b"[]", JSON),
    ("/v1/jobs", b"null", JSON),
    ("/v1/jobs", b"", JSON),
    ("/v1/jobs", b'{"type": "t"}', "text/plain"),
    ("/v1/jobs", b'{"type": "t"}', "application/vnd.jobq+json"),
    ("/v1/jobs", b'{"type": "t"}', None),
    ("/v1/leases", b'{"queues": [], "worker_id": "w"}', JSON),
    ("/v1/leases", b'{"queues": ["q"], "worker_id": "w", "limit": 0}', JSON),
    ("/v1/leases", b"{}", JSON),
    ("/v1/leases/{lease}/ack", b'{"result": 1, "extra": 2}', JSON),
    ("/v1/leases/{lease}/ack", b"[1]", JSON),
    ("/v1/leases/{lease}/heartbeat", b'{"extend_ms": 5}', JSON),
    ("/v1/leases/{lease}/fail", b'{"retry": "maybe"}', JSON),
    # no coercion, times outside years 1-9999 in UTC, fail without an error: 422 both ways
    ("/v1/jobs", b'{"type": "t", "priority": "1"}', JSON),
    ("/v1/jobs", b'{"type": "t", "priority": 1.0}', JSON),
    ("/v1/jobs", b'{"type": "t", "run_at": 123}', JSON),
    ("/v1/jobs", b'{"type": "t", "run_at": "123"}', JSON),
    ("/v1/jobs", b'{"type": "t", "run_at": "9999-12-31T23:59:59-14:00"}', JSON),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "t", "run_at": "0001-01-01T00:00:00+14:00"}]}', JSON),
    # the keys of topic publishes and schedule fires are not a producer's (422 both ways)
    ("/v1/jobs", b'{"type": "t", "idempotency_key": "topic:o/k"}', JSON),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "t", "idempotency_key": "schedule:n:2030-01-01T00:00:00Z"}]}',
     JSON),
    ("/v1/leases", b'{"queues": ["q"], "worker_id": "w", "limit": "1"}', JSON),
    ("/v1/leases", b'{"queues": ["q"], "worker_id": "w", "wait_ms": false}', JSON),
    ("/v1/leases/{lease}/heartbeat", b'{"extend_ms": "5000"}', JSON),
    ("/v1/leases/{lease}/fail", b'{"retry": false}', JSON),
    ("/v1/leases/{lease}/fail", b"", JSON),
    ("/v1/leases/{lease}/fail", b'{"error": "e", "retry": 0}', JSON),
    ("/v1/leases/ack", b'{"acks": []}', JSON),
    ("/v1/jobs", b"[" * 5000 + b"]" * 5000, JSON),
    ("/v1/jobs", b"  ", JSON),
    ("/v1/leases/ack", b'{"acks": [{"lease_id": "x"}]}', "application/json;charset=UTF-8"),
]


# Valid bodies the core refuses, 422 all the same: PostgreSQL stores no NUL in text, and JSON
# has no NaN or infinity (Python's parser reads them).
REFUSED_BY_THE_HANDLER = {b'{"type": "t", "payload": {"s": "a\\u0000b"}}',
                          b'{"type": "t", "payload": {"x": NaN}}',
                          b'{"type": "t", "payload": {"x": 1e400}}'}


@pytest.mark.parametrize(("path", "body", "content_type"), CASES)
async def test_bodies_are_read_as_fastapi_reads_them(
        clients: tuple[httpx.AsyncClient, httpx.AsyncClient], path: str, body: bytes | None,
        content_type: str | None) -> None:
    ours, reference = clients
    target = path.replace("{lease}", await lease(ours)) if "{lease}" in path else path
    answer = _answer(await send(ours, target, body, content_type))
    theirs = _answer(await send(reference, target, body, content_type))
    if theirs[0] == 204:  # a valid body: accepted, or refused by the handler for its content
        assert answer[0] != 422 or body in REFUSED_BY_THE_HANDLER, answer
    else:
        assert answer == theirs


def test_the_document_declares_the_bodies_as_fastapi_does(app: FastAPI) -> None:
    ours, theirs = app.openapi(), reference_app().openapi()
    for path in BODIES:
        declared = ours["paths"][path]["post"]["requestBody"]
        for media in declared["content"].values():
            media.pop("example", None)  # ours only: jobq.api.examples
        assert declared == theirs["paths"][path]["post"]["requestBody"], path
    for name, schema in theirs["components"]["schemas"].items():
        if name not in ("HTTPValidationError", "ValidationError"):
            assert ours["components"]["schemas"][name] == schema, name


PAYLOADS = [
    {"f": [2.5, -0.0, 1e-7, 123456.789], "s": "x" * 5000, "u": "ünï \u2603 \U0001f600"},
    {"wide": 123456789012345678901234567890, "neg": -9223372036854775809},
    {"nested": {"a": [{"b": [None, True, False]}]}, "id": "9" * 25},
]


async def test_claims_give_back_the_payloads_enqueued(client: httpx.AsyncClient) -> None:
    """Wide integers, floats, text: what orjson would round is read by the standard library,
    stored, and given back as sent."""
    for payload in PAYLOADS:
        r = await client.post("/v1/jobs", content=json.dumps({
            "type": "t", "queue": "c", "payload": payload}), headers={"content-type": JSON})
        assert r.status_code == 201, r.text
    r = await send(client, "/v1/leases", b'{"queues": ["c"], "worker_id": "w", "limit": 10}', JSON)
    claimed = _answer(r)[2]["leases"]
    assert [le["job"]["payload"] for le in claimed] == _normal(PAYLOADS)


async def test_a_long_poll_is_woken_by_an_enqueue(client: httpx.AsyncClient) -> None:
    woken = asyncio.create_task(send(
        client, "/v1/leases", b'{"queues": ["lp"], "worker_id": "w", "wait_ms": 5000}', JSON))
    await client.post("/v1/jobs", json={"type": "t", "queue": "lp"})
    r = await asyncio.wait_for(woken, 5)
    assert r.status_code == 200 and len(r.json()["leases"]) == 1
    r = await send(client, "/v1/leases", b'{"queues": ["lp"], "worker_id": "w", "wait_ms": 200}', JSON)
    assert r.json() == {"leases": []}


async def test_a_body_over_the_limit_is_refused_while_it_streams(database_url: str) -> None:
    app = create_app(make_settings(database_url, max_body_bytes=1024))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://jobq") as c:
            big = orjson.dumps({"type": "t", "payload": {"x": "y" * 2000}})

            async def chunks() -> AsyncIterator[bytes]:
                # No Content-Length: the limit must hold while the body streams in.
                for i in range(0, len(big), 100):
                    yield big[i:i + 100]

            r = await c.post("/v1/jobs", content=chunks(), headers={"content-type": JSON})
            assert r.status_code == 413
            assert r.json()["code"] == "payload_too_large"
            assert (await c.get("/v1/jobs")).json()["jobs"] == []
