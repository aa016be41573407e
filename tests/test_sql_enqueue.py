"""``jobq.enqueue(...)`` and ``jobq.enqueue_many(jsonb)``: enqueue inside the caller's own
transaction (migration 0009).

A job enqueued in a transaction that rolls back never exists; one that commits wakes the
long-polls of every ``jobq serve`` by NOTIFY. One matrix of inputs goes through the SQL
functions and through ``POST /v1/jobs`` (and ``/batch``) on two databases, and the stored
rows, queues and counters must come out the same: the two definitions cannot drift apart
unnoticed. Roles need only USAGE on schema jobq and EXECUTE on the functions."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from fastapi import FastAPI
from psycopg import sql

from jobq.store.migrate import alembic_config, engine, head_revision
from tests import pg
from tests.conftest import LiveServer, make_settings, running_app
from tests.helpers import claim, claim_looked_since, database_now, history_made, long_polls_idle
from tests.waiting import aeventually

# Only a bell can bring a job to a long-poll this short before its wait ends: the watcher's
# safety round (jobq.core.wakeups.SAFETY_RECHECK_S) is 5 s.
WAIT_MS = 4000

ENQUEUE = """SELECT jobq.enqueue(queue => %(queue)s, type => %(type)s,
                                 payload => %(payload)s::jsonb, priority => %(priority)s::integer,
                                 delay_ms => %(delay_ms)s::bigint, run_at => %(run_at)s::timestamptz,
                                 max_attempts => %(max_attempts)s::integer,
                                 idempotency_key => %(idempotency_key)s)"""


def sql_args(body: dict[str, Any]) -> dict[str, Any]:
    """A POST /v1/jobs body as jobq.enqueue's arguments (the API's defaults where absent)."""
    return {
        "queue": body.get("queue", "default"),
        "type": body["type"],
        "payload": json.dumps(body.get("payload", {})),
        "priority": body.get("priority", 0),
        "delay_ms": body.get("delay_ms"),
        "run_at": body.get("run_at"),
        "max_attempts": body.get("max_attempts"),
        "idempotency_key": body.get("idempotency_key"),
    }


def enqueue_sql(conn: psycopg.Connection[Any], **body: Any) -> int:
    row = conn.execute(ENQUEUE, sql_args({"type": "t", **body})).fetchone()
    assert row is not None
    return int(row[0])


def asgi(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq", timeout=30)


async def long_poll(c: httpx.AsyncClient, queue: str, worker: str = "w1") -> list[dict[str, Any]]:
    r = await c.post("/v1/leases", json={"worker_id": worker, "queues": [queue], "wait_ms": WAIT_MS})
    assert r.status_code == 200, r.text
    return list(r.json()["leases"])


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url) as conn:
        yield conn


# ------------------------------------------------------------------ transactions and wake-ups


async def idle(app: FastAPI, queue: str, n: int = 1) -> None:
    """The long-polls sleep, and the service LISTENs: a commit's NOTIFY reaches them."""
    async with asyncio.timeout(10):
        await app.state.ctx.wakeups.notifications.listening.wait()
    await long_polls_idle(app, queue, n)


async def test_a_rolled_back_enqueue_never_appears(client: httpx.AsyncClient, database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        job_id = enqueue_sql(conn, queue="outbox", payload={"order": 1})
        # Inside the transaction the row is there; nobody else sees it yet.
        assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 404
        conn.rollback()
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 404
    assert await claim(client, "outbox", limit=10) == []
    r = await client.get("/v1/queues/outbox")
    assert r.status_code == 404 or sum(r.json()["counts"].values()) == 0, r.text


async def test_a_committed_enqueue_wakes_an_idle_long_poll(app: FastAPI, database_url: str) -> None:
    async with asgi(app) as c:
        poll = asyncio.create_task(long_poll(c, "outbox"))
        await idle(app, "outbox")
        with psycopg.connect(database_url) as conn:
            job_id = enqueue_sql(conn, queue="outbox")
            # Not before commit: the NOTIFY is sent at commit, and the row is invisible. The
            # time is the window in which a wake before the commit would show.
            await asyncio.sleep(0.2)
            assert not poll.done()
        leases = await poll
    assert [lease["job"]["id"] for lease in leases] == [str(job_id)]
    # The database is not a process to greet: this service still knows of no peer, so it
    # goes on sending no NOTIFY of its own.
    assert app.state.ctx.wakeups.notifications.peers == set()


async def test_two_enqueues_in_one_transaction_wake_two_long_polls(app: FastAPI, database_url: str) -> None:
    """Two identical NOTIFYs in one transaction would be folded into one by PostgreSQL and
    wake one long-poll only; each call's notification is distinct."""
    async with asgi(app) as c:
        polls = [asyncio.create_task(long_poll(c, "outbox", f"w{i}")) for i in range(2)]
        await idle(app, "outbox", 2)
        with psycopg.connect(database_url) as conn:
            ids = {str(enqueue_sql(conn, queue="outbox")) for _ in range(2)}
        got = [lease["job"]["id"] for p in polls for lease in await p]
    assert sorted(got) == sorted(ids)


async def test_a_live_serve_long_poll_is_woken_by_a_commit(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as c:
        since = database_now(live_server.database_url)
        poll = asyncio.create_task(long_poll(c, "outbox"))
        # The in-process test above orders this with the service's own probe; here the
        # service's claim is seen in pg_stat_activity to have looked and found nothing.
        await aeventually(lambda: claim_looked_since(live_server, since), poll_s=0.02,
                          what="the long-poll having looked")
        with psycopg.connect(live_server.database_url) as conn:
            job_id = enqueue_sql(conn, queue="outbox", payload={"a": 1})
        leases = await poll
    assert [lease["job"]["id"] for lease in leases] == [str(job_id)]
    assert leases[0]["job"]["payload"] == {"a": 1}


# ------------------------------------------------------------------ keys, limits and errors


async def test_a_repeated_idempotency_key_answers_the_same_id(
    db: psycopg.Connection[Any], client: httpx.AsyncClient
) -> None:
    first = enqueue_sql(db, queue="q", idempotency_key="order-7", payload={"n": 1})
    again = enqueue_sql(db, queue="q", idempotency_key="order-7", payload={"n": 1})
    db.commit()
    assert again == first
    # The HTTP API sees the same job for the key: a replay (200), not a new one.
    r = await client.post(
        "/v1/jobs", json={"type": "t", "queue": "q", "idempotency_key": "order-7", "payload": {"n": 1}}
    )
    assert r.status_code == 200 and r.json()["id"] == str(first), r.text
    with pytest.raises(psycopg.Error) as err:
        enqueue_sql(db, queue="q", idempotency_key="order-7", payload={"n": 2})
    assert err.value.sqlstate == "JQ409"


async def test_a_full_queue_raises_jq429_and_creates_nothing(
    db: psycopg.Connection[Any], client: httpx.AsyncClient
) -> None:
    r = await client.patch("/v1/queues/small", json={"max_depth": 1})
    assert r.status_code == 200, r.text
    enqueue_sql(db, queue="small")
    db.commit()
    with pytest.raises(psycopg.Error) as err:
        enqueue_sql(db, queue="small")
    assert err.value.sqlstate == "JQ429"
    assert err.value.diag.message_primary == "queue 'small' is at its max_depth of waiting jobs"
    db.rollback()
    # A batch with one full queue among others enqueues none of its jobs.
    batch = [{"type": "t", "queue": "roomy"}, {"type": "t", "queue": "small"}]
    with pytest.raises(psycopg.Error) as err:
        db.execute("SELECT jobq.enqueue_many(%s::jsonb)", (json.dumps(batch),))
    assert err.value.sqlstate == "JQ429"
    db.rollback()
    for queue, n in (("small", 1), ("roomy", 0)):
        r = await client.get("/v1/jobs", params={"queue": queue})
        assert len(r.json()["jobs"]) == n, r.text
    counts = (await client.get("/v1/queues/small")).json()["counts"]
    assert counts["pending"] == 1


RESERVED = "idempotency_key: keys starting with 'topic:' or 'schedule:' are reserved for the jobs of"


@pytest.mark.parametrize(
    "body,message",
    [
        ({"queue": "no spaces"}, "queue: must be 1 to 128"),
        ({"type": ""}, "type: must be 1 to 255"),
        ({"payload": [1]}, "payload: must be a JSON object"),
        ({"delay_ms": -1}, "delay_ms: must be 0 to"),
        ({"delay_ms": 5, "run_at": "2030-01-01T00:00:00Z"}, "run_at: give one of"),
        ({"max_attempts": 0}, "max_attempts: must be 1 to 10000"),
        ({"idempotency_key": ""}, "idempotency_key: must be 1 to 255"),
        ({"idempotency_key": "topic:orders/7"}, RESERVED),
        ({"idempotency_key": "schedule:nightly:2030-01-01T00:00:00Z"}, RESERVED),
        ({"payload": {"a": json.loads("[" * 128 + "]" * 128)}}, "payload: JSON nested deeper"),
    ],
)
def test_bad_input_raises_jq422_naming_the_field(
    db: psycopg.Connection[Any], body: dict[str, Any], message: str
) -> None:
    with pytest.raises(psycopg.Error) as err:
        enqueue_sql(db, **body)
    assert err.value.sqlstate == "JQ422"
    assert err.value.diag.message_primary.startswith(message), err.value.diag.message_primary


@pytest.mark.parametrize(
    "jobs,message",
    [
        ([], "jobs: must hold 1 to 1000 jobs"),
        ({"type": "t"}, "jobs: must be a JSON array"),
        ([{"type": "t"}] * 1001, "jobs: must hold 1 to 1000 jobs"),
        ([{"type": "t"}, 5], "jobs[1]: must be a JSON object"),
        ([{"type": "t", "bogus": 1}], "jobs[0].bogus: unknown field"),
        ([{"queue": "q"}], "jobs[0].type: required"),
        ([{"type": "t", "priority": "1"}], "jobs[0].priority: must be an integer"),
        ([{"type": "t", "priority": 1.5}], "jobs[0].priority: must be an integer"),
        ([{"type": "t", "priority": 2**31}], "jobs[0].priority: must be -2147483647 to 2147483647"),
        ([{"type": "t", "payload": None}], "jobs[0].payload: must be a JSON object"),
        ([{"type": "t", "run_at": "2030-01-01"}], "jobs[0].run_at: must be an RFC 3339"),
        ([{"type": "t", "run_at": "9999-12-31T23:59:59-14:00"}], "jobs[0].run_at: must fall within"),
        ([{"type": "t", "run_at": "0001-01-01T00:00:00+01:00"}], "jobs[0].run_at: must fall within"),
        # Well-formed but impossible: PostgreSQL's own input would raise 22008 or 22009.
        ([{"type": "t"}, {"type": "t", "run_at": "2030-02-30T00:00:00Z"}], "jobs[1].run_at: not a valid date"),
        ([{"type": "t", "run_at": "2030-01-01T25:00:00Z"}], "jobs[0].run_at: not a valid date"),
        ([{"type": "t", "run_at": "2030-01-01T00:00:00+99:00"}], "jobs[0].run_at: not a valid date"),
        ([{"type": "t", "run_at": "0000-01-01T00:00:00Z"}], "jobs[0].run_at: not a valid date"),
        # PostgreSQL would take these as the next day; the API refuses them.
        ([{"type": "t", "run_at": "2030-01-01T24:00:00Z"}], "jobs[0].run_at: not a valid date"),
        ([{"type": "t", "run_at": "2030-01-01T23:59:60Z"}], "jobs[0].run_at: not a valid date"),
        ([{"type": "t", "priority": 100.0}], "jobs[0].priority: must be an integer"),
        ([{"type": "t", "max_attempts": 3.0}], "jobs[0].max_attempts: must be an integer"),
        ([{"type": "t", "idempotency_key": "topic:orders/7"}], "jobs[0]." + RESERVED),
    ],
)
def test_bad_batches_raise_jq422_naming_the_job_and_field(db: psycopg.Connection[Any], jobs: Any, message: str) -> None:
    with pytest.raises(psycopg.Error) as err:
        db.execute("SELECT jobq.enqueue_many(%s::jsonb)", (json.dumps(jobs),))
    assert err.value.sqlstate == "JQ422"
    assert err.value.diag.message_primary.startswith(message), err.value.diag.message_primary


# ------------------------------------------------------------------ one definition: SQL == HTTP

# Queue settings made (through the API, on both databases) before the matrix runs.
SETTINGS = {
    "aging": {"aging_ms": 1000, "max_attempts": 4},
    "full": {"max_depth": 2},
    "paused": {"paused": True},
}
RUN_AT_FUTURE = "2030-01-01T00:00:00Z"
RUN_AT_PAST = "2000-01-01T00:00:00+02:00"

# Each body in turn; an entry's outcome is compared, then the stored rows once at the end.
MATRIX: list[dict[str, Any]] = [
    {"type": "a"},
    {"type": "b", "queue": "q1", "payload": {"x": [1, 2.5, {"y": None}], "s": "é"}, "priority": 7},
    {"type": "c", "queue": "q1", "priority": -3, "delay_ms": 60_000},
    {"type": "c", "queue": "q1", "delay_ms": 0},
    {"type": "d", "queue": "q1", "run_at": RUN_AT_FUTURE},
    {"type": "d", "queue": "q1", "run_at": RUN_AT_PAST},
    {"type": "e", "queue": "q1", "max_attempts": 3},
    {"type": "k", "queue": "q1", "idempotency_key": "K1", "payload": {"n": 1}},
    {"type": "k", "queue": "q1", "idempotency_key": "K1", "payload": {"n": 1}},
    {"type": "k", "queue": "q1", "idempotency_key": "K1", "payload": {"n": 2}},
    {"type": "other", "queue": "q1", "idempotency_key": "K1", "payload": {"n": 1}},
    {"type": "k", "queue": "q2", "idempotency_key": "K1", "payload": {"n": 1}},
    {"type": "g", "queue": "aging", "priority": 2},
    {"type": "g", "queue": "aging", "priority": 0, "delay_ms": 1500, "max_attempts": 9},
    {"type": "f", "queue": "full", "idempotency_key": "F1"},
    {"type": "f", "queue": "full"},
    {"type": "f", "queue": "full"},
    {"type": "f", "queue": "full", "idempotency_key": "F1"},
    {"type": "f", "queue": "full", "idempotency_key": "F2"},
    {"type": "p", "queue": "paused", "priority": 2_147_483_647},
    {"type": "x", "queue": "no spaces"},
    {"type": "x", "queue": "-leading"},
    {"type": "x" * 256},
    {"type": "x", "priority": -2_147_483_648},
    {"type": "x", "delay_ms": 315_360_000_001},
    {"type": "x", "max_attempts": 10_001},
    {"type": "x", "idempotency_key": "k" * 256},
    {"type": "x", "idempotency_key": "topic:orders/7"},
    {"type": "x", "idempotency_key": "schedule:nightly:2026-12-04T02:00:00Z"},
    {"type": "x", "idempotency_key": "my-topic:allowed"},
    {"type": "x", "delay_ms": 1, "run_at": RUN_AT_FUTURE},
    {"type": "x", "payload": {"a": json.loads("[" * 128 + "]" * 128)}},
    {"type": "y", "payload": {"a": json.loads("[" * 127 + "]" * 127)}},
]
# Well-formed run_at values naming no instant (PostgreSQL: SQLSTATE 22008 or 22009).
IMPOSSIBLE_RUN_AT = [
    "2030-02-30T00:00:00Z",
    "2029-02-29T00:00:00Z",
    "2030-13-01T00:00:00Z",
    "2030-01-01T25:00:00Z",
    "2030-01-01T00:60:00Z",
    "2030-01-01T24:00:00Z",
    "2030-01-01T23:59:60Z",
    "2030-01-01T00:00:00+99:00",
    "2030-01-01T00:00:00+24:00",
    "2030-01-01T00:00:00+05:60",
    "0000-01-01T00:00:00Z",
]
# Batches (for /v1/jobs/batch and jobq.enqueue_many): every body alone, then mixtures.
BATCHES: list[list[dict[str, Any]]] = [[body] for body in MATRIX] + [
    [
        {"type": "m", "queue": "b1", "idempotency_key": "M"},
        {"type": "m", "queue": "b1", "idempotency_key": "M"},
        {"type": "m", "queue": "b2"},
    ],
    [{"type": "m", "queue": "b1"}, {"type": "f", "queue": "full"}],  # full: none of them
    [
        {"type": "m", "queue": "b3"},
        {"type": "m", "queue": "b1", "idempotency_key": "M", "payload": {"other": True}},
    ],  # conflict: none of them
    [{"type": "m", "queue": "b1", "priority": 2**31}],
    [{"type": "m", "queue": "b1", "run_at": "2030-01-01"}],
    [{"type": "m", "queue": "b1", "payload": "text"}],
    [{"type": "m", "queue": "b1", "unknown": 1}],
    [{"queue": "b1"}],
    # run_at as the API reads it, where PostgreSQL's input reads it otherwise.
    *([{"type": "r", "queue": "b1", "run_at": at}] for at in IMPOSSIBLE_RUN_AT),
    [{"type": "r", "queue": "b1", "run_at": "2030-01-01T00:00:00+16:00"}],
    [{"type": "r", "queue": "b1", "run_at": "2030-01-01T00:00:00-23:59"}],
    [{"type": "r", "queue": "b1", "run_at": "2030-01-01t00:00:00.9999999z"}],
    [{"type": "r", "queue": "b1", "run_at": "2030-06-30 12:00:00.5+05:30"}],
    [{"type": "r", "queue": "b1", "run_at": "2028-02-29T00:00:00Z"}],
    [{"type": "r", "queue": "b1", "run_at": "0001-01-01T00:00:00+01:00"}],
    # Integers written with a fraction are not integers to the strict API.
    [{"type": "r", "queue": "b1", "priority": 100.0}],
    [{"type": "r", "queue": "b1", "max_attempts": 3.0}],
    [{"type": "r", "queue": "b1", "delay_ms": 0.0}],
]

SQLSTATE_CODES = {"JQ422": "validation_error", "JQ409": "idempotency_conflict", "JQ429": "queue_full"}


def http_outcome(r: httpx.Response, seen: set[str]) -> str:
    if r.status_code in (200, 201):
        seen.add(r.json()["id"])
        return {200: "replay", 201: "created"}[r.status_code]
    return str(r.json()["code"])


def batch_outcome(r: httpx.Response, seen: set[str]) -> str:
    if r.status_code != 201:
        return str(r.json()["code"])
    return ",".join(_seen(seen, j["id"]) for j in r.json()["jobs"])


def _seen(seen: set[str], job_id: str) -> str:
    out = "replay" if job_id in seen else "created"
    seen.add(job_id)
    return out


def sql_call(conn: psycopg.Connection[Any], statement: str, params: Any) -> Any:
    """Run one call in its own transaction: (ids or None, error code or None)."""
    try:
        with conn.transaction():
            row = conn.execute(statement, params).fetchone()
        return row[0] if row else None, None
    except psycopg.Error as exc:
        return None, SQLSTATE_CODES.get(exc.sqlstate or "", f"sqlstate {exc.sqlstate}")


def stored(url: str) -> dict[str, Any]:
    """What a user could tell apart: the jobs in enqueue order (times relative to when they
    were created, except a run_at), the queues' settings and the counters."""
    with psycopg.connect(url) as conn:
        jobs = conn.execute("""
            SELECT queue, type, payload, priority, status, attempt, max_attempts, idempotency_key,
                   CASE WHEN visible_at >= created_at AND visible_at < created_at + interval '1 year'
                        THEN (visible_at - created_at)::text ELSE visible_at::text END AS visible,
                   aged_key IS NULL AS unaged,
                   round((aged_key - extract(epoch FROM visible_at) * 1000)::numeric, 3) AS aging
              FROM jobs ORDER BY id""").fetchall()
        # The API creates a queue before its enqueue's transaction, so a refused batch may
        # leave an empty queue behind; the function's is part of the caller's transaction.
        queues = conn.execute(
            """
            SELECT name, max_depth, paused, lease_ms, max_attempts, backoff_base_ms, backoff_max_ms,
                   max_lease_expiries, aging_ms, max_running, retention_ms, dead_retention_ms
              FROM queues WHERE name IN (SELECT queue FROM jobs) OR name = ANY(%s)
             ORDER BY name""",
            (list(SETTINGS),),
        ).fetchall()
        counts = conn.execute("""
            SELECT queue, status, type, sum(n) FROM job_counts GROUP BY queue, status, type
            HAVING sum(n) <> 0 ORDER BY queue, status, type""").fetchall()
    return {"jobs": jobs, "queues": queues, "counts": counts}


@pytest.fixture
async def twin(admin_url: str, template_db: str) -> AsyncIterator[tuple[str, FastAPI]]:
    """A second database, with its own service (for its queue settings and reads)."""
    name = pg.clone(admin_url, template_db)
    url = pg.with_database(admin_url, name)
    try:
        async with running_app(make_settings(url)) as application:
            yield url, application
    finally:
        pg.drop(admin_url, name)


async def configure(c: httpx.AsyncClient) -> None:
    for queue, settings in SETTINGS.items():
        r = await c.patch(f"/v1/queues/{queue}", json=settings)
        assert r.status_code == 200, r.text


async def test_one_matrix_through_sql_and_http_stores_the_same(
    app: FastAPI, database_url: str, twin: tuple[str, FastAPI]
) -> None:
    sql_url, sql_app = twin
    # The SQL side runs synchronously inside this event loop, which both services' leaders
    # share: their first round's partition locks must be over before it (tests.helpers).
    for url in (database_url, sql_url):
        await aeventually(lambda url=url: history_made(url), what="the history partitions")
    async with asgi(app) as http, asgi(sql_app) as sql_side:
        await configure(http)
        await configure(sql_side)
    via_http: list[str] = []
    via_sql: list[str] = []
    seen_http: set[str] = set()
    seen_sql: set[str] = set()
    async with asgi(app) as http:
        for body in MATRIX:
            via_http.append(http_outcome(await http.post("/v1/jobs", json=body), seen_http))
        for batch in BATCHES:
            via_http.append(batch_outcome(await http.post("/v1/jobs/batch", json={"jobs": batch}), seen_http))
    with psycopg.connect(sql_url) as conn:
        for body in MATRIX:
            if body.get("priority", 0) < -(2**31) + 1:  # not an integer in SQL: batch form below
                job_id, error = sql_call(conn, "SELECT (jobq.enqueue_many(%s::jsonb))[1]", (json.dumps([body]),))
            else:
                job_id, error = sql_call(conn, ENQUEUE, sql_args(body))
            via_sql.append(error or _seen(seen_sql, str(job_id)))
        for batch in BATCHES:
            ids, error = sql_call(conn, "SELECT jobq.enqueue_many(%s::jsonb)", (json.dumps(batch),))
            via_sql.append(error or ",".join(_seen(seen_sql, str(i)) for i in ids))
    # The single path's ids were seen by the batch path too (replays of earlier keys).
    assert via_sql == via_http
    assert "queue_full" in via_http and "idempotency_conflict" in via_http
    assert "validation_error" in via_http and "replay" in via_http
    expected = stored(database_url)
    assert len(expected["jobs"]) > 20 and len(expected["counts"]) > 5
    assert stored(sql_url) == expected


def test_the_single_path_ids_feed_replays(db: psycopg.Connection[Any]) -> None:
    """enqueue_many answers the id enqueue made for a key, in input order."""
    first = enqueue_sql(db, queue="q", idempotency_key="A")
    row = db.execute(
        "SELECT jobq.enqueue_many(%s::jsonb)",
        (json.dumps([{"type": "t", "queue": "q"}, {"type": "t", "queue": "q", "idempotency_key": "A"}]),),
    ).fetchone()
    assert row is not None
    assert row[0][1] == first and row[0][0] != first


# ------------------------------------------------------------------ grants


def test_a_role_with_usage_and_execute_enqueues_and_one_without_is_refused(database_url: str) -> None:
    app_role, bare_role = (f"jobq_test_{kind}_{uuid.uuid4().hex[:8]}" for kind in ("app", "bare"))
    with psycopg.connect(database_url, autocommit=True) as admin:
        for role in (app_role, bare_role):
            admin.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA jobq TO {}").format(sql.Identifier(app_role)))
        admin.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION jobq.enqueue, jobq.enqueue_many TO {}").format(sql.Identifier(app_role))
        )
        try:
            with psycopg.connect(database_url) as conn:
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(app_role)))
                job_id = enqueue_sql(conn, queue="granted")
                row = conn.execute('SELECT jobq.enqueue_many(\'[{"type": "t"}]\')').fetchone()
                assert row is not None and len(row[0]) == 1
                # It holds no grant on the tables: only the functions reach them.
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT * FROM jobs")
                conn.rollback()
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(app_role)))
                job_id = enqueue_sql(conn, queue="granted")
                conn.commit()
            found = admin.execute("SELECT queue FROM jobs WHERE id = %s", (job_id,)).fetchone()
            assert found == ("granted",)
            with psycopg.connect(database_url) as conn:
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(bare_role)))
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    enqueue_sql(conn, queue="refused")
                conn.rollback()
            # USAGE alone is not enough either: EXECUTE is revoked from PUBLIC.
            admin.execute(sql.SQL("GRANT USAGE ON SCHEMA jobq TO {}").format(sql.Identifier(bare_role)))
            with psycopg.connect(database_url) as conn:
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(bare_role)))
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute('SELECT jobq.enqueue_many(\'[{"type": "t"}]\')')
            assert admin.execute("SELECT count(*) FROM jobs WHERE queue = 'refused'").fetchone() == (0,)
        finally:
            for role in (app_role, bare_role):
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# ------------------------------------------------------------------ migration


def test_downgrade_drops_the_functions_and_schema_and_upgrade_restores_them(database_url: str) -> None:
    cfg = alembic_config(database_url)
    migrations = engine(database_url)
    try:
        with migrations.connect() as conn:
            cfg.attributes["connection"] = conn
            below = ScriptDirectory.from_config(cfg).get_revision("0009").down_revision
            command.downgrade(cfg, str(below))
            conn.commit()
            assert conn.exec_driver_sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'jobq'").scalar() == 0
            # End the read's transaction: alembic then runs the upgrade in its own, which a
            # migration building an index CONCURRENTLY (0011) steps out of.
            conn.commit()
            command.upgrade(cfg, "head")
            conn.commit()
    finally:
        migrations.dispose()
    with psycopg.connect(database_url) as conn:
        assert enqueue_sql(conn, queue="again") > 0


# ------------------------------------------------------------------ search_path hijacking

# Overloads a role with CREATE on the tables' schema could plant: each is a better match than
# the built-in for a call the functions make (an exact type instead of a cast or a
# polymorphic one), and, run as the functions' owner, would make the planter a superuser.
PLANTS = {
    "make_interval(secs numeric)": "interval AS $$ SELECT pg_catalog.make_interval(secs => secs::float8) $$",
    "format(text, text)": "text AS $$ SELECT pg_catalog.format($1, $2) $$",
    "format(text, integer)": "text AS $$ SELECT pg_catalog.format($1, $2) $$",
    "format(text, text, text)": "text AS $$ SELECT pg_catalog.format($1, $2, $3) $$",
    "format(text, text, text, text)": "text AS $$ SELECT pg_catalog.format($1, $2, $3, $4) $$",
    "jsonb_set(jsonb, text[], jsonb)": "jsonb AS $$ SELECT pg_catalog.jsonb_set($1, $2, $3) $$",
    "to_jsonb(integer)": "jsonb AS $$ SELECT pg_catalog.to_jsonb($1) $$",
    "cardinality(jsonb[])": "integer AS $$ SELECT pg_catalog.cardinality($1) $$",
    "now()": "timestamptz AS $$ SELECT pg_catalog.now() $$",
    "jobq_aged_key(timestamptz, numeric, bigint)": "double precision AS $$ SELECT 0::float8 $$",
}


def test_overloads_planted_in_the_tables_schema_do_not_run_as_the_owner(database_url: str) -> None:
    """A role allowed to enqueue and to create in the tables' schema (PostgreSQL 14 and older
    grant CREATE on public to every role) plants overloads of the built-ins the functions
    call and temporary tables named like jobq's, then enqueues: none of it runs or is
    written, and the job and its counts land in jobq's tables."""
    role = f"jobq_test_planter_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    with psycopg.connect(database_url, autocommit=True) as admin:
        schema = admin.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        admin.execute(sql.SQL("CREATE ROLE {}").format(ident))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA jobq TO {}").format(ident))
        admin.execute(sql.SQL("GRANT EXECUTE ON FUNCTION jobq.enqueue, jobq.enqueue_many TO {}").format(ident))
        admin.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO {}").format(sql.Identifier(schema[0]), ident))
        try:
            with psycopg.connect(database_url) as conn:
                conn.execute(sql.SQL("SET ROLE {}").format(ident))
                conn.execute("CREATE TABLE planted_ran (fn text)")
                conn.execute("GRANT INSERT ON planted_ran TO PUBLIC")
                # Each plant records that it ran and escalates, then answers as the built-in
                # would, so that the call succeeds and nothing looks amiss.
                conn.execute(
                    sql.SQL("""CREATE FUNCTION escalate(fn text) RETURNS void LANGUAGE plpgsql AS $$
                               BEGIN INSERT INTO planted_ran VALUES (fn); ALTER ROLE {} SUPERUSER; END $$""").format(
                        ident
                    )
                )
                for signature, body in PLANTS.items():
                    returns, _, query = body.partition(" AS ")
                    conn.execute(
                        f"CREATE FUNCTION {signature} RETURNS {returns} LANGUAGE plpgsql AS $plant$ "
                        f"BEGIN PERFORM escalate('{signature}'); RETURN ({query.strip('$ ')}); END $plant$"
                    )
                # Temporary tables named like jobq's: pg_temp is on every search_path.
                for table in ("jobs", "queues"):
                    conn.execute(f"CREATE TEMP TABLE {table} (id bigint, name text)")
                conn.execute("""CREATE TEMP TABLE job_counts (queue text, status text, type text,
                                shard smallint, n bigint, PRIMARY KEY (queue, status, type, shard))""")
                big = json.dumps({"pad": "x" * 300, "deep": [[{"a": [1]}]]})
                conn.execute("SELECT jobq.enqueue('planted', 't', %s::jsonb)", (big,))
                conn.execute("SELECT jobq.enqueue('planted', 't', %s::jsonb, delay_ms => 1500)", (big,))
                conn.execute(
                    "SELECT jobq.enqueue_many(%s::jsonb)",
                    (json.dumps([{"type": "t", "queue": "planted", "payload": json.loads(big)}] * 2),),
                )
                conn.commit()
            ran = admin.execute("SELECT fn FROM planted_ran").fetchall()
            superuser = admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            assert (ran, superuser) == ([], (False,))
            jobs = admin.execute("SELECT count(*) FROM jobs WHERE queue = 'planted'").fetchone()
            counted = admin.execute("SELECT sum(n) FROM job_counts WHERE queue = 'planted'").fetchone()
            assert (jobs, counted) == ((4,), (4,))
        finally:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def migrate_to(database_url: str, revision: str) -> None:
    """Downgrade or upgrade the database to ``revision`` (``below`` for the one before 0009)."""
    cfg = alembic_config(database_url)
    migrations = engine(database_url)
    try:
        with migrations.connect() as conn:
            cfg.attributes["connection"] = conn
            if revision == "below":
                below = ScriptDirectory.from_config(cfg).get_revision("0009").down_revision
                command.downgrade(cfg, str(below))
            else:
                command.upgrade(cfg, revision)
            conn.commit()
    finally:
        migrations.dispose()


FUNCTIONS = "SELECT count(*) FROM pg_proc WHERE pronamespace = 'jobq'::regnamespace"


def test_a_schema_jobq_another_role_owns_or_creates_in_fails_the_migration(database_url: str) -> None:
    """SECURITY DEFINER functions in a schema someone else owns could be replaced by them and
    would then run with the migrating role's rights: the migration refuses, naming both."""
    role = f"jobq_test_squatter_{uuid.uuid4().hex[:8]}"
    migrate_to(database_url, "below")
    with psycopg.connect(database_url, autocommit=True) as admin:
        me = admin.execute("SELECT current_user").fetchone()
        assert me is not None
        admin.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
        try:
            admin.execute(sql.SQL("CREATE SCHEMA jobq AUTHORIZATION {}").format(sql.Identifier(role)))
            with pytest.raises(RuntimeError) as refused:
                migrate_to(database_url, "head")
            message = str(refused.value)
            assert f'schema "jobq" already exists and belongs to role "{role}", not to "{me[0]}"' in message
            assert admin.execute("SELECT version_num FROM alembic_version").fetchone() != (head_revision(),)
            assert admin.execute(FUNCTIONS).fetchone() == (0,)
            # Ours, but others may create in it: refused too.
            admin.execute("ALTER SCHEMA jobq OWNER TO CURRENT_USER")
            admin.execute(sql.SQL("GRANT CREATE ON SCHEMA jobq TO {}").format(sql.Identifier(role)))
            with pytest.raises(RuntimeError) as refused:
                migrate_to(database_url, "head")
            assert 'schema "jobq" grants CREATE to other roles' in str(refused.value)
            assert admin.execute(FUNCTIONS).fetchone() == (0,)
            # What the role made while it could create there stays its own after the grant is
            # revoked (or the schema changes hands): an overload our functions would call with
            # the owner's rights. Refused until it is gone.
            admin.execute(sql.SQL("REVOKE CREATE ON SCHEMA jobq FROM {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("GRANT CREATE ON SCHEMA jobq TO {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            admin.execute("CREATE FUNCTION jobq._int(text, text, text, integer, integer) RETURNS bigint "
                          "LANGUAGE sql AS 'SELECT 1::bigint'")
            admin.execute("RESET ROLE")
            admin.execute(sql.SQL("REVOKE CREATE ON SCHEMA jobq FROM {}").format(sql.Identifier(role)))
            with pytest.raises(RuntimeError) as refused:
                migrate_to(database_url, "head")
            assert 'schema "jobq" holds objects that belong to other roles (function jobq._int(' in str(refused.value)
            assert admin.execute(FUNCTIONS).fetchone() == (1,)  # theirs only
            admin.execute("DROP FUNCTION jobq._int(text, text, text, integer, integer)")
            # Once the schema is jobq's own alone, the migration goes through.
            migrate_to(database_url, "head")
            assert admin.execute("SELECT version_num FROM alembic_version").fetchone() == (head_revision(),)
        finally:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    with psycopg.connect(database_url) as conn:
        assert enqueue_sql(conn, queue="owned") > 0


def test_downgrade_keeps_a_schema_that_holds_other_objects(database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute("CREATE TABLE jobq.theirs (n integer)")
        admin.execute("INSERT INTO jobq.theirs VALUES (1)")
    with caplog.at_level("WARNING"):
        migrate_to(database_url, "below")
    assert "schema jobq still holds objects" in caplog.text
    with psycopg.connect(database_url, autocommit=True) as admin:
        assert admin.execute(FUNCTIONS).fetchone() == (0,)
        assert admin.execute("SELECT n FROM jobq.theirs").fetchall() == [(1,)]
        # The counter trigger is back as 0003 left it.
        config = admin.execute("SELECT proconfig FROM pg_proc WHERE proname = 'jobs_count_changes'").fetchone()
        assert config == (None,)
    migrate_to(database_url, "head")
    with psycopg.connect(database_url) as conn:
        assert enqueue_sql(conn, queue="again") > 0
        assert conn.execute("SELECT sum(n) FROM job_counts WHERE queue = 'again'").fetchone() == (1,)


def test_every_function_the_sql_enqueue_runs_as_its_owner_pins_its_search_path(database_url: str) -> None:
    """A later migration that redefines one of them (CREATE OR REPLACE, as 0003 did to the
    counter trigger) must keep the pinned search_path, or planted overloads run as the owner."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text, p.prosecdef, p.proconfig FROM pg_proc AS p"
            " WHERE p.pronamespace = 'jobq'::regnamespace OR p.proname = 'jobs_count_changes'"
        ).fetchall()
    assert len(rows) >= 8, rows
    for name, definer, config in rows:
        paths = [c for c in config or [] if c.startswith("search_path=")]
        assert paths and paths[0].startswith("search_path=pg_catalog,"), (name, definer, config)
