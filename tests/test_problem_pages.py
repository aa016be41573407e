"""Error `type` URIs resolve: every problem+json answer points at /problems/{code}, a page the
service itself serves, without a token (issue 15)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urljoin

import httpx
import pytest
from fastapi import FastAPI

from jobq.api.app import create_app
from jobq.api.problems import CODES, KINDS
from jobq.core import tokens
from jobq.domain.access import Role
from tests.conftest import make_settings
from tests.helpers import problem

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("code", list(KINDS))
async def test_every_code_has_a_page_in_html_and_in_json(client: httpx.AsyncClient, code: str) -> None:
    kind = KINDS[code]
    r = await client.get(f"/problems/{code}")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert f"<code>{code}</code>" in r.text and kind.title in r.text
    for status in kind.statuses:
        assert str(status) in r.text
    assert "What it means" in r.text and "What to do" in r.text
    r = await client.get(f"/problems/{code}", headers={"Accept": "application/json"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    assert r.json() == {"type": f"/problems/{code}", "code": code, "title": kind.title,
                        "statuses": list(kind.statuses), "meaning": kind.meaning,
                        "action": kind.action}


def test_the_table_covers_the_documented_codes() -> None:
    assert set(CODES) == set(KINDS)
    for code, kind in KINDS.items():
        assert kind.title and kind.statuses and kind.meaning and kind.action, code
        assert all(400 <= s <= 599 for s in kind.statuses), code


async def test_an_unknown_code_is_a_404_problem(client: httpx.AsyncClient) -> None:
    body = problem(await client.get("/problems/no_such_code"), 404, "not_found")
    assert "no_such_code" in body["detail"] and "queue_full" in body["detail"]
    problem(await client.get("/problems/queue_full?x=1"), 422, "validation_error")


async def _follow(client: httpx.AsyncClient, r: httpx.Response, status: int, code: str) -> None:
    body = problem(r, status, code)
    assert body["type"] == f"/problems/{code}"  # relative: resolves on this very service
    assert body["title"] == KINDS[code].title
    assert status in KINDS[code].statuses
    page = await client.get(urljoin(str(r.url), body["type"]), headers={"Accept": "application/json"})
    assert page.status_code == 200 and page.json()["code"] == code, page.text


async def test_the_type_of_real_answers_resolves_to_their_page(client: httpx.AsyncClient) -> None:
    await _follow(client, await client.get("/v1/jobs/nope"), 404, "not_found")
    await _follow(client, await client.post("/v1/jobs", json={"type": 5}), 422, "validation_error")
    await _follow(client, await client.delete("/v1/jobs"), 405, "method_not_allowed")
    r = await client.post("/v1/jobs", content=b"x" * (2 * 1024 * 1024),
                          headers={"content-type": "application/json"})
    await _follow(client, r, 413, "payload_too_large")
    r = await client.patch("/v1/queues/pp", json={"max_depth": 0})
    assert r.status_code == 200, r.text
    await _follow(client, await client.post("/v1/jobs", json={"type": "t", "queue": "pp"}),
                  429, "queue_full")


@pytest.fixture
async def secured(database_url: str) -> AsyncIterator[FastAPI]:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        await tokens.create(app.state.ctx.db, Role.ADMIN, "*")
        await app.state.tokens.refresh()
        yield app


async def test_pages_need_no_token_once_tokens_exist_and_open_nothing_deeper(secured: FastAPI) -> None:
    transport = httpx.ASGITransport(app=secured)
    async with httpx.AsyncClient(transport=transport, base_url="http://jobq") as c:
        r = await c.get("/v1/jobs/x")
        body = problem(r, 401, "unauthorized")
        page = await c.get(urljoin(str(r.url), body["type"]))
        assert page.status_code == 200 and "Unauthorized" in page.text
        assert "www-authenticate" not in page.headers
        problem(await c.get("/problems/nope"), 404, "not_found")
        for path in ("/problems/", "/problems/queue_full/x", "/problems"):
            r = await c.get(path)
            assert r.status_code == 401, (path, r.text)
            problem(r, 401, "unauthorized")
