"""Finished jobs leave the hot table (issue 24, item 5): completed, dead and cancelled jobs move to
``jobs_history`` in the statement that finishes them, every read still finds them, idempotency
keys hold across the move, and a history partition past its retention is dropped whole, its
disk given back and the counters still exact."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from jobq.core import duties
from jobq.store import history
from tests.conftest import make_settings, running_app
from tests.helpers import claim, counts, enqueue, history_made, patch_queue
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(120)

DAY_MS = 24 * 3600 * 1000


async def rows(database_url: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    # Async: the service under test runs on this event loop, and may hold a lock we wait for.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []


async def in_jobs(database_url: str, ids: list[str]) -> list[int]:
    """The ids of ``ids`` still in the hot table."""
    return [r[0] for r in await rows(database_url, "SELECT id FROM jobs WHERE id = ANY(%s) ORDER BY id",
                                     ([int(i) for i in ids],))]


async def counters_match_rows(database_url: str) -> None:
    """The trigger-kept counters agree with the rows of both tables."""
    kept = await rows(database_url, "SELECT queue, status, sum(n)::bigint FROM job_counts GROUP BY 1, 2 "
                                    "HAVING sum(n) <> 0 ORDER BY 1, 2")
    real = await rows(database_url, "SELECT queue, status, count(*) FROM jobs_all GROUP BY 1, 2 ORDER BY 1, 2")
    assert kept == real


def client_of(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq", timeout=30)


@pytest.fixture
async def narrow(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FastAPI]:
    """History partitions one second wide, and retention run by the test alone."""
    monkeypatch.setattr(duties, "RETENTION_EVERY_S", 1e12)
    async with running_app(make_settings(database_url, history_partition_s=1)) as app:
        yield app


async def test_finished_jobs_leave_the_hot_table_and_every_read_still_finds_them(
        client: httpx.AsyncClient, database_url: str) -> None:
    q = "moves"
    await patch_queue(client, q, max_attempts=1)
    done, batch_done, dead, reaped, waiting, running, live = [
        await enqueue(client, f"t{i}", queue=q) for i in range(7)]
    leases = {le["job"]["id"]: le for le in await claim(client, q, limit=4, types=["t0", "t1", "t2", "t5"])}
    assert len(await claim(client, q, types=["t3"], lease_ms=100)) == 1  # to expire, out of attempts
    r = await client.post(f"/v1/leases/{leases[done['id']]['lease_id']}/ack", json={"result": {"ok": 1}})
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    r = await client.post("/v1/leases/ack", json={"acks": [
        {"lease_id": leases[batch_done["id"]]["lease_id"], "result": "b"}]})
    assert r.json()["results"][0]["ok"], r.text
    r = await client.post(f"/v1/leases/{leases[dead['id']]['lease_id']}/fail", json={"error": "boom"})
    assert r.status_code == 200 and r.json()["status"] == "dead", r.text
    for job in (waiting, running):
        r = await client.post(f"/v1/jobs/{job['id']}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text

    # The reaper finds t3's lease expired with no attempts left: dead.
    async def reaped_dead() -> bool:
        return (await client.get(f"/v1/jobs/{reaped['id']}")).json()["status"] == "dead"
    await aeventually(reaped_dead, what="the expired lease's job dead")

    finished = [done, batch_done, dead, reaped, waiting, running]
    assert await in_jobs(database_url, [j["id"] for j in finished]) == []
    assert await in_jobs(database_url, [live["id"]]) == [int(live["id"])]

    # GET, results, listings (by queue, by status, both), and the counters see them.
    got = {j["id"]: (await client.get(f"/v1/jobs/{j['id']}")).json() for j in finished}
    assert [got[j["id"]]["status"] for j in finished] == [
        "completed", "completed", "dead", "dead", "cancelled", "cancelled"]
    assert got[done["id"]]["result"] == {"ok": 1} and got[batch_done["id"]]["result"] == "b"
    assert got[dead["id"]]["last_error"] == "boom" and got[reaped["id"]]["last_error"] == "lease expired"
    listed = (await client.get("/v1/jobs", params={"queue": q})).json()["jobs"]
    every_job = [done, batch_done, dead, reaped, waiting, running, live]
    assert [j["id"] for j in listed] == [j["id"] for j in reversed(every_job)]
    for status, want in (("completed", [batch_done, done]), ("dead", [reaped, dead]),
                         ("cancelled", [running, waiting])):
        for params in ({"queue": q, "status": status}, {"status": status}):
            page = (await client.get("/v1/jobs", params=params)).json()["jobs"]
            assert [j["id"] for j in page] == [j["id"] for j in want], (params, page)
    every = (await client.get("/v1/jobs")).json()["jobs"]
    assert len(every) == 7
    assert await counts(client, q) == {"pending": 1, "running": 0, "failed": 0, "completed": 2,
                                       "dead": 2, "cancelled": 2}
    await counters_match_rows(database_url)

    # Retry and replay move a job back with its id, as pending.
    r = await client.post(f"/v1/jobs/{waiting['id']}/retry")
    assert r.status_code == 200 and r.json()["status"] == "pending" and r.json()["id"] == waiting["id"]
    r = await client.post("/v1/dead/replay", json={"queue": q, "type": "t2"})
    assert r.status_code == 200 and r.json()["replayed"] == 1, r.text
    assert await in_jobs(database_url, [waiting["id"], dead["id"]]) == sorted([int(waiting["id"]), int(dead["id"])])
    r = await client.post(f"/v1/jobs/{done['id']}/retry")
    assert r.status_code == 409, r.text  # a completed job stays completed
    # A purge deletes from the history.
    r = await client.delete(f"/v1/dead/{reaped['id']}")
    assert r.status_code == 204, r.text
    assert (await client.get(f"/v1/jobs/{reaped['id']}")).status_code == 404
    await counters_match_rows(database_url)


async def test_a_late_ack_of_a_job_completed_and_moved_is_told_it_completed_it(
        client: httpx.AsyncClient) -> None:
    await enqueue(client, "t", queue="late")
    lease = (await claim(client, "late"))[0]
    assert (await client.post(f"/v1/leases/{lease['lease_id']}/ack")).status_code == 200
    r = await client.post(f"/v1/leases/{lease['lease_id']}/ack")
    assert r.status_code == 409 and r.json()["code"] == "lease_lost" and r.json()["already_completed"], r.text
    r = await client.post("/v1/leases/ack", json={"acks": [{"lease_id": lease["lease_id"]}]})
    assert r.json()["results"] == [{"lease_id": lease["lease_id"], "ok": False, "code": "lease_lost",
                                    "already_completed": True}]


async def test_an_idempotency_key_names_its_job_across_the_move_even_in_a_race(
        client: httpx.AsyncClient, database_url: str) -> None:
    q = "keys"
    first = await enqueue(client, "t", queue=q, idempotency_key="k")
    lease = (await claim(client, q))[0]
    assert (await client.post(f"/v1/leases/{lease['lease_id']}/ack")).status_code == 200
    r = await client.post("/v1/jobs", json={"type": "t", "queue": q, "idempotency_key": "k"})
    assert r.status_code == 200 and r.json()["id"] == first["id"] and r.json()["status"] == "completed"
    r = await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t", "queue": q, "idempotency_key": "k"}]})
    assert r.status_code == 201 and r.json()["jobs"][0]["id"] == first["id"], r.text
    assert await rows(database_url, "SELECT jobq.enqueue('keys', 't', idempotency_key => 'k')") == [(int(first["id"]),)]

    # The race: enqueues with a job's key while the job is acked (moved) and while it is new.
    for round_ in range(15):
        key = f"race-{round_}"
        job = await enqueue(client, "t", queue=q, idempotency_key=key)
        lease = (await claim(client, q))[0]
        assert lease["job"]["id"] == job["id"]
        answers = await asyncio.gather(
            client.post(f"/v1/leases/{lease['lease_id']}/ack"),
            *(client.post("/v1/jobs", json={"type": "t", "queue": q, "idempotency_key": key}) for _ in range(4)),
            client.post("/v1/jobs/batch", json={"jobs": [{"type": "t", "queue": q, "idempotency_key": key}]}),
        )
        assert answers[0].status_code == 200, answers[0].text
        assert {a.json()["id"] for a in answers[1:5]} == {job["id"]}, [a.text for a in answers]
        assert [a.status_code for a in answers[1:5]] == [200] * 4
        assert answers[5].json()["jobs"][0]["id"] == job["id"]
        # Fresh keys, all at once: one job each.
        fresh = await asyncio.gather(*(client.post("/v1/jobs", json={
            "type": "t", "queue": "keys-fresh", "idempotency_key": f"new-{round_}"}) for _ in range(5)))
        assert len({a.json()["id"] for a in fresh}) == 1 and sorted(a.status_code for a in fresh) == [200] * 4 + [201]
    assert await rows(database_url, "SELECT idempotency_key, count(*) FROM jobs_all WHERE queue = %s "
                              "GROUP BY 1 HAVING count(*) > 1", (q,)) == []


async def test_a_partition_past_its_retention_is_dropped_disk_comes_back_counters_exact(
        narrow: FastAPI, database_url: str) -> None:
    ctx = narrow.state.ctx
    q = "drop"
    async with client_of(narrow) as c:
        await patch_queue(c, q, retention_ms=0, dead_retention_ms=DAY_MS)
        await duties.delete_expired(ctx)  # partitions ahead exist before the jobs finish
        big = {"blob": "x" * 1500}
        keep = await enqueue(c, "keep", queue=q)
        n = 0
        for _ in range(6):
            r = await c.post("/v1/jobs/batch", json={"jobs": [
                {"type": "t", "queue": q, "payload": big, "idempotency_key": f"k{n + i}"} for i in range(500)]})
            assert r.status_code == 201, r.text
            leases = (await c.post("/v1/leases", json={"worker_id": "w", "queues": [q], "types": ["t"],
                                                        "limit": 500})).json()["leases"]
            r = await c.post("/v1/leases/ack", json={"acks": [{"lease_id": le["lease_id"]} for le in leases]})
            assert all(x["ok"] for x in r.json()["results"])
            n += 500
        dead_job = await enqueue(c, "dies", queue=q)
        lease = (await claim(c, q, types=["dies"]))[0]
        await c.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "x", "retry": False})
        before = await history.sizes(ctx.db)
        assert (await counts(c, q))["completed"] == n
        await counters_match_rows(database_url)

        async def dropped() -> bool:
            await duties.delete_expired(ctx)
            return (await counts(c, q))["completed"] == 0
        await aeventually(dropped, what="the finished jobs' partitions dropped")
        after = await history.sizes(ctx.db)
        # The 3,000 jobs of 1.5 kB each took more than 4.5 MB; what is left is empty partitions.
        assert before["history_bytes"] - after["history_bytes"] > 3_000_000, (before, after)
        assert await counts(c, q) == {"pending": 1, "running": 0, "failed": 0, "completed": 0,
                                      "dead": 1, "cancelled": 0}
        await counters_match_rows(database_url)
        assert (await c.get(f"/v1/jobs/{keep['id']}")).status_code == 200
        assert (await c.get(f"/v1/jobs/{dead_job['id']}")).json()["status"] == "dead"
        # The keys went with their jobs: the same key makes a new job.
        r = await c.post("/v1/jobs", json={"type": "t", "queue": q, "idempotency_key": "k0"})
        assert r.status_code == 201, r.text
        assert await rows(database_url, "SELECT count(*) FROM job_keys") == [(1,)]


async def test_a_lowered_retention_applies_to_jobs_already_finished(
        narrow: FastAPI, database_url: str) -> None:
    """Partitions are by the expiry a job finished with; lowering a queue's retention deletes
    the jobs it now says are expired at the next retention round, one by one."""
    ctx = narrow.state.ctx
    async with client_of(narrow) as c:
        q = "lowered"
        job = await enqueue(c, "t", queue=q)
        lease = (await claim(c, q))[0]
        assert (await c.post(f"/v1/leases/{lease['lease_id']}/ack")).status_code == 200
        await duties.delete_expired(ctx)
        assert (await c.get(f"/v1/jobs/{job['id']}")).status_code == 200  # 7 days
        await patch_queue(c, q, retention_ms=0)
        assert await duties.delete_expired(ctx) == 1
        assert (await c.get(f"/v1/jobs/{job['id']}")).status_code == 404
        assert (await counts(c, q))["completed"] == 0
        await counters_match_rows(database_url)


async def test_the_hot_table_stays_small_under_churn(client: httpx.AsyncClient, database_url: str) -> None:
    """Rounds of enqueue + claim + ack with the hot table vacuumed between them (as the
    maintenance duty does when autovacuum does not): its size stops growing. Before, every
    finished job stayed in it until retention."""
    # The leader's first round makes the history's partitions, a transaction each: a VACUUM
    # meanwhile keeps what those transactions may still see. Churn starts after the round.
    await aeventually(lambda: history_made(database_url), what="the leader's first history partitions")
    sizes = []
    payload = {"blob": "y" * 500}
    for _ in range(12):
        r = await client.post("/v1/jobs/batch",
                              json={"jobs": [{"type": "t", "queue": "churn", "payload": payload}] * 1000})
        assert r.status_code == 201
        leases = (await client.post("/v1/leases", json={"worker_id": "w", "queues": ["churn"],
                                                        "limit": 1000})).json()["leases"]
        r = await client.post("/v1/leases/ack", json={"acks": [{"lease_id": le["lease_id"]} for le in leases]})
        assert all(x["ok"] for x in r.json()["results"])
        await rows(database_url, "VACUUM jobs")
        sizes.append((await rows(database_url, "SELECT pg_total_relation_size('jobs')"))[0][0])
    # 12,000 jobs of 500 bytes went through: kept, their payloads alone would take 6 MB (the
    # table reached 11 MB after 8 rounds before). Live, the table holds at most a round's
    # jobs and the versions of the round before the vacuum (where they lie decides how much
    # a vacuum can cut off the end: the size moves between rounds, within this bound).
    assert max(sizes[2:]) < 4_000_000, sizes


def _migrate(database_url: str, revision: str, down: bool = False) -> None:
    from alembic import command

    from jobq.store.migrate import alembic_config, engine

    cfg = alembic_config(database_url)
    migrations = engine(database_url)
    try:
        with migrations.connect() as conn:
            cfg.attributes["connection"] = conn
            (command.downgrade if down else command.upgrade)(cfg, revision)
            conn.commit()
    finally:
        migrations.dispose()


def _state(database_url: str) -> tuple[list[Any], list[Any], list[Any]]:
    with psycopg.connect(database_url) as conn:
        jobs = conn.execute("SELECT id, status, idempotency_key, result FROM jobs ORDER BY id").fetchall()
        counted = conn.execute("SELECT queue, status, sum(n)::bigint FROM job_counts GROUP BY 1, 2 "
                               "HAVING sum(n) <> 0 ORDER BY 1, 2").fetchall()
        real = conn.execute("SELECT queue, status, count(*) FROM jobs GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    return jobs, counted, real


def test_the_migration_moves_finished_jobs_and_its_downgrade_moves_them_back(database_url: str) -> None:
    _migrate(database_url, "0009", down=True)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO queues (name, retention_ms) VALUES ('m', 1000)")
        conn.execute("""INSERT INTO jobs (queue, type, status, max_attempts, idempotency_key, completed_at, result)
                        VALUES ('m', 't', 'pending', 3, 'k1', NULL, NULL),
                               ('m', 't', 'completed', 3, 'k2', now() - interval '1 hour', '{"r": 1}'),
                               ('m', 't', 'dead', 3, NULL, now(), NULL),
                               ('m', 't', 'cancelled', 3, 'k4', now(), NULL),
                               ('gone', 't', 'completed', 3, NULL, now(), NULL)""")
    before = _state(database_url)
    _migrate(database_url, "head")
    with psycopg.connect(database_url) as conn:
        assert [r[0] for r in conn.execute("SELECT status FROM jobs ORDER BY id")] == ["pending"]
        moved = conn.execute("SELECT status, expires_at - completed_at FROM jobs_history ORDER BY id").fetchall()
        assert [m[0] for m in moved] == ["completed", "dead", "cancelled", "completed"]
        # The queue's retention (1 s), its dead retention (the default, 30 days), and the
        # defaults for a job whose queue row is missing.
        assert [m[1].total_seconds() for m in moved] == [1, 30 * 86400, 1, 7 * 86400]
        assert conn.execute("SELECT idempotency_key FROM job_keys ORDER BY 1").fetchall() == [
            ("k1",), ("k2",), ("k4",)]
        counted = conn.execute("SELECT queue, status, sum(n)::bigint FROM job_counts GROUP BY 1, 2 "
                               "HAVING sum(n) <> 0 ORDER BY 1, 2").fetchall()
        assert counted == before[1]
        assert conn.execute("SELECT jobq.enqueue('m', 't', idempotency_key => 'k2')").fetchone() == (before[0][1][0],)
        # A partition detached for its drop, the drop not run (the leader died between).
        conn.execute("CREATE TABLE jobs_history_p1_2 (LIKE jobs_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        conn.execute("ALTER TABLE jobs_history ATTACH PARTITION jobs_history_p1_2 "
                     "FOR VALUES FROM (to_timestamp(1)) TO (to_timestamp(2))")
        conn.execute("INSERT INTO jobs_history (id, queue, type, status, max_attempts, completed_at, expires_at) "
                     "VALUES (99, 'm', 't', 'completed', 3, to_timestamp(1), to_timestamp(1))")
        conn.execute("ALTER TABLE jobs_history DETACH PARTITION jobs_history_p1_2")
        conn.commit()
    _migrate(database_url, "0009", down=True)
    assert _state(database_url) == before
    _migrate(database_url, "head")


async def test_jobs_finished_before_their_partition_exists_move_into_it_and_stay_readable(
        narrow: FastAPI, database_url: str) -> None:
    """A finish never waits for a partition: before the leader made one (as right after the
    migration), the job goes to the DEFAULT partition, and the partition made later takes
    it, with the counters unchanged and every read still finding it."""
    ctx = narrow.state.ctx
    async with client_of(narrow) as c:
        q = "early"
        await patch_queue(c, q, retention_ms=30_000)
        done = await enqueue(c, "t", queue=q, idempotency_key="e")
        lease = (await claim(c, q))[0]
        assert (await c.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": 7})).status_code == 200
        where = "SELECT tableoid::regclass::text FROM jobs_history WHERE id = %s"
        assert await rows(database_url, where, (int(done["id"]),)) == [("jobs_history_default",)]
        counted = await counts(c, q)
        await duties.delete_expired(ctx)  # one-second partitions, 64 ahead: 30 s is among them
        ((table,),) = await rows(database_url, where, (int(done["id"]),))
        assert table.startswith("jobs_history_p"), table
        assert await counts(c, q) == counted
        await counters_match_rows(database_url)
        assert (await c.get(f"/v1/jobs/{done['id']}")).json()["result"] == 7
        r = await c.post("/v1/jobs", json={"type": "t", "queue": q, "idempotency_key": "e"})
        assert r.status_code == 200 and r.json()["id"] == done["id"]


async def test_a_partition_detached_but_not_dropped_is_dropped_at_the_next_round(
        narrow: FastAPI, database_url: str) -> None:
    """The drop is two transactions (detach, then counters, keys and drop together): when
    the leader dies between them, the next round finishes the drop."""
    ctx = narrow.state.ctx
    async with client_of(narrow) as c:
        await patch_queue(c, "left", retention_ms=0)
        for statement in (
                "CREATE TABLE jobs_history_p1_2 (LIKE jobs_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)",
                "ALTER TABLE jobs_history ATTACH PARTITION jobs_history_p1_2 "
                "FOR VALUES FROM (to_timestamp(1)) TO (to_timestamp(2))",
                "INSERT INTO job_keys VALUES ('left', 'k', 99)",
                "INSERT INTO jobs_history (id, queue, type, status, max_attempts, idempotency_key, completed_at, "
                "expires_at) VALUES (99, 'left', 't', 'completed', 3, 'k', to_timestamp(1), to_timestamp(1))",
                "ALTER TABLE jobs_history DETACH PARTITION jobs_history_p1_2"):
            await rows(database_url, statement)
        assert (await counts(c, "left"))["completed"] == 1  # still counted, no longer read
        assert await duties.delete_expired(ctx) == 1
        assert (await counts(c, "left"))["completed"] == 0
        assert await rows(database_url, "SELECT to_regclass('jobs_history_p1_2') IS NULL, count(*) FROM job_keys") \
            == [(True, 0)]
        await counters_match_rows(database_url)
