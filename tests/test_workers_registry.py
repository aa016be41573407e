"""Worker processes that report themselves (issue 26): POST /v1/workers/{worker_id}/beat,
and GET /v1/workers listing beating workers (idle ones too) merged with those seen from jobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest

from jobq.core import activity, duties
from tests.conftest import app_with_tokens, make_settings, running_app
from tests.helpers import enqueue, problem, ts, validation
from tests.waiting import aeventually

ADMIN_TOKEN = "workers-test-admin-token-0123456789"

FULL = {"host": "box-1", "pid": 4242, "concurrency": 8, "queues": ["mail", "img"],
        "in_flight": 3, "started_at": "2026-01-15T09:30:00Z", "state": "running"}


def _by_id(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["worker_id"]: w for w in body["workers"]}


async def _workers(c: httpx.AsyncClient, **params: Any) -> dict[str, dict[str, Any]]:
    r = await c.get("/v1/workers", params=params)
    assert r.status_code == 200, r.text
    return _by_id(r.json())


async def test_an_idle_worker_that_beats_is_listed_with_what_it_said(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/workers/box-1-4242/beat", json=FULL)
    assert r.status_code == 200, r.text
    beat = r.json()
    assert beat["worker_id"] == "box-1-4242" and beat["host"] == "box-1" and beat["pid"] == 4242
    assert beat["queues"] == ["mail", "img"] and beat["state"] == "running"
    assert ts(beat["started_at"]) == ts("2026-01-15T09:30:00Z") and beat["last_seen_at"].endswith("Z")

    # It holds no job and finished none: before beats it was invisible; now it is listed.
    w = (await _workers(client))["box-1-4242"]
    assert w == {"worker_id": "box-1-4242", "running": 0, "queues": ["img", "mail"],
                 "last_seen_at": beat["last_seen_at"], "host": "box-1", "pid": 4242,
                 "concurrency": 8, "in_flight": 3, "started_at": beat["started_at"],
                 "state": "running"}


async def test_beats_merge_with_the_workers_seen_from_jobs(client: httpx.AsyncClient) -> None:
    for _ in range(2):
        await enqueue(client, queue="mail")
    await enqueue(client, queue="other")
    for worker, queue in (("w-a", "mail"), ("w-a", "mail"), ("w-jobs-only", "other")):
        r = await client.post("/v1/leases", json={"worker_id": worker, "queues": [queue]})
        assert len(r.json()["leases"]) == 1, r.text
    r = await client.post("/v1/workers/w-a/beat", json={"host": "h", "queues": ["img"], "in_flight": 2})
    assert r.status_code == 200, r.text

    workers = await _workers(client)
    assert workers.keys() == {"w-a", "w-jobs-only"}  # one entry per worker, not one per source
    a = workers["w-a"]
    assert a["running"] == 2 and a["in_flight"] == 2 and a["host"] == "h"
    assert a["queues"] == ["img", "mail"]  # what it said, and what its jobs say
    only = workers["w-jobs-only"]
    assert only["running"] == 1 and only["queues"] == ["other"]
    assert [only[k] for k in ("host", "pid", "concurrency", "in_flight", "started_at", "state")] == [None] * 6


async def test_a_beat_keeps_what_earlier_beats_said(client: httpx.AsyncClient, database_url: str) -> None:
    first = (await client.post("/v1/workers/w/beat", json=FULL)).json()
    with psycopg.connect(database_url, autocommit=True) as conn:  # as if that beat were a minute old
        conn.execute("UPDATE workers SET last_seen_at = now() - interval '1 minute'")
    r = await client.post("/v1/workers/w/beat", json={"state": "stopping", "in_flight": 0})
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["state"] == "stopping" and second["in_flight"] == 0
    kept = (second["host"], second["pid"], second["concurrency"], second["queues"])
    assert kept == ("box-1", 4242, 8, ["mail", "img"])
    assert second["last_seen_at"] > first["last_seen_at"]
    # no body at all is a beat too
    r = await client.post("/v1/workers/w/beat")
    assert r.status_code == 200 and r.json()["state"] == "stopping"
    # a worker's first beat may say nothing about itself
    r = await client.post("/v1/workers/bare/beat", json={})
    assert r.status_code == 200, r.text
    assert r.json()["queues"] == [] and r.json()["host"] is None
    assert (await _workers(client))["bare"]["state"] is None


async def test_a_worker_id_with_a_slash_is_one_worker(client: httpx.AsyncClient) -> None:
    worker = "pod/jobq-7f9c:12"
    r = await client.post(f"/v1/workers/{quote(worker, safe='')}/beat", json={"state": "running"})
    assert r.status_code == 200, r.text
    assert r.json()["worker_id"] == worker
    assert worker in await _workers(client)


async def test_silent_workers_leave_the_window_then_the_table(client: httpx.AsyncClient, app: Any,
                                                               database_url: str) -> None:
    for w in ("fresh", "quiet", "gone"):
        assert (await client.post(f"/v1/workers/{w}/beat", json={"state": "running"})).status_code == 200
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE workers SET last_seen_at = now() - interval '10 minutes' WHERE worker_id = 'quiet'")
        conn.execute("UPDATE workers SET last_seen_at = now() - interval '2 hours' WHERE worker_id = 'gone'")
    assert (await _workers(client)).keys() == {"fresh"}  # the default window: 5 minutes
    assert (await _workers(client, window_s=3600)).keys() == {"fresh", "quiet"}
    assert await activity.forget_workers(app.state.ctx) == 1
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT worker_id FROM workers ORDER BY 1").fetchall()
    assert rows == [("fresh",), ("quiet",)]


async def test_the_duties_leader_forgets_silent_workers(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The leader's retention round (every RETENTION_EVERY_S) does it; made frequent here.
    monkeypatch.setattr(duties, "RETENTION_EVERY_S", 0.2)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO workers (worker_id, last_seen_at) VALUES "
                     "('old', now() - interval '61 minutes'), ('recent', now() - interval '59 minutes')")
    async with running_app(make_settings(database_url)):
        def left() -> bool:
            with psycopg.connect(database_url) as conn:
                return conn.execute("SELECT array_agg(worker_id) FROM workers").fetchone() == (["recent"],)
        await aeventually(left, what="the leader to delete the worker silent for an hour")


async def test_beat_body_is_validated(client: httpx.AsyncClient, database_url: str) -> None:
    bad: list[tuple[dict[str, Any], str]] = [
        ({"pid": -1}, "pid"), ({"pid": "42"}, "pid"), ({"pid": 2**32}, "pid"),
        ({"concurrency": 0}, "concurrency"), ({"in_flight": -1}, "in_flight"), ({"in_flight": 1.0}, "in_flight"),
        ({"state": "sleeping"}, "state"), ({"queues": ["no spaces"]}, "queues"),
        ({"queues": [f"q{i}" for i in range(101)]}, "queues"), ({"queues": "mail"}, "queues"),
        ({"started_at": "yesterday"}, "started_at"), ({"started_at": 1700000000}, "started_at"),
        ({"host": ""}, "host"), ({"host": "h" * 256}, "host"), ({"host": "a\x00b"}, "host"),
        ({"colour": "blue"}, "colour"),
    ]
    for body, field in bad:
        validation(await client.post("/v1/workers/w/beat", json=body), "body", field)
    validation(await client.post(f"/v1/workers/{'w' * 256}/beat", json={}), "path", "worker_id")
    validation(await client.post("/v1/workers/w/beat", content=b"[1]",
                                 headers={"content-type": "application/json"}), "body")
    with psycopg.connect(database_url) as conn:  # nothing refused was written
        assert conn.execute("SELECT count(*) FROM workers").fetchone() == (0,)


async def test_many_beats_of_one_new_worker_at_once_make_one_row(client: httpx.AsyncClient,
                                                                   database_url: str) -> None:
    answers = await asyncio.gather(*(client.post("/v1/workers/racer/beat", json={"in_flight": i})
                                     for i in range(20)))
    assert [r.status_code for r in answers] == [200] * 20
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM workers WHERE worker_id = 'racer'").fetchone() == (1,)


@pytest.fixture
async def secured(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, dict[str, str]]]]:
    tokens = {
        "producer": ("producer", "*"),
        "worker": ("worker", "*"),
        "worker_a": ("worker", "team-a.*"),
        "admin_a": ("admin", "team-a.*"),
    }
    async with app_with_tokens(database_url, ADMIN_TOKEN, tokens) as pair:
        yield pair


async def test_only_workers_and_admins_beat_within_their_queues(
        secured: tuple[httpx.AsyncClient, dict[str, dict[str, str]]], database_url: str) -> None:
    c, tokens = secured
    problem(await c.post("/v1/workers/w/beat", json={}, headers={"Authorization": ""}), 401, "unauthorized")
    problem(await c.post("/v1/workers/w/beat", json={}, headers=tokens["producer"]), 403, "forbidden")
    # a worker of some queues may not say it serves others
    problem(await c.post("/v1/workers/w/beat", json={"queues": ["team-b.x"]}, headers=tokens["worker_a"]),
            403, "forbidden")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM workers").fetchone() == (0,)
    for name, worker in (("worker", "w-all"), ("worker_a", "w-a"), ("admin", "w-admin")):
        r = await c.post(f"/v1/workers/{worker}/beat", json={"queues": ["team-a.x"]}, headers=tokens[name])
        assert r.status_code == 200, (name, r.text)
    # the listing stays an admin-of-every-queue's read
    for name in ("worker", "worker_a", "producer", "admin_a"):
        problem(await c.get("/v1/workers", headers=tokens[name]), 403, "forbidden")
    assert (await c.get("/v1/workers")).json()["workers"][0]["worker_id"] == "w-a"
