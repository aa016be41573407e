"""Database failover, the parts that need no second server: a multi-host URL (libpq's
``h1:p1,h2:p2`` with ``target_session_attrs``) on every path, the pool replacing all its dead
connections once the first is found, and a server that turned read-only answering 503.

The failover itself (a synchronous standby promoted under load) is tests/test_replication.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tests import pg
from tests.conftest import ROOT, LiveServer, free_port, make_settings, running_app
from tests.helpers import problem, retry_after
from tests.waiting import aeventually


@pytest.fixture
def empty_database(admin_url: str) -> Iterator[str]:
    name = f"jobq_empty_{uuid.uuid4().hex[:12]}"
    pg.admin_execute(admin_url, f'CREATE DATABASE "{name}"')
    yield pg.with_database(admin_url, name)
    pg.drop(admin_url, name)


def multi_host_url(database_url: str) -> str:
    """``database_url`` behind a first host where nothing listens: libpq tries that one,
    is refused, and goes on to the real server."""
    params = conninfo_to_dict(database_url)
    host, port = str(params.get("host") or "127.0.0.1"), str(params.get("port") or "5432")
    user = quote(str(params.get("user") or "postgres"), safe="")
    password = f":{quote(str(params['password']), safe='')}" if params.get("password") else ""
    db = quote(str(params["dbname"]), safe="")
    dead = free_port()
    if host.startswith("/"):  # the embedded server: a socket directory goes in the query
        return (f"postgresql://{user}{password}@/{db}?host=127.0.0.1,{quote(host, safe='/')}"
                f"&port={dead},{port}&target_session_attrs=read-write")
    return f"postgresql://{user}{password}@127.0.0.1:{dead},{host}:{port}/{db}?target_session_attrs=read-write"


def _jobq(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jobq.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})


def test_migrate_and_tokens_take_a_multi_host_url(empty_database: str) -> None:
    url = multi_host_url(empty_database)
    done = _jobq("migrate", env={"JOBQ_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    assert "schema is up to date" in done.stdout
    with psycopg.connect(empty_database) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert row is not None
    listed = _jobq("tokens", "list", env={"JOBQ_DATABASE_URL": url})
    assert listed.returncode == 0, listed.stderr


def test_serve_takes_a_multi_host_url(database_url: str) -> None:
    server = LiveServer(multi_host_url(database_url))
    server.start()  # migrates first: SQLAlchemy's URL parser made this exit at once
    try:
        r = httpx.post(server.url + "/v1/jobs", json={"type": "t"}, timeout=10)
        assert r.status_code == 201, r.text
        assert httpx.get(server.url + "/readyz", timeout=10).status_code == 200
    finally:
        server.stop()


@pytest.mark.parametrize(("url", "says"), [
    ("postgresql://db.example:notaport/jobq", "port 'notaport' is not a number"),
    ("postgresql://h1:5432,h2:5433,h3:5434/jobq?port=1,2", "3 hosts and 2 ports"),
    ("postgresql://h1,h2/jobq?target_session_attrs=writable", "target_session_attrs must be one of"),
    ("postgresql://h/jobq?sslmod=require", 'invalid URI query parameter: "sslmod"'),
    ("postgresql://jobq:sec ret@h/jobq", "not a valid PostgreSQL URL"),
])
def test_a_garbage_url_is_one_line_at_start(url: str, says: str) -> None:
    done = _jobq("migrate", env={"JOBQ_DATABASE_URL": url})
    assert done.returncode == 2, done
    assert says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "sec ret" not in done.stderr  # a password is never repeated


def test_no_server_answering_is_one_line() -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()},127.0.0.1:{free_port()}/jobq"
    done = _jobq("migrate", env={"JOBQ_DATABASE_URL": url})
    assert done.returncode == 1, done
    assert done.stderr.startswith("jobq: cannot reach the database:"), done.stderr
    assert "Traceback" not in done.stderr


async def _terminate(admin_url: str, database_url: str) -> list[int]:
    """Kill every backend of the service's pool on ``database_url`` (as a crash would); return their pids."""
    name = str(conninfo_to_dict(database_url)["dbname"])
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        cur = await conn.execute(
            # In the select list, so that it runs only on the rows the WHERE kept.
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = 'jobq'", (name,))
        return [int(pid) for pid, terminated in await cur.fetchall() if terminated]


async def test_killed_backends_cost_one_503_not_one_per_pooled_connection(
        admin_url: str, database_url: str) -> None:
    # The pool keeps 8 connections open (it grows on demand from 1 otherwise, and eight quick
    # requests at once may be served by fewer).
    async with running_app(make_settings(database_url, pool_size=8, pool_min_size=8)) as application:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq", timeout=30) as c:
            answers = await asyncio.gather(*(c.post("/v1/jobs", json={"type": "t"}) for _ in range(8)))
            assert all(r.status_code == 201 for r in answers)
            pool = application.state.ctx.db.pool
            await aeventually(lambda: pool.get_stats()["pool_available"] >= 4,
                              what=lambda: f"idle pooled connections: {pool.get_stats()}")
            pooled = pool.get_stats()["pool_size"]
            killed = await _terminate(admin_url, database_url)
            assert len(killed) >= 4, killed

            def swept() -> bool:
                stats = pool.get_stats()
                lost = stats.get("connections_lost", 0)  # found dead by pool.check()
                return lost > 0 and stats.get("returns_bad", 0) + lost >= pooled

            # The backends are gone. The first statement to find its connection dead (the
            # reaper's, every 0.1 s, before any request here) has the pool check the rest:
            # until that check has found every other pooled connection dead. Without it,
            # only statements find them, one each: this never holds, and they would be 503s.
            await aeventually(swept, what=lambda: f"the pool's check of its dead connections: {pool.get_stats()}")
            # The pool hands out its idle connections in turn: without the check after the
            # first failure, each of them would fail one request.
            statuses = [(await c.post("/v1/jobs", json={"type": "t"})).status_code for _ in range(16)]
    assert set(statuses) <= {201, 503}, statuses
    assert statuses.count(503) <= 1, statuses
    assert statuses[-1] == 201


async def test_the_request_that_finds_the_pool_dead_leaves_the_next_one_a_live_connection(
        admin_url: str, database_url: str) -> None:
    """The same crash, with requests rather than the reaper first to meet a dead backend:
    the reaper looks once a second here, so the first request below is the one that finds
    its connection gone. It answers 503, and only after the pool has checked its other idle
    connections, so the requests after it do not each take one of the dead ones."""
    async with running_app(make_settings(database_url, pool_size=8, reap_interval_s=1.0)) as application:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq", timeout=30) as c:
            answers = await asyncio.gather(*(c.post("/v1/jobs", json={"type": "t"}) for _ in range(8)))
            assert all(r.status_code == 201 for r in answers)
            killed = await _terminate(admin_url, database_url)
            assert len(killed) >= 4, killed

            async def gone() -> bool:
                async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
                    cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (killed,))
                    row = await cur.fetchone()
                    return row is not None and row[0] == 0

            await aeventually(gone, what="the killed backends to exit")
            statuses = [(await c.post("/v1/jobs", json={"type": "t"})).status_code for _ in range(16)]
    assert set(statuses) <= {201, 503}, statuses
    assert statuses.count(503) <= 1, statuses
    assert statuses[-1] == 201


async def test_a_read_only_server_answers_503_until_it_takes_writes_again(
        admin_url: str, database_url: str) -> None:
    """SQLSTATE 25006 (a standby, or a primary fenced for a failover) is a 503 with
    Retry-After, and the connection that met it is replaced: once the server takes writes
    again, the next call succeeds without a restart."""
    name = str(conninfo_to_dict(database_url)["dbname"])

    async def read_only(on: bool) -> None:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            if on:
                await conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on")
                                   .format(sql.Identifier(name)))
            else:
                await conn.execute(sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only")
                                   .format(sql.Identifier(name)))

    async with running_app(make_settings(database_url, pool_size=4)) as application:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq", timeout=30) as c:
            assert (await c.post("/v1/jobs", json={"type": "t"})).status_code == 201
            try:
                await read_only(True)
                await _terminate(admin_url, database_url)  # new sessions start read-only
                answers = [await c.post("/v1/jobs", json={"type": "t"}) for _ in range(6)]
                refused = [r for r in answers if r.status_code != 201]
                assert refused and all(r.status_code == 503 for r in refused), [r.text for r in answers]
                assert "read-only" in answers[-1].json()["detail"], answers[-1].text
                problem(answers[-1], 503, "unavailable")
                retry_after(answers[-1])
            finally:
                await read_only(False)
            # The read-only sessions were closed as they answered 25006: new ones take writes.
            statuses = [(await c.post("/v1/jobs", json={"type": "t"})).status_code for _ in range(6)]
    assert statuses[-3:] == [201, 201, 201], statuses


def test_the_bench_takes_a_multi_host_url() -> None:
    from jobq.bench.config import BenchError
    from jobq.bench.service import check_database_url

    url = "postgresql+psycopg://postgres@127.0.0.1:5433,localhost:5432/jobq?target_session_attrs=read-write"
    assert check_database_url(url) == url.replace("postgresql+psycopg://", "postgresql://")
    with pytest.raises(BenchError, match="db.example"):
        check_database_url("postgresql://postgres@127.0.0.1:5433,db.example:5432/jobq")
