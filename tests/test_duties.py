"""Background duties (issue 4): retention, the leader lock and its takeover, and lease expiry
with one of two replicas gone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from jobq.core import duties
from jobq.store.leader import DUTIES_LOCK_KEY
from tests.conftest import LiveServer, make_settings, running_app
from tests.helpers import job_reaches
from tests.waiting import aeventually, eventually

pytestmark = pytest.mark.timeout(60)

DAY_MS = 24 * 3600 * 1000


# --- helpers ---------------------------------------------------------------------------------


async def enqueue(c: httpx.AsyncClient, type_: str, queue: str, **body: Any) -> dict[str, Any]:
    r = await c.post("/v1/jobs", json={"type": type_, "queue": queue, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


async def claim_job(c: httpx.AsyncClient, job: dict[str, Any], **body: Any) -> dict[str, Any]:
    r = await c.post("/v1/leases", json={"worker_id": "w", "queues": [job["queue"]],
                                         "types": [job["type"]], **body})
    assert r.status_code == 200, r.text
    leases = r.json()["leases"]
    assert [le["job"]["id"] for le in leases] == [job["id"]], leases
    return dict(leases[0])


async def completed(c: httpx.AsyncClient, type_: str, queue: str, **body: Any) -> dict[str, Any]:
    job = await enqueue(c, type_, queue, **body)
    lease = await claim_job(c, job)
    r = await c.post(f"/v1/leases/{lease['lease_id']}/ack", json={})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def cancelled(c: httpx.AsyncClient, type_: str, queue: str, running: bool = False) -> dict[str, Any]:
    job = await enqueue(c, type_, queue)
    if running:
        await claim_job(c, job)
    r = await c.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def dead(c: httpx.AsyncClient, type_: str, queue: str) -> dict[str, Any]:
    job = await enqueue(c, type_, queue)
    lease = await claim_job(c, job)
    r = await c.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "x", "retry": False})
    assert r.status_code == 200 and r.json()["status"] == "dead", r.text
    return dict(r.json())


async def patch(c: httpx.AsyncClient, name: str, **settings: Any) -> dict[str, Any]:
    r = await c.patch(f"/v1/queues/{name}", json=settings)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def exists(c: httpx.AsyncClient, job: dict[str, Any]) -> bool:
    r = await c.get(f"/v1/jobs/{job['id']}")
    assert r.status_code in (200, 404), r.text
    return r.status_code == 200


def client_of(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq",
                             timeout=30)


@pytest.fixture
async def quiet_app(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FastAPI]:
    """An app whose leader never runs retention on its own, so the test alone decides when
    delete_expired runs (the loop reads the interval on every round). History partitions
    are one second wide, so that a retention of 0 is due within a second."""
    monkeypatch.setattr(duties, "RETENTION_EVERY_S", 1e12)
    async with running_app(make_settings(database_url, history_partition_s=1)) as app:
        yield app


async def retention_until(ctx: Any, c: httpx.AsyncClient, jobs: list[dict[str, Any]]) -> int:
    """Run retention until ``jobs`` are gone (their history partition's range has passed, one
    second at most); returns how many jobs it deleted meanwhile."""
    deleted = 0

    async def all_gone() -> bool:
        nonlocal deleted
        deleted += await duties.delete_expired(ctx)
        return not any([await exists(c, j) for j in jobs])
    await aeventually(all_gone, what="the expired jobs deleted")
    return deleted


# --- retention -------------------------------------------------------------------------------


async def test_retention_deletes_old_finished_jobs_only(quiet_app: FastAPI) -> None:
    ctx = quiet_app.state.ctx
    async with client_of(quiet_app) as c:
        q = "ret"
        await patch(c, q, retention_ms=0, dead_retention_ms=DAY_MS)
        await duties.delete_expired(ctx)  # the partitions ahead, as the leader makes them
        old_done = await completed(c, "done", q, idempotency_key="k-old")
        old_cancelled = await cancelled(c, "cancel", q)
        old_cancelled_running = await cancelled(c, "cancel.run", q, running=True)
        old_dead = await dead(c, "dead", q)
        waiting = [await enqueue(c, "pending", q),
                   await enqueue(c, "delayed", q, delay_ms=3_600_000)]
        failed = await enqueue(c, "failed", q)
        lease = await claim_job(c, failed)
        r = await c.post(f"/v1/leases/{lease['lease_id']}/fail",
                         json={"error": "later", "retry_in_ms": 3_600_000})
        assert r.json()["status"] == "failed"
        running = await enqueue(c, "running", q)
        await claim_job(c, running)
        other_queue_done = await completed(c, "done", "ret-default")  # 7 days retention

        # The key is remembered while its job exists.
        r = await c.post("/v1/jobs", json={"type": "done", "queue": q, "idempotency_key": "k-old"})
        assert r.status_code == 200 and r.json()["id"] == old_done["id"], r.text

        gone = [old_done, old_cancelled, old_cancelled_running]
        assert await retention_until(ctx, c, gone) == 3
        kept = [old_dead, *waiting, failed, running, other_queue_done]
        assert [await exists(c, j) for j in kept] == [True] * len(kept)
        assert await duties.delete_expired(ctx) == 0  # nothing else is due

        # Dead jobs go by dead_retention_ms, not retention_ms; lowered, it applies to the
        # jobs already dead.
        await patch(c, q, dead_retention_ms=0)
        assert await duties.delete_expired(ctx) == 1
        assert not await exists(c, old_dead)

        young_done = await completed(c, "done.young", q)
        young_cancelled = await cancelled(c, "cancel.young", q)
        assert await retention_until(ctx, c, [young_done, young_cancelled]) == 2
        still = [*waiting, failed, running, other_queue_done]
        assert [await exists(c, j) for j in still] == [True] * len(still)
        counts = (await c.get(f"/v1/queues/{q}")).json()["counts"]
        assert counts == {"pending": 2, "running": 1, "failed": 1, "completed": 0, "dead": 0,
                          "cancelled": 0}

        # Gone with its job, the idempotency key is free again.
        r = await c.post("/v1/jobs", json={"type": "done", "queue": q, "idempotency_key": "k-old"})
        assert r.status_code == 201 and r.json()["id"] != old_done["id"], r.text


async def test_retention_works_through_more_than_one_batch(quiet_app: FastAPI) -> None:
    ctx = quiet_app.state.ctx
    n = duties.RETENTION_BATCH + 500
    async with client_of(quiet_app) as c:
        q = "ret-bulk"
        await patch(c, q, retention_ms=0)
        done = []
        for start in range(0, n, 1000):
            size = min(1000, n - start)
            r = await c.post("/v1/jobs/batch", json={"jobs": [{"type": "b", "queue": q}] * size})
            assert r.status_code == 201, r.text
            done.extend(r.json()["jobs"])
            r = await c.post("/v1/leases", json={"worker_id": "w", "queues": [q], "limit": size})
            leases = r.json()["leases"]
            assert len(leases) == size
            r = await c.post("/v1/leases/ack",
                             json={"acks": [{"lease_id": le["lease_id"]} for le in leases]})
            assert all(x["ok"] for x in r.json()["results"])
        keep = await enqueue(c, "b", q)
        # No partition was made yet: the jobs went to the DEFAULT one, deleted in batches.
        assert await retention_until(ctx, c, [done[0], done[-1]]) == n
        counts = (await c.get(f"/v1/queues/{q}")).json()["counts"]
        assert counts["completed"] == 0 and counts["pending"] == 1
        assert await exists(c, keep)


async def test_leader_loop_runs_retention_on_its_own(
    database_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(duties, "RETENTION_EVERY_S", 0.2)
    async with running_app(make_settings(database_url, history_partition_s=1)) as app, client_of(app) as c:
        await aeventually(lambda: app.state.ctx.is_leader, what="this process leading")
        q = "ret-loop"
        await patch(c, q, retention_ms=0)
        waiting = await enqueue(c, "w", q)
        first = await completed(c, "done", q)
        await aeventually(lambda: gone(c, first), what="the first job deleted by the loop")
        # And again later: the loop keeps going, not only once at start.
        second = await cancelled(c, "cancel", q)
        await aeventually(lambda: gone(c, second), what="the second job deleted by the loop")
        assert await exists(c, waiting)


async def gone(c: httpx.AsyncClient, job: dict[str, Any]) -> bool:
    return not await exists(c, job)


# --- leadership across replicas --------------------------------------------------------------


def lock_holder(database_url: str) -> tuple[int, int] | None:
    """(backend pid, service pid) of the session holding the duties lock in this database."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            """
            SELECT l.pid, split_part(a.application_name, ':', 2)
              FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND ((l.classid::bigint << 32) | l.objid::bigint) = %(key)s
               AND l.objsubid = 1
               AND a.application_name LIKE 'jobq-leader %%'
            """,
            {"key": DUTIES_LOCK_KEY},
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def last_try(database_url: str, server: LiveServer) -> datetime | None:
    """When ``server``'s leader session last ran its try for the duties lock (each round of
    its takeover loop runs it again on the same session), or None before its first try."""
    assert server.proc is not None
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT query_start FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE %(name)s AND query LIKE '%%pg_try_advisory_lock%%'",
            {"name": f"jobq-leader %:{server.proc.pid}"}).fetchone()
    return row[0] if row else None


def owns(server: LiveServer, pid: int) -> bool:
    """Whether the lock's session is this server's (its process id, as the session names it)."""
    assert server.proc is not None
    return server.proc.pid == pid


@pytest.fixture
def two_servers(database_url: str) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two replicas on one database; the first is the leader, as it started alone."""
    a, b = LiveServer(database_url), LiveServer(database_url)
    try:
        a.start()
        eventually(lambda: lock_holder(database_url), poll_s=0.05, what="the first replica holding the lock")
        b.start()
        yield a, b
    finally:
        a.stop()
        b.stop()


async def test_killing_the_leader_hands_duties_to_the_other_replica(
    database_url: str, two_servers: tuple[LiveServer, LiveServer],
) -> None:
    a_srv, b_srv = two_servers
    holder = lock_holder(database_url)
    assert holder is not None
    old_pid, old_owner = holder
    assert owns(a_srv, old_owner) and not owns(b_srv, old_owner)
    # B is running and trying for the lock, but does not hold it while A lives.
    tries: set[datetime] = set()

    def b_tried_twice() -> bool:
        if (at := last_try(database_url, b_srv)) is not None:
            tries.add(at)
        return len(tries) >= 2

    await aeventually(b_tried_twice, poll_s=0.05, what="two tries of B's for the lock")
    assert lock_holder(database_url) == holder

    async with httpx.AsyncClient(base_url=b_srv.url, timeout=10) as b:
        q = "takeover"
        done = [await completed(b, "done", q) for _ in range(2)]
        gone_cancelled = await cancelled(b, "cancel", q)
        waiting = await enqueue(b, "wait", q)

        a_srv.kill()  # SIGKILL: no clean shutdown, no unlock
        # They outlived A; only now do they fall due, so whoever deletes them is alive: B.
        for job in (*done, gone_cancelled, waiting):
            assert await exists(b, job)
        await patch(b, q, retention_ms=0)

        def taken_over() -> tuple[int, int] | None:
            new = lock_holder(database_url)
            return new if new is not None and new[0] != old_pid else None

        new = await aeventually(taken_over, poll_s=0.05, what="another replica taking the duties over")
        assert owns(b_srv, new[1]), "the lock went to a session that is not B's"

        # B's retention (run on taking over, then every 10 s) deletes them.
        async def all_gone() -> bool:
            return not any([await exists(b, j) for j in (*done, gone_cancelled)])

        await aeventually(all_gone, poll_s=0.1, what="B's retention deleting the finished jobs")
        assert await exists(b, waiting)
        assert (await b.get("/readyz")).status_code == 200


async def test_lease_expiry_with_one_of_two_replicas_alive(
    database_url: str, two_servers: tuple[LiveServer, LiveServer],
) -> None:
    a_srv, b_srv = two_servers
    async with httpx.AsyncClient(base_url=a_srv.url, timeout=10) as a, \
            httpx.AsyncClient(base_url=b_srv.url, timeout=10) as b:
        q = "expiry"
        job = await enqueue(a, "slow", q)
        lease = await claim_job(a, job, lease_ms=500)
        a_srv.kill()  # the leader, and the replica that handed out the lease

        back = await job_reaches(b, job["id"], "pending")
        assert [e["kind"] for e in back["errors"]] == ["lease_expired"]
        r = await b.post(f"/v1/leases/{lease['lease_id']}/ack", json={})
        assert r.status_code == 409 and r.json()["code"] == "lease_lost", r.text

        # And again for a lease B itself handed out.
        second = await claim_job(b, job, lease_ms=300)
        assert second["job"]["attempt"] == 2
        back = await job_reaches(b, job["id"], "pending")
        assert [e["kind"] for e in back["errors"]] == ["lease_expired", "lease_expired"]
        third = await claim_job(b, job)
        r = await b.post(f"/v1/leases/{third['lease_id']}/ack", json={})
        assert r.status_code == 200 and r.json()["status"] == "completed", r.text

        # B did both expiries, and its own counters say so.
        expired = [s.value
                   for family in text_string_to_metric_families((await b.get("/metrics")).text)
                   for s in family.samples
                   if s.name == "jobq_jobs_total"
                   and s.labels == {"queue": q, "event": "lease_expired"}]
        assert expired == [2.0]
