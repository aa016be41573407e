"""GET /v1/queues a page at a time (issue 24): cursor, limit, prefix, and scoped tokens."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from jobq.api.app import create_app
from jobq.core import tokens
from jobq.domain.access import Role
from tests.conftest import make_settings
from tests.helpers import problem, validation

pytestmark = pytest.mark.timeout(90)


def make_queues(database_url: str, sql_names: str) -> None:
    """Queues straight into the table (thousands of PATCHes would be the slow part)."""
    with psycopg.connect(database_url) as conn:
        conn.execute(f"INSERT INTO queues (name) SELECT n FROM ({sql_names}) AS s(n)")


async def walk(c: httpx.AsyncClient, headers: dict[str, str] | None = None,
               **params: Any) -> list[list[str]]:
    """Every page's names, following next_cursor to the end."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        r = await c.get("/v1/queues", params=query, headers=headers or {})
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"queues", "next_cursor"}
        pages.append([q["name"] for q in body["queues"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "the cursor does not end"


async def test_the_cursor_walks_every_queue_once_in_name_order(
        client: httpx.AsyncClient, database_url: str) -> None:
    make_queues(database_url, "SELECT 'q' || lpad(i::text, 4, '0') FROM generate_series(1, 250) i")
    pages = await walk(client, limit=100)
    assert [len(p) for p in pages] == [100, 100, 50]
    names = [n for p in pages for n in p]
    assert names == sorted(names) and len(set(names)) == 250
    assert names == [f"q{i:04d}" for i in range(1, 251)]
    # A page that ends exactly at the last queue says so: no empty page after it.
    assert [len(p) for p in await walk(client, limit=125)] == [125, 125]


async def test_without_a_cursor_a_client_gets_the_first_page_of_100(
        client: httpx.AsyncClient, database_url: str) -> None:
    make_queues(database_url, "SELECT 'q' || lpad(i::text, 4, '0') FROM generate_series(1, 150) i")
    r = await client.get("/v1/queues")
    assert r.status_code == 200, r.text
    body = r.json()
    assert [q["name"] for q in body["queues"]] == [f"q{i:04d}" for i in range(1, 101)]
    assert isinstance(body["next_cursor"], str)
    r = await client.get("/v1/queues", params={"limit": 1000})
    assert len(r.json()["queues"]) == 150 and r.json()["next_cursor"] is None


async def test_a_later_page_carries_its_queues_counts_and_lag(
        client: httpx.AsyncClient, database_url: str) -> None:
    make_queues(database_url, "SELECT 'a' || lpad(i::text, 3, '0') FROM generate_series(1, 30) i")
    for q, n in (("a005", 1), ("a025", 3)):
        for _ in range(n):
            r = await client.post("/v1/jobs", json={"type": "t", "queue": q})
            assert r.status_code == 201, r.text
    listed = {q["name"]: q for page in [await _pages(client, 10)] for q in page}
    lagless = lambda e: {k: v for k, v in e.items() if k != "oldest_waiting_ms"}  # noqa: E731 - it grows
    for name in ("a005", "a025", "a030"):
        assert lagless(listed[name]) == lagless((await client.get(f"/v1/queues/{name}")).json())
    assert listed["a025"]["counts"]["pending"] == 3
    assert listed["a025"]["waiting_by_type"] == {"t": 3}
    assert listed["a025"]["oldest_waiting_ms"] is not None
    assert listed["a030"]["oldest_waiting_ms"] is None


async def _pages(c: httpx.AsyncClient, limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        body = (await c.get("/v1/queues", params=params)).json()
        out += body["queues"]
        cursor = body["next_cursor"]
        if cursor is None:
            return out


async def test_a_prefix_lists_only_the_queues_whose_name_starts_with_it(
        client: httpx.AsyncClient, database_url: str) -> None:
    make_queues(database_url, "SELECT t || '-' || lpad(i::text, 2, '0') FROM generate_series(1, 20) i,"
                              " unnest(ARRAY['tenant', 'tenant-a', 'tenantb', 'other']) t")
    pages = await walk(client, limit=7, prefix="tenant-a")
    assert [len(p) for p in pages] == [7, 7, 6]
    assert [n for p in pages for n in p] == [f"tenant-a-{i:02d}" for i in range(1, 21)]
    found = [n for p in await walk(client, limit=1000, prefix="tenant") for n in p]
    assert len(found) == 60 and all(n.startswith("tenant") for n in found)
    assert await walk(client, prefix="nothing") == [[]]


@pytest.mark.parametrize("params", [
    {"limit": 0}, {"limit": 1001}, {"limit": "ten"}, {"limit": -1}, {"prefix": "bad name"},
    {"prefix": ""}, {"prefix": "x" * 200},
])
async def test_a_bad_limit_or_prefix_is_a_422(client: httpx.AsyncClient,
                                               params: dict[str, Any]) -> None:
    validation(await client.get("/v1/queues", params=params), "query", next(iter(params)))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize("cursor", [
    "not a cursor", "!!!!", "", _b64(b"id:12"), _b64(b"q:"), _b64(b"q:a\x00b"), _b64(b"\xff\xfe"),
    _b64(b"q:" + b"x" * 129), "x" * 201,
])
async def test_a_cursor_the_service_did_not_hand_out_is_a_422(
        client: httpx.AsyncClient, cursor: str) -> None:
    r = await client.get("/v1/queues", params={"cursor": cursor})
    if cursor == "":  # an empty cursor is no cursor: the first page
        assert r.status_code == 200, r.text
        return
    validation(r, "query", "cursor")


@pytest.fixture
async def secured(database_url: str) -> AsyncIterator[FastAPI]:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        _, admin = await tokens.create(app.state.ctx.db, Role.ADMIN, "*")
        await app.state.tokens.refresh()
        app.state.admin = admin
        yield app


async def test_a_scoped_token_pages_through_its_queues_only(
        secured: FastAPI, database_url: str) -> None:
    # Its queues are few and scattered among many others: filtering after the page was read
    # would hand it short or empty pages, and a cursor that stops early.
    make_queues(database_url, "SELECT 'q' || lpad(i::text, 4, '0') || CASE WHEN i % 10 = 0"
                              " THEN '-mine' ELSE '' END FROM generate_series(1, 500) i")
    _, scoped = await tokens.create(secured.state.ctx.db, Role.ADMIN, "*-mine")
    await secured.state.tokens.refresh()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=secured),
                                 base_url="http://jobq", timeout=30) as c:
        pages = await walk(c, {"Authorization": f"Bearer {scoped}"}, limit=20)
        assert [len(p) for p in pages] == [20, 20, 10]
        assert [n for p in pages for n in p] == [f"q{i:04d}-mine" for i in range(10, 501, 10)]
        # with a prefix too: only its queues that start with it
        mine = await walk(c, {"Authorization": f"Bearer {scoped}"}, prefix="q01")
        assert mine == [[f"q{i:04d}-mine" for i in range(100, 200, 10)]]
        everyone = await walk(c, {"Authorization": f"Bearer {secured.state.admin}"}, limit=1000)
        assert len(everyone[0]) == 500
        problem(await c.get("/v1/queues", params={"cursor": "%%%"},
                            headers={"Authorization": f"Bearer {scoped}"}), 422, "validation_error")


def _buffers(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> int:
    """Shared buffers (hit or read) the statement touched, from EXPLAIN (ANALYZE, BUFFERS)."""
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()[0][0]  # type: ignore[index]
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0))


def test_a_page_reads_a_few_buffers_per_queue_shown_at_10000_queues(database_url: str) -> None:
    """The first-page target of issue 24, checked by what the page's statements read (never
    by a clock): at 10,000 queues, each with jobs counted and waiting, a page of 10 touches a
    few buffers per queue it shows, where reading every queue's counters and lags (what
    the whole list did) touches hundreds to thousands."""
    from jobq.store.queries import Q

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO queues (name) SELECT 'q' || lpad(i::text, 5, '0') FROM generate_series(1, 10000) i")
        conn.execute("INSERT INTO jobs (queue, type, max_attempts) SELECT 'q' || lpad(i::text, 5, '0'), t, 3 "
                     "FROM generate_series(1, 10000) i, unnest(ARRAY['a', 'b']) t")
        conn.execute("ANALYZE")
        names = [f"q{i:05d}" for i in range(1, 11)]
        page = {
            "list": _buffers(conn, Q.QueuePage, {"after": None, "prefix": None, "scope": None, "limit": 11}),
            "counts": _buffers(conn, Q.QueuePageCounts, {"queues": names}),
            "lags": _buffers(conn, Q.QueuePageOldestWaiting, {"queues": names}),
        }
        whole = {
            "counts": _buffers(conn, Q.QueueCounts, {"queue": None}),
            "lags": _buffers(conn, Q.QueueOldestWaiting, {"queue": None}),
        }
    assert page["list"] <= 10, page
    assert page["counts"] <= 8 * len(names) and page["lags"] <= 12 * len(names), page
    assert page["counts"] * 5 < whole["counts"] and page["lags"] * 50 < whole["lags"], (page, whole)
