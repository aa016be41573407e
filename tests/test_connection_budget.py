"""A connection budget (issue 25, item 3): jobq run as a role with a CONNECTION LIMIT, as a
managed database or a shared server gives it. Each replica holds its pool (JOBQ_POOL_MIN_SIZE
up to JOBQ_POOL_SIZE) plus two session connections (LISTEN, the duties lock) and a transient
one for the leader's upkeep, so the README's formula replicas x (JOBQ_POOL_SIZE + 3) <= the
role's limit is a promise these tests hold it to:

- three replicas inside it under load: one killed with SIGKILL comes back (ready within 60 s)
  while the others answer no 5xx but 503 with Retry-After; every job answered 201 is
  completed, none by two leases (a claim whose answer died with the killed replica leased its
  jobs to nobody: they come back when the lease ends, at-least-once);
- a fourth replica past it waits, unready, logging one line per attempt, instead of exiting,
  and comes in once another replica stops;
- a replica gives the connections a burst opened back when idle, and says at start what it
  will use.

The role is not a superuser (PostgreSQL does not hold superusers to a role's limit) and owns
a database of its own, empty until the first replica migrates it as that role."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from psycopg import sql

from tests import pg
from tests.conftest import LiveServer
from tests.waiting import aeventually, eventually

QUEUE = "budget"
NO_SLOT = "no free connection slot"
# One replica's connections past its pool: LISTEN, the duties lock, the leader's upkeep.
SESSION_CONNECTIONS = 3


class Balancer:
    """Sends each request to the next replica that takes a connection, as a load balancer
    would, and records every answer. A request whose answer was lost goes again to another
    replica: with an idempotency key (enqueue) or a lease (ack) that is safe, and it is what
    clients do. A 5xx other than a 503 with Retry-After is recorded as bad."""

    def __init__(self, servers: list[LiveServer]) -> None:
        self.servers = servers
        self.turn = itertools.cycle(range(len(servers)))
        self.statuses: Counter[int] = Counter()
        self.bad: list[str] = []
        self.answered: Counter[str] = Counter()  # answers by replica URL
        # A new connection per request (a kept-alive one may be the killed replica's), from
        # one client: a client each costs its TLS context, tens of ms on a busy machine.
        self.http = httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_keepalive_connections=0))

    async def call(self, method: str, path: str, body: dict[str, object]) -> httpx.Response:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            server = self.servers[next(self.turn)]
            try:
                r = await self.http.request(method, server.url + path, json=body)
            except httpx.TransportError:
                await asyncio.sleep(0.02)  # a client's pause before its retry
                continue
            self.statuses[r.status_code] += 1
            self.answered[server.url] += 1
            if r.status_code >= 500:
                if r.status_code != 503 or "retry-after" not in r.headers:
                    self.bad.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
                await asyncio.sleep(0.05)
                continue
            return r
        raise AssertionError(f"{method} {path}: no replica answered for 30 s")


def as_role(url: str, role: str) -> str:
    """``url`` with ``role`` as its user (no password: the test server trusts local logins)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{role}@{host}", parts.path, parts.query, parts.fragment))


@pytest.fixture
def budget_role(admin_url: str) -> Iterator[Callable[[int], str]]:
    """``make(limit)``: a new login role (not a superuser) with CONNECTION LIMIT ``limit`` and
    a new, empty database it owns, as the README's "The database role" sets them up; returns
    the database's URL as that role. The first `jobq serve` migrates it as that role."""
    made: list[str] = []

    def make(limit: int) -> str:
        name = f"jobq_budget_{uuid.uuid4().hex[:10]}"  # the role's and its database's
        pg.admin_execute(admin_url, sql.SQL(
            "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE CONNECTION LIMIT {}").format(
                sql.Identifier(name), sql.Literal(limit)))
        made.append(name)
        pg.admin_execute(admin_url, sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(name)))
        return as_role(pg.with_database(admin_url, name), name)

    yield make
    for name in made:
        pg.drop(admin_url, name)  # WITH (FORCE): its sessions go with it
        pg.admin_execute(admin_url, sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def role_of(url: str) -> str:
    return urlsplit(url).netloc.rsplit("@", 1)[0]


def connections(admin_url: str, role: str) -> Counter[str]:
    """The role's connections, by application_name (pooled ones are ``jobq``)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute("SELECT application_name, count(*) FROM pg_stat_activity "
                            "WHERE usename = %s GROUP BY 1", (role,)).fetchall()
    return Counter({str(name): int(n) for name, n in rows})


def log_of(server: LiveServer) -> str:
    log = getattr(server, "log", None)  # set once the process is started
    if log is None:
        return ""
    try:
        return Path(log.name).read_text(errors="replace")
    except FileNotFoundError:  # stopped: LiveServer.stop removes it
        return ""


def replica(url: str, pool_size: int, min_size: int | None = None, **env: str) -> LiveServer:
    values = {"JOBQ_POOL_SIZE": str(pool_size), **env}
    if min_size is not None:
        values["JOBQ_POOL_MIN_SIZE"] = str(min_size)
    return LiveServer(url, env=values)


@pytest.mark.slow
async def test_three_replicas_inside_the_budget_survive_a_kill(
        admin_url: str, budget_role: Callable[[int], str]) -> None:
    pool = 3
    limit = 3 * (pool + SESSION_CONNECTIONS)  # exactly the README's formula: 18
    url = budget_role(limit)
    role = role_of(url)
    servers = [replica(url, pool) for _ in range(3)]
    lb = Balancer(servers)
    created: set[str] = set()
    completed: Counter[str] = Counter()
    producing = True

    async def producer(n: int) -> None:
        for i in itertools.count():
            if not producing:
                return
            r = await lb.call("POST", "/v1/jobs", {"queue": QUEUE, "type": "t",
                                                    "idempotency_key": f"p{n}-{i}"})
            assert r.status_code in (200, 201), r.text
            created.add(r.json()["id"])

    async def worker(n: int) -> None:
        idle_since: float | None = None
        while True:
            # A short lease: a claim whose answer died with the killed replica leased its jobs
            # to nobody, and they come back when it ends.
            r = await lb.call("POST", "/v1/leases", {"worker_id": f"w{n}", "queues": [QUEUE],
                                                     "limit": 5, "wait_ms": 500, "lease_ms": 3000})
            assert r.status_code == 200, r.text
            leases = r.json()["leases"]
            if not leases:
                if not producing:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 5:  # past the short lease
                        return
                continue
            idle_since = None
            r = await lb.call("POST", "/v1/leases/ack", {"acks": [
                {"lease_id": le["lease_id"], "result": None} for le in leases]})
            assert r.status_code == 200, r.text
            for le, item in zip(leases, r.json()["results"], strict=True):
                if item.get("ok") or item.get("already_completed"):
                    completed[le["job"]["id"]] += 1

    pooled_peak = 0

    async def sample() -> None:
        nonlocal pooled_peak
        while True:
            pooled_peak = max(pooled_peak, (await asyncio.to_thread(connections, admin_url, role))["jobq"])
            await asyncio.sleep(0.2)

    tasks: list[asyncio.Task[None]] = []
    sampler: asyncio.Task[None] | None = None
    logs: list[str] = []
    try:
        for s in servers:
            await asyncio.to_thread(s.start)
        tasks = [asyncio.create_task(producer(n)) for n in range(3)]
        tasks += [asyncio.create_task(worker(n)) for n in range(4)]
        sampler = asyncio.create_task(sample())
        await aeventually(lambda: len(completed) >= 50, what=lambda: (
            f"the load flowing: {len(completed)} jobs completed; answers {dict(lb.statuses)}; "
            f"{lb.bad[:3]}; connections {connections(admin_url, role)}"))
        victim = servers[0]  # the first started: the duties leader
        victim.kill()
        logs.append(log_of(victim))
        os.unlink(victim.log.name)  # start() makes a new one
        t0 = time.monotonic()
        await asyncio.to_thread(victim.start, 60.0)
        took = time.monotonic() - t0
        assert took < 60, took
        before = lb.answered[victim.url]
        await aeventually(lambda: lb.answered[victim.url] >= before + 20, timeout_s=30,
                          what="the restarted replica answering again")
        producing = False
        await asyncio.wait_for(asyncio.gather(*tasks), 90)
        logs += [log_of(s) for s in servers]
    finally:
        producing = False
        for task in [*tasks, *([sampler] if sampler else [])]:
            task.cancel()
        for s in servers:
            s.stop()
        await lb.http.aclose()

    assert lb.bad == [], lb.bad[:5]
    assert 0 < pooled_peak <= 3 * pool, pooled_peak  # each pool within its maximum
    # Inside the formula no replica ever meets the limit: not at start, not under load.
    for text in logs:
        assert "too many connections" not in text and NO_SLOT not in text, text[-3000:]
    assert len(created) > 50, lb.statuses
    assert set(completed) == created, f"{len(created - set(completed))} jobs answered 201 never completed"
    assert [j for j, n in completed.items() if n > 1] == []


def fill_slots(url: str) -> list[psycopg.Connection[tuple[object, ...]]]:
    """Open connections as the role until PostgreSQL refuses one: the budget is then spent."""
    held: list[psycopg.Connection[tuple[object, ...]]] = []
    try:
        while True:
            try:
                held.append(psycopg.connect(url, autocommit=True, application_name="budget-filler"))
            except psycopg.OperationalError as exc:
                assert "too many connections for role" in str(exc), exc
                return held
            assert len(held) < 100, "the role's connection limit does not hold"
    except BaseException:
        for conn in held:
            conn.close()
        raise


@pytest.mark.slow
async def test_a_replica_past_the_budget_waits_for_a_slot(
        admin_url: str, budget_role: Callable[[int], str]) -> None:
    pool = 2
    limit = 3 * (pool + SESSION_CONNECTIONS)  # three replicas fit: 15
    url = budget_role(limit)
    role = role_of(url)
    # A pool that neither grows nor shrinks: what the three hold stays put while the test
    # spends the rest of the budget.
    servers = [replica(url, pool, min_size=pool) for _ in range(3)]
    fourth = replica(url, pool, min_size=pool)
    held: list[psycopg.Connection[tuple[object, ...]]] = []
    starting: asyncio.Task[None] | None = None
    try:
        for s in servers:
            await asyncio.to_thread(s.start)
        # The leader's first history round (partitions made on a connection of its own) is
        # over once no such transient connection is left.
        eventually(lambda: sum(connections(admin_url, role).values()) == 3 * (pool + 2),
                   what=lambda: f"the three replicas settled: {connections(admin_url, role)}",
                   poll_s=0.2)
        held = fill_slots(url)
        assert sum(connections(admin_url, role).values()) == limit

        starting = asyncio.create_task(asyncio.to_thread(fourth.start, 120.0))
        await aeventually(lambda: log_of(fourth).count(NO_SLOT) >= 3, timeout_s=30,
                          what=lambda: f"three attempts logged:\n{log_of(fourth)[-2000:]}", poll_s=0.2)
        assert fourth.proc is not None and fourth.proc.poll() is None, log_of(fourth)
        assert not starting.done()
        async with httpx.AsyncClient(timeout=1) as c:
            with pytest.raises(httpx.ConnectError):  # unready: its port not bound yet
                await c.get(fourth.url + "/readyz")
        attempts = [line for line in log_of(fourth).splitlines() if NO_SLOT in line]
        assert "Traceback" not in log_of(fourth), log_of(fourth)[-3000:]
        # Backoff, not a busy loop: a few lines over the seconds it has waited.
        assert len(attempts) < 20, attempts

        await asyncio.to_thread(servers[2].stop)  # not the leader: it frees just its own
        t0 = time.monotonic()
        await asyncio.wait_for(starting, 60)
        assert time.monotonic() - t0 < 60

        async with httpx.AsyncClient(base_url=fourth.url, timeout=10) as c:
            r = await c.post("/v1/jobs", json={"queue": QUEUE, "type": "t"})
            assert r.status_code == 201, r.text
            r = await c.post("/v1/leases", json={"worker_id": "w", "queues": [QUEUE], "wait_ms": 0})
            assert r.status_code == 200, r.text
            assert len(r.json()["leases"]) == 1
    finally:
        if starting is not None and not starting.done():
            with contextlib.suppress(Exception):
                fourth.kill()
        for conn in held:
            conn.close()
        if starting is not None:
            with contextlib.suppress(Exception):
                await starting
        for s in [*servers, fourth]:
            s.stop()


@pytest.mark.slow
async def test_idle_connections_go_back_and_the_start_says_what_it_uses(
        admin_url: str, budget_role: Callable[[int], str]) -> None:
    pool, idle_s = 10, 6
    url = budget_role(pool + SESSION_CONNECTIONS)  # one replica: the formula with replicas = 1
    role = role_of(url)
    server = replica(url, pool, min_size=1, JOBQ_POOL_IDLE_S=str(idle_s), JOBQ_DB_TIMEOUT_S="8")
    locker: psycopg.Connection[tuple[object, ...]] | None = None
    try:
        await asyncio.to_thread(server.start)
        said = [line for line in log_of(server).splitlines() if "database connections" in line]
        assert len(said) == 1, log_of(server)[-3000:]
        assert re.search(r"\b10\b", said[0]) and re.search(r"\b1\b", said[0]), said[0]

        # Few at start: the minimum (a request or the reaper may have one more in use).
        eventually(lambda: connections(admin_url, role)["jobq"] <= 2,
                   what=lambda: f"few pooled connections at start: {connections(admin_url, role)}")

        # A burst that holds connections: enqueues wait on a lock of the jobs table, each on a
        # pooled connection of its own, so the pool grows to its maximum.
        locker = psycopg.connect(pg.with_database(admin_url, role))
        locker.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            burst = [asyncio.create_task(c.post("/v1/jobs", json={"queue": QUEUE, "type": "t"}))
                     for _ in range(pool + 4)]
            await aeventually(lambda: connections(admin_url, role)["jobq"] >= pool, timeout_s=15,
                              what=lambda: f"the pool grown: {connections(admin_url, role)}", poll_s=0.1)
            assert connections(admin_url, role)["jobq"] == pool  # and not past its maximum
            locker.commit()
            answers = await asyncio.gather(*burst)
        assert [r.status_code for r in answers] == [201] * len(answers), [r.text for r in answers]

        t0 = time.monotonic()
        await aeventually(lambda: connections(admin_url, role)["jobq"] <= 2, timeout_s=2 * idle_s + 10,
                          what=lambda: f"idle connections given back: {connections(admin_url, role)}",
                          poll_s=0.2)
        took = time.monotonic() - t0
        assert took <= 2 * idle_s + 5, f"idle connections went back after {took:.1f} s (JOBQ_POOL_IDLE_S={idle_s})"
        assert "Traceback" not in log_of(server), log_of(server)[-3000:]
    finally:
        if locker is not None:
            locker.close()
        server.stop()


def test_role_url_is_not_a_superuser(admin_url: str, budget_role: Callable[[int], str]) -> None:
    """The limit the other tests rely on binds: the role is no superuser, and PostgreSQL
    refuses it a connection past its limit."""
    url = budget_role(2)
    with psycopg.connect(url) as a, psycopg.connect(url) as b:
        row = a.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        assert row == (False,)
        assert b.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
            psycopg.connect(url)
