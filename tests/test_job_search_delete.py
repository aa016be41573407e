"""GET /v1/jobs?search= (a bounded scan of payloads and errors) and DELETE /v1/jobs/{id}
(issue 26: what Sidekiq's and Oban Web's users expect of a dashboard)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from jobq.core import jobs as core_jobs
from jobq.store import listing
from tests.conftest import app_with_tokens
from tests.helpers import claim, counts, enqueue, problem, validation

ADMIN_TOKEN = "search-test-admin-token-0123456789"


async def _page(c: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    r = await c.get("/v1/jobs", params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def _ids(c: httpx.AsyncClient, **params: Any) -> list[str]:
    return [j["id"] for j in (await _page(c, **params))["jobs"]]


async def _fail(c: httpx.AsyncClient, queue: str, error: str, **body: Any) -> dict[str, Any]:
    (lease,) = await claim(c, queue)
    r = await c.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": error, **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


# --- search ------------------------------------------------------------------------------------

async def test_search_finds_payload_text_and_errors_ignoring_case(client: httpx.AsyncClient) -> None:
    ada = await enqueue(client, queue="mail", payload={"to": "Ada@Example.com", "n": 1})
    await enqueue(client, queue="mail", payload={"to": "bob@example.org"})
    other_queue = await enqueue(client, queue="img", payload={"owner": "ada@example.com"})
    # a job whose error, not payload, names it: failed (live) and dead (finished, in the history)
    await enqueue(client, queue="err", payload={}, max_attempts=5)
    failed = await _fail(client, "err", "SMTP said: mailbox ADA@example.com full", retry_in_ms=3_600_000)
    await enqueue(client, queue="err2", payload={}, max_attempts=1)
    dead = await _fail(client, "err2", "gave up on ada@EXAMPLE.com")
    assert dead["status"] == "dead"

    found = await _ids(client, search="ada@example.COM")
    assert found == [dead["id"], failed["id"], other_queue["id"], ada["id"]]  # newest first
    # the other filters still apply
    assert await _ids(client, search="ada@example.com", queue="mail") == [ada["id"]]
    assert await _ids(client, search="ada@example.com", status="dead") == [dead["id"]]
    assert await _ids(client, search="ada@example.com", status="failed", queue="err") == [failed["id"]]
    assert await _ids(client, search="ada@example.com", type="nope") == []
    # the payload's JSON text, keys and numbers included, as PostgreSQL writes it
    assert await _ids(client, search='"n": 1') == [ada["id"]]
    assert await _ids(client, search="nobody@") == []


async def test_search_takes_like_wildcards_literally(client: httpx.AsyncClient) -> None:
    pct = await enqueue(client, queue="w", payload={"discount": "50%_off"})
    await enqueue(client, queue="w", payload={"discount": "50 pounds off"})
    assert await _ids(client, search="50%_") == [pct["id"]]
    assert await _ids(client, search="%") == [pct["id"]]
    assert await _ids(client, search="_") == [pct["id"]]


async def test_search_pages_with_the_cursor(client: httpx.AsyncClient) -> None:
    hits = []
    for i in range(5):
        hits.append((await enqueue(client, queue="p", payload={"order": f"needle-{i}"}))["id"])
        await enqueue(client, queue="p", payload={"order": f"hay-{i}"})
    first = await _page(client, search="NEEDLE", limit=2)
    assert [j["id"] for j in first["jobs"]] == hits[::-1][:2] and first["next_cursor"]
    await enqueue(client, queue="p", payload={"order": "needle-late"})  # does not shift later pages
    second = await _page(client, search="needle", limit=2, cursor=first["next_cursor"])
    assert [j["id"] for j in second["jobs"]] == hits[::-1][2:4]
    third = await _page(client, search="needle", limit=2, cursor=second["next_cursor"])
    assert [j["id"] for j in third["jobs"]] == hits[:1] and third["next_cursor"] is None


async def test_a_search_page_examines_a_bounded_number_of_jobs(client: httpx.AsyncClient,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Each page examines SEARCH_SCAN jobs at most: with 3, a match behind 7 others takes
    # three pages, the first two empty but with a cursor that goes on.
    monkeypatch.setattr(listing, "SEARCH_SCAN", 3)
    monkeypatch.setattr(core_jobs, "SEARCH_SCAN", 3)
    old = await enqueue(client, queue="s", payload={"k": "needle"})
    for i in range(7):
        await enqueue(client, queue="s", payload={"k": f"hay{i}"})
    pages = []
    cursor = None
    while True:
        page = await _page(client, search="needle", queue="s", **({"cursor": cursor} if cursor else {}))
        pages.append([j["id"] for j in page["jobs"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 10
    assert pages == [[], [], [old["id"]]]


async def test_search_is_validated(client: httpx.AsyncClient) -> None:
    validation(await client.get("/v1/jobs", params={"search": ""}), "query", "search")
    validation(await client.get("/v1/jobs", params={"search": "x" * 201}), "query", "search")
    validation(await client.get("/v1/jobs", params={"search": "a\x00b"}), "query", "search")
    assert (await client.get("/v1/jobs", params={"search": "x" * 200})).status_code == 200


# --- delete ------------------------------------------------------------------------------------

async def test_delete_a_job_in_any_status_but_running(client: httpx.AsyncClient) -> None:
    pending = await enqueue(client, queue="d", idempotency_key="k-pending")
    await enqueue(client, queue="d2", max_attempts=5)
    failed = await _fail(client, "d2", "boom", retry_in_ms=3_600_000)
    await enqueue(client, queue="d3", max_attempts=1)
    dead = await _fail(client, "d3", "boom")
    await enqueue(client, queue="d4")
    (lease,) = await claim(client, "d4")
    completed = (await client.post(f"/v1/leases/{lease['lease_id']}/ack")).json()
    cancelled = (await client.post(f"/v1/jobs/{(await enqueue(client, queue='d5'))['id']}/cancel")).json()
    statuses = [j["status"] for j in (pending, failed, dead, completed, cancelled)]
    assert statuses == ["pending", "failed", "dead", "completed", "cancelled"]
    for job in (pending, failed, dead, completed, cancelled):
        before = await counts(client, job["queue"])
        r = await client.delete(f"/v1/jobs/{job['id']}")
        assert r.status_code == 204 and r.content == b"", r.text
        problem(await client.get(f"/v1/jobs/{job['id']}"), 404, "not_found")
        after = await counts(client, job["queue"])
        assert after == {**before, job["status"]: before[job["status"]] - 1}  # the counts follow
        problem(await client.delete(f"/v1/jobs/{job['id']}"), 404, "not_found")
    # its idempotency key is free again: the same key makes a new job
    again = await enqueue(client, queue="d", idempotency_key="k-pending")
    assert again["id"] != pending["id"]


async def test_a_running_job_is_not_deleted(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="r")
    (lease,) = await claim(client, "r")
    problem(await client.delete(f"/v1/jobs/{job['id']}"), 409, "invalid_state")
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["status"] == "running"
    assert (await client.post(f"/v1/leases/{lease['lease_id']}/ack")).status_code == 200
    problem(await client.delete("/v1/jobs/999999999"), 404, "not_found")
    problem(await client.delete("/v1/jobs/not-a-job"), 404, "not_found")


async def test_delete_races_claims_and_never_both_wins(client: httpx.AsyncClient, database_url: str) -> None:
    """Each job is either deleted (204) or claimed (then the delete is 409), never both, and
    the counters agree with the rows."""
    n = 40
    jobs = [(await enqueue(client, queue="race"))["id"] for _ in range(n)]

    async def claim_one() -> list[str]:
        r = await client.post("/v1/leases", json={"worker_id": "w", "queues": ["race"], "limit": 1})
        assert r.status_code == 200, r.text
        return [le["job"]["id"] for le in r.json()["leases"]]

    tasks = [client.delete(f"/v1/jobs/{j}") for j in jobs] + [claim_one() for _ in range(n)]
    results = await asyncio.gather(*tasks)
    deletes: list[httpx.Response] = results[:n]  # type: ignore[assignment]
    claimed = {j for got in results[n:] for j in got}  # type: ignore[union-attr]
    for job_id, r in zip(jobs, deletes, strict=True):
        if r.status_code == 204:
            assert job_id not in claimed
        else:
            problem(r, 409, "invalid_state")
            assert job_id in claimed
    deleted = sum(r.status_code == 204 for r in deletes)
    assert deleted + len(claimed) == n and deleted > 0
    c = await counts(client, "race")
    assert c["running"] == len(claimed) and c["pending"] == 0
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM jobs WHERE queue = 'race'").fetchone() == (len(claimed),)


@pytest.fixture
async def secured(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, dict[str, str]]]]:
    tokens = {
        "producer": ("producer", "*"),
        "worker": ("worker", "*"),
        "admin_a": ("admin", "team-a.*"),
        "producer_a": ("producer", "team-a.*"),
    }
    async with app_with_tokens(database_url, ADMIN_TOKEN, tokens) as pair:
        yield pair


async def test_delete_is_an_admins_and_search_keeps_to_the_tokens_queues(
        secured: tuple[httpx.AsyncClient, dict[str, dict[str, str]]]) -> None:
    c, tokens = secured
    a = await enqueue(c, queue="team-a.x", payload={"find": "me"})
    b = await enqueue(c, queue="team-b.x", payload={"find": "me"})
    for name in ("producer", "worker"):
        problem(await c.delete(f"/v1/jobs/{a['id']}", headers=tokens[name]), 403, "forbidden")
    problem(await c.delete(f"/v1/jobs/{b['id']}", headers=tokens["admin_a"]), 404, "not_found")
    assert (await c.get(f"/v1/jobs/{b['id']}")).status_code == 200  # still there
    # a producer of team-a searches its own queues only
    r = await c.get("/v1/jobs", params={"search": "me"}, headers=tokens["producer_a"])
    assert [j["id"] for j in r.json()["jobs"]] == [a["id"]]
    r = await c.get("/v1/jobs", params={"search": "me"})
    assert [j["id"] for j in r.json()["jobs"]] == [b["id"], a["id"]]
    assert (await c.delete(f"/v1/jobs/{a['id']}", headers=tokens["admin_a"])).status_code == 204
