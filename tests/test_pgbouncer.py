"""jobq behind Debian's pgbouncer (tests/bouncer.py), in both pooling modes, as deployments run it.

Transaction pooling hands each transaction of one client connection whichever server session
is free: named prepared statements, session settings, LISTEN and session advisory locks do
not survive it. jobq's request pool goes through the pooler (JOBQ_DATABASE_URL) and what needs
a session of its own (LISTEN, the duties lock, migrations) through JOBQ_DIRECT_DATABASE_URL;
without that, it refuses to start instead of running statements the pooler breaks.

Session pooling, as pgbouncer ships (no ``ignore_startup_parameters``), must work without a
direct URL, and the statement deadline must still hold there (no startup ``options``)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql as pgsql

from jobq.store.leader import DUTIES_LOCK_KEY
from jobq.store.migrate import head_revision
from tests import pg
from tests.bouncer import Bouncer, pgbouncer
from tests.conftest import ROOT, LiveServer, free_port
from tests.helpers_workers import Stopwatch, sql
from tests.waiting import eventually

# A long-poll woken by a NOTIFY from the other replica answers in milliseconds; its safety
# re-check comes after 5 s. Past this, LISTEN did not survive the pooler.
WOKEN_WITHIN_S = 1.0

# Settings of the environment the tests run in that would change what a test sets up.
OURS = ("JOBQ_DATABASE_URL", "JOBQ_DIRECT_DATABASE_URL", "JOBQ_DATABASE_POOLING",
        "JOBQ_PREPARED_STATEMENTS", "JOBQ_DB_TIMEOUT_S")

# What only a session of its own may run: seen as a pooled server session's last statement,
# it went through the transaction pooler.
SESSION_BOUND = re.compile(r"\bLISTEN\b|pg_(try_)?advisory_(xact_)?lock|alembic_version", re.IGNORECASE)

DUTIES_LINE = "this process now runs the background duties"
INTERRUPTED = "background duties interrupted"


def clean_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    env.update(values)
    return env


class Replica(LiveServer):
    """A ``jobq serve`` whose JOBQ_* settings are only those the test gives."""

    def start(self, timeout_s: float = 30.0) -> None:
        saved = {k: os.environ.pop(k) for k in OURS if k in os.environ}
        try:
            super().start(timeout_s)
        finally:
            os.environ.update(saved)

    def logged(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def tail(self, n: int = 60) -> str:
        return "".join(self.logged().splitlines(keepends=True)[-n:])


@contextlib.contextmanager
def services(n: int, url: str, **env: str) -> Iterator[list[Replica]]:
    servers = [Replica(url, env=env) for _ in range(n)]
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


def jobq(*args: str, env: dict[str, str], timeout_s: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    clock = Stopwatch()
    done = subprocess.run([sys.executable, "-m", "jobq.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    return done, clock.elapsed


def advisory_locks(direct_url: str) -> list[tuple[Any, ...]]:
    """The advisory locks held in this database: (backend pid, key, application name)."""
    return sql(direct_url, """
        SELECT l.pid, (l.classid::bigint << 32) | l.objid::bigint, a.application_name
          FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    """)


def last_statements(direct_url: str) -> list[str]:
    """The last statement of every other session in this database (pgbouncer's server
    sessions stay open after their clients leave, and show what they last ran)."""
    rows = sql(direct_url, "SELECT query FROM pg_stat_activity"
                           " WHERE datname = current_database() AND pid <> pg_backend_pid()")
    return [str(r[0]) for r in rows]


def rollbacks(direct_url: str) -> int:
    """Transactions that ended in an error or a rollback in this database, as the statistics
    have them (a session's counts arrive when it is idle for a while or ends)."""
    return int(sql(direct_url, "SELECT xact_rollback FROM pg_stat_database"
                               " WHERE datname = current_database()")[0][0])


def no_other_sessions(direct_url: str) -> bool:
    return not last_statements(direct_url)


def assert_ran_nothing_session_bound(direct_url: str) -> None:
    assert advisory_locks(direct_url) == [], "a session advisory lock was taken through the pooler"
    wrong = [q for q in last_statements(direct_url) if SESSION_BOUND.search(q)]
    assert wrong == [], f"session-bound statements ran through the pooler: {wrong}"


# --------------------------------------------------------------- transaction pooling


@pytest.fixture
def transaction_pooler(database_url: str) -> Iterator[Bouncer]:
    # Fewer server sessions than the two replicas' pools: clients queue for them, as in production.
    with pgbouncer(database_url, "transaction", default_pool_size=4) as bouncer:
        yield bouncer


QUEUE_LISTS = (["tp1"], ["tp2", "tp3"], ["tp1", "tp2", "tp3"], ["tp3", "tp1"], ["tp2"], ["tp1"])
PRODUCERS = 4
SINGLES = 15     # per producer
BATCHES = 6      # per producer
BATCH = 8
TOTAL = PRODUCERS * (SINGLES + BATCHES * BATCH)


class Load:
    """Producers and workers on two replicas, recording every answer."""

    def __init__(self, clients: list[httpx.AsyncClient]) -> None:
        self.clients = clients
        self.answers: Counter[tuple[str, int]] = Counter()
        self.unexpected: list[str] = []
        self.enqueued: dict[str, str] = {}  # job id -> queue
        self.acked: Counter[str] = Counter()
        self.failed_once: set[str] = set()
        self.done = asyncio.Event()
        self.serial = itertools.count()

    async def call(self, what: str, c: httpx.AsyncClient, path: str, expect: int, **body: Any) -> Any:
        r = await c.post(path, json=body)
        self.answers[(what, r.status_code)] += 1
        if r.status_code != expect:
            self.unexpected.append(f"{what} via {c.base_url}: {r.status_code} {r.text[:300]}")
            return None
        return r.json()

    def new_job(self) -> dict[str, Any]:
        n = next(self.serial)
        # Every seventh job fails once (retried at once) and is acked on its second attempt.
        return {"type": "t", "queue": f"tp{n % 3 + 1}", "payload": {"n": n, "fail_first": n % 7 == 0},
                "max_attempts": 5}

    async def producer(self, p: int) -> None:
        for i in range(SINGLES + BATCHES):
            c = self.clients[(p + i) % 2]
            if i % 3 == 2 and i // 3 < BATCHES:
                got = await self.call("enqueue batch", c, "/v1/jobs/batch", 201,
                                      jobs=[self.new_job() for _ in range(BATCH)])
                for job in (got or {}).get("jobs", []):
                    self.enqueued[job["id"]] = job["queue"]
            else:
                job = await self.call("enqueue", c, "/v1/jobs", 201, **self.new_job())
                if job:
                    self.enqueued[job["id"]] = job["queue"]
            await asyncio.sleep(0.005)

    async def worker(self, w: int, queues: list[str]) -> None:
        turn = w
        while not self.done.is_set():
            turn += 1
            c = self.clients[turn % 2]
            got = await self.call("claim", c, "/v1/leases", 200, worker_id=f"w{w}", queues=queues,
                                  limit=1 + w % 4, wait_ms=300 + 100 * w)
            for lease in (got or {}).get("leases", []):
                job, lease_id = lease["job"], lease["lease_id"]
                # Each lease operation on either replica: they share one database.
                other = self.clients[(turn + 1) % 2]
                if int(job["payload"]["n"]) % 4 == 0:
                    await self.call("heartbeat", other, f"/v1/leases/{lease_id}/heartbeat", 200)
                if job["payload"]["fail_first"] and job["id"] not in self.failed_once:
                    self.failed_once.add(job["id"])
                    await self.call("fail", other, f"/v1/leases/{lease_id}/fail", 200,
                                    error="first attempt fails", retry_in_ms=0)
                    continue
                if await self.call("ack", other, f"/v1/leases/{lease_id}/ack", 200, result={"w": w}):
                    self.acked[job["id"]] += 1
                    if len(self.acked) >= TOTAL:
                        self.done.set()


def duties_holders(direct_url: str) -> list[tuple[Any, ...]]:
    return [row for row in advisory_locks(direct_url) if row[1] == DUTIES_LOCK_KEY]


def assert_one_leader(direct_url: str, servers: list[Replica]) -> None:
    holders = duties_holders(direct_url)
    assert len(holders) == 1, f"sessions holding the duties lock: {holders}"
    app_name = str(holders[0][2])
    pids = [s.proc.pid for s in servers if s.proc]
    assert app_name.startswith("jobq-leader ") and int(app_name.rsplit(":", 1)[1]) in pids, (
        f"the duties lock is held by {app_name!r}, not by a replica's own session ({pids})")
    # Nor did the duties change hands (each replica logs when it takes them over): they
    # stop only on an error, which a statement broken by the pooler would be.
    interrupted = [line for s in servers for line in s.logged().splitlines() if INTERRUPTED in line]
    running = [s for s in servers if DUTIES_LINE in s.logged()]
    assert [s.proc.pid for s in running if s.proc] == [int(app_name.rsplit(":", 1)[1])], (
        "replicas that took the duties: " + ", ".join(s.url for s in running)
        + "\n" + "\n".join(interrupted[:5]))


async def wake_time(waiting_on: httpx.AsyncClient, enqueue_on: httpx.AsyncClient, queue: str) -> float:
    poll = asyncio.create_task(waiting_on.post("/v1/leases", json={
        "worker_id": "waker", "queues": [queue], "wait_ms": 10_000}))
    # The long-poll looks at once and then sleeps: after half a second it is asleep (if it
    # were not, it would find the job on its first look and this would pass without proving
    # anything; never the other way round).
    await asyncio.sleep(0.5)
    assert not poll.done(), (await poll).text
    r = await enqueue_on.post("/v1/jobs", json={"type": "wake", "queue": queue})
    assert r.status_code == 201, r.text
    clock = Stopwatch()
    answer = await asyncio.wait_for(poll, 15)
    elapsed = clock.elapsed
    assert answer.status_code == 200, answer.text
    assert [le["job"]["id"] for le in answer.json()["leases"]] == [r.json()["id"]]
    return elapsed


@pytest.mark.slow
async def test_two_replicas_behind_a_transaction_pooler(
        database_url: str, transaction_pooler: Bouncer) -> None:
    """The issue's run, smaller: concurrent producers and workers on two replicas whose pools
    go through pgbouncer in transaction mode. No 5xx, every job completed exactly once, one
    leader, and long-polls woken across replicas at once."""
    with services(2, transaction_pooler.url, JOBQ_DIRECT_DATABASE_URL=database_url) as servers:
        assert_one_leader(database_url, servers)
        async with httpx.AsyncClient(base_url=servers[0].url, timeout=30) as a, \
                httpx.AsyncClient(base_url=servers[1].url, timeout=30) as b:
            load = Load([a, b])
            work = asyncio.gather(*(load.producer(p) for p in range(PRODUCERS)),
                                  *(load.worker(w, qs) for w, qs in enumerate(QUEUE_LISTS)))
            try:
                await asyncio.wait_for(work, 90)
            except TimeoutError:
                pass  # told below, with what was seen
            except httpx.TransportError as exc:  # a replica hung up on a request
                load.unexpected.append(f"{exc!r} {exc.request.method} {exc.request.url}")
            tails = "\n".join(f"--- {s.url}\n{s.tail()}" for s in servers)
            server_errors = {k: n for k, n in load.answers.items() if k[1] >= 500}
            assert not server_errors, f"{server_errors}\n{load.unexpected[:10]}\n{tails}"
            assert not load.unexpected, f"{load.unexpected[:10]}\n{tails}"
            assert len(load.enqueued) == TOTAL
            assert set(load.acked) == set(load.enqueued), (
                f"{TOTAL - len(load.acked)} jobs never completed\n{load.answers}\n{tails}")
            assert set(load.acked.values()) == {1}, "a job was acked twice"
            assert len(load.failed_once) == sum(1 for n in range(TOTAL) if n % 7 == 0)

            # Nothing stranded: the queues hold only completed jobs, as many as were enqueued.
            for queue, n in Counter(load.enqueued.values()).items():
                r = await a.get(f"/v1/queues/{queue}")
                assert r.status_code == 200, r.text
                counts = {k: v for k, v in r.json()["counts"].items() if v}
                assert counts == {"completed": n}, (queue, counts)

            assert_one_leader(database_url, servers)

            # A long-poll on one replica is woken by an enqueue on the other: LISTEN is on
            # the direct connection, where it survives.
            for i, (waiting_on, enqueue_on) in enumerate([(b, a), (a, b), (b, a)]):
                elapsed = await wake_time(waiting_on, enqueue_on, f"wake{i}")
                assert elapsed < WOKEN_WITHIN_S, (
                    f"woken after {elapsed:.2f} s: the NOTIFY did not reach the other replica")


@pytest.mark.parametrize("pooling", [None, "auto", "transaction", "direct-is-pooled"])
def test_a_transaction_pooler_without_a_direct_connection_is_refused(
        database_url: str, transaction_pooler: Bouncer, pooling: str | None) -> None:
    """Without a direct connection for what needs a session, ``jobq serve`` says so in one
    line and exits, detecting the pooler by itself; it runs nothing the pooler would break."""
    env = clean_env(JOBQ_DATABASE_URL=transaction_pooler.url)
    with contextlib.ExitStack() as stack:
        if pooling == "direct-is-pooled":  # the "direct" URL is another transaction pooler
            other = stack.enter_context(pgbouncer(database_url, "transaction"))
            env["JOBQ_DIRECT_DATABASE_URL"] = other.url
        elif pooling is not None:
            env["JOBQ_DATABASE_POOLING"] = pooling
        before = rollbacks(database_url)
        done, elapsed = jobq("serve", "--port", str(free_port()), env=env)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("jobq: "), done.stderr
        assert "JOBQ_DIRECT_DATABASE_URL" in lines[0]
        assert elapsed < 10, f"refused only after {elapsed:.1f} s"
        assert_ran_nothing_session_bound(database_url)
    if pooling == "transaction":
        # Told it is a transaction pooler, it has nothing to probe: no transaction of it may
        # have failed or rolled back (the probe's own ends in a rollback by design). The
        # sessions' statistics arrive when they end.
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        eventually(lambda: no_other_sessions(database_url), what="the pooler's sessions ended")
        assert rollbacks(database_url) == before, "a statement failed in the database"


def test_migrate_goes_through_the_direct_connection(admin_url: str) -> None:
    """``jobq migrate`` with JOBQ_DATABASE_URL the transaction pooler migrates over
    JOBQ_DIRECT_DATABASE_URL; without that it refuses and leaves the database untouched
    (through the pooler, concurrent migrations ran at once and failed, or waited forever on a
    migration lock left behind on one of its server sessions)."""
    name = f"jobq_bouncer_{uuid.uuid4().hex[:10]}"
    pg.admin_execute(admin_url, pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    direct = pg.with_database(admin_url, name)
    try:
        with pgbouncer(direct, "transaction", default_pool_size=4) as bouncer:
            refused, _ = jobq("migrate", env=clean_env(JOBQ_DATABASE_URL=bouncer.url))
            assert refused.returncode == 2, refused.stderr
            (line,) = refused.stderr.splitlines()
            assert line.startswith("jobq: ") and "JOBQ_DIRECT_DATABASE_URL" in line, line
            assert sql(direct, "SELECT to_regclass('alembic_version')") == [(None,)]

            # Three at once, as replicas starting together: the migration lock is a session's,
            # on the direct connection, so one migrates and the others wait for it.
            env = clean_env(JOBQ_DATABASE_URL=bouncer.url, JOBQ_DIRECT_DATABASE_URL=direct)
            runs = [subprocess.Popen([sys.executable, "-m", "jobq.cli", "migrate"], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    for _ in range(3)]
            for run in runs:
                out, err = run.communicate(timeout=60)
                assert run.returncode == 0, err
                assert "schema is up to date" in out
            assert sql(direct, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
            assert sql(direct, "SELECT to_regclass('jobs') IS NOT NULL") == [(True,)]
            assert_ran_nothing_session_bound(direct)
    finally:
        pg.drop(admin_url, name)


def test_tokens_refuse_a_transaction_pooler_without_a_direct_connection(admin_url: str) -> None:
    """``jobq tokens`` migrates first, as ``jobq migrate`` does: through a transaction pooler
    alone it refuses, in one line (a JSON object with ``--json``), and touches nothing; with
    the direct URL its token is made there."""
    name = f"jobq_bouncer_{uuid.uuid4().hex[:10]}"
    pg.admin_execute(admin_url, pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    direct = pg.with_database(admin_url, name)
    try:
        with pgbouncer(direct, "transaction", default_pool_size=4) as bouncer:
            alone = clean_env(JOBQ_DATABASE_URL=bouncer.url)
            refused, _ = jobq("tokens", "create", "--role", "admin", env=alone)
            assert refused.returncode == 2, refused.stderr
            (line,) = refused.stderr.splitlines()
            assert line.startswith("jobq: ") and "JOBQ_DIRECT_DATABASE_URL" in line, line
            refused, _ = jobq("tokens", "create", "--role", "admin", "--json", env=alone)
            assert refused.returncode == 2, refused.stderr
            assert "JOBQ_DIRECT_DATABASE_URL" in json.loads(refused.stderr)["error"]
            assert sql(direct, "SELECT to_regclass('alembic_version')") == [(None,)]

            made, _ = jobq("tokens", "create", "--role", "admin",
                           env=clean_env(JOBQ_DATABASE_URL=bouncer.url, JOBQ_DIRECT_DATABASE_URL=direct))
            assert made.returncode == 0, made.stderr
            assert made.stdout.strip().startswith("jq_")
            assert sql(direct, "SELECT count(*) FROM tokens") == [(1,)]
            assert_ran_nothing_session_bound(direct)
    finally:
        pg.drop(admin_url, name)


# --------------------------------------------------------------- the locked table


async def assert_locked_table_answers_503(server: Replica, direct_url: str) -> None:
    """With JOBQ_DB_TIMEOUT_S=2, an enqueue that waits on a locked table answers 503 after
    about 2 s (not 201 once the lock goes), and its job never appears."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        r = await c.post("/v1/jobs", json={"type": "before", "queue": "locked"})
        assert r.status_code == 201, r.text
        with psycopg.connect(direct_url) as locker:
            locker.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
            clock = Stopwatch()
            try:
                r = await asyncio.wait_for(
                    c.post("/v1/jobs", json={"type": "locked-out", "queue": "locked"}), 12)
            except TimeoutError:
                pytest.fail(f"no answer within 12 s while the table was locked\n{server.tail()}")
            elapsed = clock.elapsed
            locker.rollback()
        assert r.status_code == 503, f"{r.status_code} after {elapsed:.1f} s: {r.text}"
        assert 1.5 <= elapsed <= 4.5, f"503 after {elapsed:.1f} s, with a 2 s deadline"
        # The statement was cancelled, not left to commit once the lock went.
        r = await c.post("/v1/jobs", json={"type": "after", "queue": "locked"})
        assert r.status_code == 201, r.text
        await asyncio.sleep(0.5)
        rows = sql(direct_url, "SELECT type FROM jobs WHERE queue = 'locked'")
        assert sorted(t for (t,) in rows) == ["after", "before"]


@pytest.mark.slow
async def test_session_pooler_with_its_defaults(database_url: str) -> None:
    """pgbouncer in session mode as installed (it refuses startup ``options``): jobq becomes
    ready with no direct URL, serves, and its statement deadline holds."""
    with pgbouncer(database_url, "session") as bouncer, \
            services(1, bouncer.url, JOBQ_DB_TIMEOUT_S="2") as (server,):
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            r = await c.post("/v1/jobs", json={"type": "t", "queue": "s", "payload": {"x": 1}})
            assert r.status_code == 201, r.text
            job = r.json()
            r = await c.post("/v1/leases", json={"worker_id": "w", "queues": ["s"], "wait_ms": 1000})
            assert r.status_code == 200, r.text
            (lease,) = r.json()["leases"]
            assert lease["job"]["id"] == job["id"]
            r = await c.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": {"ok": True}})
            assert r.status_code == 200 and r.json()["status"] == "completed", r.text
        await assert_locked_table_answers_503(server, database_url)


@pytest.mark.slow
async def test_transaction_pooler_deadline(database_url: str, transaction_pooler: Bouncer) -> None:
    """Behind a transaction pooler there are no session settings: the deadline is the
    client's, and the statement is cancelled all the same."""
    with services(1, transaction_pooler.url, JOBQ_DIRECT_DATABASE_URL=database_url,
                  JOBQ_DB_TIMEOUT_S="2") as (server,):
        await assert_locked_table_answers_503(server, database_url)
