"""The hot paths (jobq.api.hot) answer exactly as FastAPI's routes do.

Each case runs twice, on two apps over two databases cloned from one template: one app
serves the worker and producer POSTs through the hot paths, the other through FastAPI's
routing only. The answers must be the same, but for ids and times: status, content type,
the headers a client reads, and the body, error details included.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from jobq.api.app import create_app
from tests import pg
from tests.conftest import make_settings
from tests.helpers import long_polls_idle

JSON = "application/json"


class Side:
    """One app and its client; ``lease`` claims a fresh job to act on."""

    def __init__(self, client: httpx.AsyncClient, app: FastAPI) -> None:
        self.client = client
        self.app = app
        self.n = 0

    async def lease(self, queue: str = "hot") -> str:
        r = await self.client.post("/v1/jobs", json={"queue": queue, "type": "t"})
        assert r.status_code == 201, r.text
        r = await self.client.post("/v1/leases", json={"queues": [queue], "worker_id": "w"})
        assert r.status_code == 200, r.text
        return str(r.json()["leases"][0]["lease_id"])

    async def target(self, path: str) -> str:
        return path.replace("{lease}", await self.lease()) if "{lease}" in path else path

    async def send(self, path: str, body: bytes | None, content_type: str | None) -> httpx.Response:
        headers = {"content-type": content_type} if content_type else {}
        return await self.client.post(path, content=body, headers=headers)


@pytest.fixture
async def sides(admin_url: str, template_db: str,
                passed_on: list[str]) -> AsyncIterator[tuple[Side, Side]]:
    names = [pg.clone(admin_url, template_db) for _ in range(2)]
    try:
        apps = [create_app(make_settings(pg.with_database(admin_url, n)), hot_paths=hot)
                for n, hot in zip(names, (True, False), strict=True)]
        async with (apps[0].router.lifespan_context(apps[0]),
                    apps[1].router.lifespan_context(apps[1])):
            clients = [httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://jobq")
                       for a in apps]
            async with clients[0], clients[1]:
                yield Side(clients[0], apps[0]), Side(clients[1], apps[1])
    finally:
        for n in names:
            pg.drop(admin_url, n)


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
        # hide the difference this test is for.
        body = _normal(json.loads(r.content))
    return (r.status_code, r.headers.get("content-type"), _normal(r.headers.get("location")),
            r.headers.get("retry-after"), body)


CASES: list[tuple[str, bytes | None, str | None, bool]] = [
    # answered by the hot paths
    ("/v1/jobs", b'{"type": "t", "payload": {"a": [1, 2.5, "x", null, true]}, "priority": 3}', JSON, True),
    ("/v1/jobs", b'{"type": "t", "idempotency_key": "k"}', JSON, True),
    ("/v1/jobs", b'{"type": "t", "delay_ms": 60000, "max_attempts": 2}', JSON, True),
    ("/v1/jobs", b'{"type": "t"}', "application/json; charset=utf-8", True),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "a"}, {"type": "b", "queue": "other"}]}', JSON, True),
    ("/v1/leases", b'{"queues": ["hot", "none"], "worker_id": "w", "limit": 5}', JSON, True),
    ("/v1/leases", b'{"queues": ["empty"], "worker_id": "w", "wait_ms": 0}', JSON, True),
    ("/v1/leases/{lease}/ack", b'{"result": {"ok": [1, 2]}}', JSON, True),
    ("/v1/leases/{lease}/ack", b"null", JSON, True),
    ("/v1/leases/{lease}/ack", b"", JSON, True),
    ("/v1/leases/{lease}/fail", b'{"error": "boom", "retry_in_ms": 1000}', JSON, True),
    ("/v1/leases/{lease}/fail", b'{"error": "boom", "retry": false}', JSON, True),
    ("/v1/leases/{lease}/heartbeat", b'{"extend_ms": 5000}', JSON, True),
    ("/v1/leases/{lease}/heartbeat", b"{}", JSON, True),
    ("/v1/leases/ack", b'{"acks": [{"lease_id": "nope"}]}', JSON, True),
    # domain errors, raised by the handlers: the problem table on both sides
    ("/v1/leases/nope/ack", b"{}", JSON, True),
    ("/v1/leases/nope/fail", b'{"error": "x"}', JSON, True),
    ("/v1/leases/nope/heartbeat", b"{}", JSON, True),
    ("/v1/jobs", b'{"type": "t", "payload": {"s": "a\\u0000b"}}', JSON, True),
    # times are RFC 3339 text in the strict models, on both ways alike
    ("/v1/jobs", b'{"type": "t", "run_at": "2030-01-01T02:00:00+02:00"}', JSON, True),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "t", "run_at": "0001-01-01T00:00:00Z"}]}', JSON, True),
    # passed on to FastAPI: every error answer is its
    ("/v1/jobs", b'{"type": "t", "payload": {"id": "12345678901234567890123"}}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "payload": {"big": 123456789012345678901234567890}}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "payload": {"neg": -9223372036854775809}}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "payload": {"x": NaN}}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "payload": {"x": 1e400}}', JSON, False),
    ("/v1/jobs", b'{"type": "\\ud800"}', JSON, False),
    ("/v1/jobs", b'{"type": "t",', JSON, False),
    ("/v1/jobs", b'\xff\xfe{"type": "t"}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "colour": "red"}', JSON, False),
    ("/v1/jobs", b'{"type": 5}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "delay_ms": 1, "run_at": "2030-01-01T00:00:00Z"}', JSON, False),
    ("/v1/jobs", b"[]", JSON, False),
    ("/v1/jobs", b"null", JSON, False),
    ("/v1/jobs", b"", JSON, False),
    ("/v1/jobs", b'{"type": "t"}', "text/plain", False),
    ("/v1/jobs", b'{"type": "t"}', "application/vnd.jobq+json", False),
    ("/v1/jobs", b'{"type": "t"}', None, False),
    ("/v1/jobs/", b'{"type": "t"}', JSON, False),
    ("/v1/leases", b'{"queues": [], "worker_id": "w"}', JSON, False),
    ("/v1/leases", b'{"queues": ["q"], "worker_id": "w", "limit": 0}', JSON, False),
    ("/v1/leases", b"{}", JSON, False),
    ("/v1/leases/{lease}/ack", b'{"result": 1, "extra": 2}', JSON, False),
    ("/v1/leases/{lease}/ack", b"[1]", JSON, False),
    ("/v1/leases/{lease}/heartbeat", b'{"extend_ms": 5}', JSON, False),
    ("/v1/leases/{lease}/fail", b'{"retry": "maybe"}', JSON, False),
    # no coercion, times outside years 1-9999 in UTC, fail without an error: 422 both ways
    ("/v1/jobs", b'{"type": "t", "priority": "1"}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "priority": 1.0}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "run_at": 123}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "run_at": "123"}', JSON, False),
    ("/v1/jobs", b'{"type": "t", "run_at": "9999-12-31T23:59:59-14:00"}', JSON, False),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "t", "run_at": "0001-01-01T00:00:00+14:00"}]}', JSON, False),
    # the keys of topic publishes and schedule fires are not a producer's (422 both ways)
    ("/v1/jobs", b'{"type": "t", "idempotency_key": "topic:o/k"}', JSON, False),
    ("/v1/jobs/batch", b'{"jobs": [{"type": "t", "idempotency_key": "schedule:n:2030-01-01T00:00:00Z"}]}',
     JSON, False),
    ("/v1/leases", b'{"queues": ["q"], "worker_id": "w", "limit": "1"}', JSON, False),
    ("/v1/leases", b'{"queues": ["q"], "worker_id": "w", "wait_ms": false}', JSON, False),
    ("/v1/leases/{lease}/heartbeat", b'{"extend_ms": "5000"}', JSON, False),
    ("/v1/leases/{lease}/fail", b'{"retry": false}', JSON, False),
    ("/v1/leases/{lease}/fail", b"", JSON, False),
    ("/v1/leases/{lease}/fail", b'{"error": "e", "retry": 0}', JSON, False),
    ("/v1/leases/ack", b'{"acks": []}', JSON, False),
    ("/v1/leases//ack", b"{}", JSON, False),
    ("/v1/leases/x/unknown", b"{}", JSON, False),
]


@pytest.mark.parametrize(("path", "body", "content_type", "answered_hot"), CASES)
async def test_hot_and_fastapi_answer_alike(sides: tuple[Side, Side], passed_on: list[str],
                                            path: str, body: bytes | None,
                                            content_type: str | None, answered_hot: bool) -> None:
    hot, plain = sides
    answers = []
    for side in (hot, plain):
        target = await side.target(path)
        before = len(passed_on)
        answers.append(_answer(await side.send(target, body, content_type)))
        if side is hot:
            assert (len(passed_on) == before) is answered_hot, "answered the other way"
    assert answers[0] == answers[1]


PAYLOADS = [
    {"f": [2.5, -0.0, 1e-7, 123456.789], "s": "x" * 5000, "u": "ünï \u2603 \U0001f600"},
    {"wide": 123456789012345678901234567890, "neg": -9223372036854775809},
    {"nested": {"a": [{"b": [None, True, False]}]}, "id": "9" * 25},
]


async def test_claims_of_stored_jobs_answer_alike(sides: tuple[Side, Side],
                                                  passed_on: list[str]) -> None:
    """Claims that return jobs: rendered rows, read back through the jsonb loader."""
    answers = []
    for side in sides:
        for payload in PAYLOADS:
            r = await side.client.post("/v1/jobs", content=json.dumps({
                "type": "t", "queue": "c", "payload": payload}), headers={"content-type": JSON})
            assert r.status_code == 201, r.text
        before = len(passed_on)
        r = await side.send("/v1/leases", b'{"queues": ["c"], "worker_id": "w", "limit": 10}', JSON)
        if side is sides[0]:
            assert len(passed_on) == before
        answers.append(_answer(r))
    assert answers[0] == answers[1]
    claimed = answers[0][4]["leases"]
    assert [le["job"]["payload"] for le in claimed] == _normal(PAYLOADS)


async def test_long_polls_answer_alike(sides: tuple[Side, Side]) -> None:
    """A long-poll that an enqueue wakes, and one that runs out of time."""
    for side in sides:
        woken = asyncio.create_task(side.send(
            "/v1/leases", b'{"queues": ["lp"], "worker_id": "w", "wait_ms": 5000}', JSON))
        await long_polls_idle(side.app, "lp")
        assert not woken.done()
        await side.client.post("/v1/jobs", json={"type": "t", "queue": "lp"})
        r = await asyncio.wait_for(woken, 5)
        assert r.status_code == 200 and len(r.json()["leases"]) == 1
    empty = [_answer(await side.send(
        "/v1/leases", b'{"queues": ["lp"], "worker_id": "w", "wait_ms": 200}', JSON))
        for side in sides]
    assert empty[0] == empty[1]
    assert empty[0][4] == {"leases": []}


async def test_replayed_sequence_leaves_both_databases_alike(sides: tuple[Side, Side]) -> None:
    """A producer's and a worker's whole conversation, with a retry and a replay: the jobs
    both sides end with are the same."""
    for side in sides:
        c = side.client
        for i in range(3):
            r = await c.post("/v1/jobs", json={"queue": "seq", "type": "t", "payload": {"i": i % 2},
                                               "idempotency_key": f"k{i % 2}"})
            assert r.status_code in (200, 201)
        r = await c.post("/v1/leases", json={"queues": ["seq"], "worker_id": "w", "limit": 10})
        leases = r.json()["leases"]
        await c.post(f"/v1/leases/{leases[0]['lease_id']}/fail", json={"error": "e", "retry": False})
        await c.post("/v1/leases/ack", json={"acks": [{"lease_id": le["lease_id"], "result": 7}
                                                      for le in leases[1:]]})
    listed = [_normal((await side.client.get("/v1/jobs?queue=seq")).json()) for side in sides]
    assert listed[0] == listed[1]
    assert sorted(j["status"] for j in listed[0]["jobs"]) == ["completed", "dead"]


async def test_a_body_over_the_limit_is_refused_on_the_hot_path(database_url: str,
                                                                 passed_on: list[str]) -> None:
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
            assert passed_on == []  # refused while the hot path read it
            assert (await c.get("/v1/jobs")).json()["jobs"] == []
