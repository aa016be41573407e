"""Queues exist on purpose (issue 26): a claim or a read never creates one, and
DELETE /v1/queues/{name} removes one (204, 404, 409 queue_not_empty, ?purge=true) without
ever losing a job enqueued while it runs."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import psycopg
import pytest

from jobq.core import queues as core_queues
from tests.conftest import make_settings, running_app
from tests.helpers import claim, enqueue, long_polls_idle, patch_queue, problem

pytestmark = pytest.mark.timeout(120)


async def exists(c: httpx.AsyncClient, name: str) -> bool:
    r = await c.get(f"/v1/queues/{name}")
    assert r.status_code in (200, 404), r.text
    return r.status_code == 200


async def listed(c: httpx.AsyncClient) -> list[str]:
    r = await c.get("/v1/queues", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return [q["name"] for q in r.json()["queues"]]


async def db_rows(database_url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    # Async: the leader's first round attaches history partitions under a lock that reads
    # of jobs_history wait for, and it runs on this event loop.
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(sql, args)
        return await cur.fetchall()


# --- nothing but an enqueue or a settings call creates a queue ---------------------------


async def test_a_claim_never_creates_a_queue(client: httpx.AsyncClient, database_url: str) -> None:
    r = await client.post("/v1/leases", json={"worker_id": "w", "queues": ["tenant-a.zzz"]})
    assert r.status_code == 200 and r.json()["leases"] == [], r.text
    r = await client.post("/v1/leases", json={"worker_id": "w", "queues": ["tenant-a.zzz", "b.zzz"],
                                              "limit": 5, "wait_ms": 50})
    assert r.status_code == 200 and r.json()["leases"] == [], r.text
    assert not await exists(client, "tenant-a.zzz")
    assert not await exists(client, "b.zzz")
    assert await listed(client) == []
    metrics = (await client.get("/metrics")).text
    assert "zzz" not in metrics
    assert await db_rows(database_url, "SELECT name FROM queues") == []


async def test_a_claim_waiting_on_a_queue_that_does_not_exist_gets_its_first_job(
        app: Any, client: httpx.AsyncClient) -> None:
    waiting = asyncio.create_task(client.post("/v1/leases", json={
        "worker_id": "w", "queues": ["later"], "wait_ms": 20_000}))
    await long_polls_idle(app, "later")
    assert not await exists(client, "later")  # waiting created nothing
    job = await enqueue(client, queue="later")
    r = await waiting
    assert r.status_code == 200, r.text
    assert [le["job"]["id"] for le in r.json()["leases"]] == [job["id"]]


async def test_reads_and_schedules_never_create_a_queue(client: httpx.AsyncClient,
                                                        database_url: str) -> None:
    q = "ghost"
    reads = [
        ("GET", f"/v1/queues/{q}", None, None, 404),
        ("GET", "/v1/queues", None, {"prefix": q}, 200),
        ("GET", "/v1/jobs", None, {"queue": q}, 200),
        ("GET", "/v1/jobs", None, {"queue": q, "status": "dead"}, 200),
        ("GET", "/metrics", None, None, 200),
        ("GET", "/v1/topics", None, None, 200),
        ("GET", "/v1/topics/nothing", None, None, 200),
        ("GET", "/v1/schedules", None, None, 200),
        ("GET", "/v1/workers", None, None, 200),
        ("GET", "/v1/throughput", None, None, 200),
        ("POST", "/v1/dead/replay", {"queue": q}, None, 200),
        ("DELETE", "/v1/dead", None, {"queue": q}, 200),
        ("POST", "/v1/topics/nothing/publish", {"type": "t"}, None, 200),
        # A schedule names its queue; the queue is made by its first fire (an enqueue).
        ("PUT", "/v1/schedules/nightly", {"cron": "0 2 * * *", "job": {"type": "t", "queue": q}},
         None, 201),
        ("GET", "/v1/schedules/nightly", None, None, 200),
        ("GET", "/ui", None, None, 200),
    ]
    for method, path, body, params, status in reads:
        r = await client.request(method, path, json=body, params=params)
        assert r.status_code == status, (method, path, r.status_code, r.text)
        assert not await exists(client, q), (method, path)
    assert await db_rows(database_url, "SELECT name FROM queues") == []


async def test_an_enqueue_and_a_settings_call_create_a_queue(client: httpx.AsyncClient) -> None:
    await enqueue(client, queue="by-enqueue")
    await patch_queue(client, "by-patch", paused=True)
    assert await listed(client) == ["by-enqueue", "by-patch"]


# --- DELETE /v1/queues/{name} --------------------------------------------------------------


async def test_an_unknown_queue_is_not_found(client: httpx.AsyncClient) -> None:
    problem(await client.delete("/v1/queues/nope"), 404, "not_found")
    problem(await client.delete("/v1/queues/nope", params={"purge": "true"}), 404, "not_found")


async def test_an_empty_queue_is_deleted_with_its_finished_jobs_and_shows_up_nowhere(
        client: httpx.AsyncClient, database_url: str) -> None:
    await patch_queue(client, "typo", max_attempts=3)
    done = await enqueue(client, queue="typo", idempotency_key="k1")
    [lease] = await claim(client, "typo")
    assert (await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={})).status_code == 200
    cancelled = await enqueue(client, queue="typo")
    assert (await client.post(f"/v1/jobs/{cancelled['id']}/cancel")).status_code == 200
    await enqueue(client, queue="other")
    assert 'queue="typo"' in (await client.get("/metrics")).text

    r = await client.delete("/v1/queues/typo")
    assert r.status_code == 204, r.text
    assert r.content == b""

    assert not await exists(client, "typo")
    assert await listed(client) == ["other"]
    r = await client.get("/v1/jobs", params={"queue": "typo"})
    assert r.json()["jobs"] == []
    problem(await client.get(f"/v1/jobs/{done['id']}"), 404, "not_found")
    assert 'queue="typo"' not in (await client.get("/metrics")).text
    assert await db_rows(database_url, "SELECT * FROM job_counts WHERE queue = 'typo'") == []
    assert await db_rows(database_url, "SELECT * FROM job_keys WHERE queue = 'typo'") == []
    problem(await client.delete("/v1/queues/typo"), 404, "not_found")
    # The name is free: a new enqueue makes a new queue, with the defaults, and the key is free.
    again = await enqueue(client, queue="typo", idempotency_key="k1")
    assert again["id"] != done["id"] and again["max_attempts"] == 25


async def _fill(client: httpx.AsyncClient, q: str) -> dict[str, Any]:
    """A queue with 3 pending, 1 running, 1 failed (awaiting its retry), 1 dead, 1 completed."""
    for _ in range(3):
        await enqueue(client, type_="p", queue=q, priority=-1)
    for t in ("run", "fail", "dead", "done"):
        await enqueue(client, type_=t, queue=q, priority=5)
    leases = {le["job"]["type"]: le for le in await claim(client, q, limit=4, types=["run", "fail", "dead", "done"])}
    r = await client.post(f"/v1/leases/{leases['fail']['lease_id']}/fail",
                          json={"error": "x", "retry_in_ms": 3_600_000})
    assert r.json()["status"] == "failed"
    r = await client.post(f"/v1/leases/{leases['dead']['lease_id']}/fail", json={"error": "x", "retry": False})
    assert r.json()["status"] == "dead"
    assert (await client.post(f"/v1/leases/{leases['done']['lease_id']}/ack", json={})).status_code == 200
    return leases["run"]


async def test_a_queue_holding_jobs_is_refused_with_the_counts(client: httpx.AsyncClient) -> None:
    await _fill(client, "busy")
    before = (await client.get("/v1/queues/busy")).json()["counts"]
    body = problem(await client.delete("/v1/queues/busy"), 409, "queue_not_empty")
    assert body["counts"] == {"pending": 3, "running": 1, "failed": 1, "dead": 1}
    assert body["schedules"] == [] and body["topics"] == []
    assert "3 pending" in body["detail"] and "1 dead" in body["detail"] and "purge" in body["detail"]
    assert (await client.get("/v1/queues/busy")).json()["counts"] == before  # nothing deleted
    # Dead jobs alone still keep it.
    only_dead = "graveyard"
    await enqueue(client, queue=only_dead)
    [lease] = await claim(client, only_dead)
    await client.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "x", "retry": False})
    body = problem(await client.delete(f"/v1/queues/{only_dead}"), 409, "queue_not_empty")
    assert body["counts"] == {"dead": 1}


async def test_purge_deletes_every_job_in_batches_and_running_leases_are_lost(
        client: httpx.AsyncClient, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core_queues, "DELETE_BATCH", 7)  # several batches of each kind
    running = await _fill(client, "full")
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "bulk", "queue": "full", "idempotency_key": f"b{i}"} for i in range(40)]})
    assert r.status_code == 201
    also = await claim(client, "full", limit=2, types=["bulk"])
    await enqueue(client, queue="kept")

    r = await client.delete("/v1/queues/full", params={"purge": "true"})
    assert r.status_code == 204, r.text

    assert not await exists(client, "full")
    assert await listed(client) == ["kept"]
    assert await db_rows(database_url, "SELECT count(*) FROM jobs_all WHERE queue = 'full'") == [(0,)]
    assert await db_rows(database_url, "SELECT count(*) FROM job_keys WHERE queue = 'full'") == [(0,)]
    # The running jobs' leases died with them: lost, not unknown.
    lease_id = running["lease_id"]
    problem(await client.post(f"/v1/leases/{lease_id}/ack", json={}), 409, "lease_lost")
    problem(await client.post(f"/v1/leases/{lease_id}/heartbeat", json={}), 409, "lease_lost")
    problem(await client.post(f"/v1/leases/{lease_id}/fail", json={"error": "x"}), 409, "lease_lost")
    r = await client.post("/v1/leases/ack", json={"acks": [{"lease_id": le["lease_id"]} for le in also]})
    assert [(x["ok"], x.get("code")) for x in r.json()["results"]] == [(False, "lease_lost")] * 2
    # A lease that was never handed out is still unknown.
    problem(await client.post(f"/v1/leases/{running['job']['id']}.999999/ack", json={}), 404, "not_found")
    # The other queue is untouched.
    assert (await client.get("/v1/queues/kept")).json()["counts"]["pending"] == 1


async def test_schedules_and_subscriptions_naming_the_queue_refuse_its_delete(
        client: httpx.AsyncClient) -> None:
    await patch_queue(client, "reports")
    r = await client.put("/v1/schedules/nightly", json={"cron": "0 2 * * *",
                                                        "job": {"type": "t", "queue": "reports"}})
    assert r.status_code == 201
    r = await client.put("/v1/topics/orders.placed/subscriptions/reports", json={})
    assert r.status_code in (200, 201), r.text
    for params in ({}, {"purge": "true"}):
        body = problem(await client.delete("/v1/queues/reports", params=params), 409, "queue_not_empty")
        assert body["schedules"] == ["nightly"] and body["topics"] == ["orders.placed"]
        assert body["counts"] == {}
        assert "nightly" in body["detail"] and "orders.placed" in body["detail"]
    assert await exists(client, "reports")
    assert (await client.delete("/v1/schedules/nightly")).status_code == 204
    assert (await client.delete("/v1/topics/orders.placed/subscriptions/reports")).status_code == 204
    assert (await client.delete("/v1/queues/reports")).status_code == 204


# --- enqueues while a queue is deleted -------------------------------------------------------


async def _enqueue_any(c: httpx.AsyncClient, q: str, i: int) -> list[dict[str, Any]]:
    if i % 2:
        r = await c.post("/v1/jobs", json={"type": "t", "queue": q})
        assert r.status_code == 201, r.text
        return [r.json()]
    r = await c.post("/v1/jobs/batch", json={"jobs": [{"type": "t", "queue": q}] * 3})
    assert r.status_code == 201, r.text
    return list(r.json()["jobs"])


async def test_an_enqueue_racing_a_delete_is_never_lost(client: httpx.AsyncClient) -> None:
    """Each round a queue that exists (this process knows it) is deleted while jobs are
    enqueued to it: every job answered 201 is in a queue that exists afterwards, and can
    be claimed; the delete either went first (204) or met the jobs (409)."""
    outcomes = set()
    for rnd in range(30):
        q = f"race{rnd}"
        await patch_queue(client, q)
        results = await asyncio.gather(client.delete(f"/v1/queues/{q}"),
                                       *(_enqueue_any(client, q, i) for i in range(4)))
        deleted, jobs = results[0], [j for js in results[1:] for j in js]
        assert deleted.status_code in (204, 409), deleted.text
        outcomes.add(deleted.status_code)
        assert await exists(client, q), (rnd, deleted.status_code)
        got = await claim(client, q, limit=100)
        assert sorted(le["job"]["id"] for le in got) == sorted(j["id"] for j in jobs), rnd
    assert outcomes  # (which happened depends on timing; both keep every job)


async def test_a_replica_that_knew_the_queue_creates_it_again(database_url: str) -> None:
    """Process A enqueued to the queue (and so skips creating it); process B deletes it: A's
    next enqueue, single or batch, lands in the queue made again, not in a deleted one."""
    async with running_app(make_settings(database_url)) as a, \
            running_app(make_settings(database_url)) as b:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://a") as ca, \
                httpx.AsyncClient(transport=httpx.ASGITransport(app=b), base_url="http://b") as cb:
            for path, body in (("/v1/jobs", {"type": "t", "queue": "shared"}),
                               ("/v1/jobs/batch", {"jobs": [{"type": "t", "queue": "shared"}]})):
                first = await enqueue(ca, queue="shared")
                [lease] = await claim(ca, "shared")
                assert lease["job"]["id"] == first["id"]
                await ca.post(f"/v1/leases/{lease['lease_id']}/ack", json={})
                assert (await cb.delete("/v1/queues/shared")).status_code == 204
                r = await ca.post(path, json=body)
                assert r.status_code == 201, r.text
                assert await exists(cb, "shared")
                [lease] = await claim(cb, "shared")
                await cb.post(f"/v1/leases/{lease['lease_id']}/ack", json={})
            # A settings call and a subscription through A act on the queue made again.
            assert (await cb.delete("/v1/queues/shared")).status_code == 204
            assert (await ca.patch("/v1/queues/shared", json={"paused": True})).status_code == 200
            assert (await cb.get("/v1/queues/shared")).json()["settings"]["paused"] is True
            assert (await cb.delete("/v1/queues/shared")).status_code == 204
            r = await ca.put("/v1/topics/t1/subscriptions/shared", json={})
            assert r.status_code == 201, r.text
            assert await exists(cb, "shared")


async def test_a_job_enqueued_through_sql_as_the_queue_is_deleted_gets_its_queue_back(
        client: httpx.AsyncClient, database_url: str) -> None:
    """jobq.enqueue() (SQL, in the application's transaction) reads the queue without a lock:
    a transaction that enqueued before the delete and commits after it must not leave its
    job in no queue."""
    await patch_queue(client, "outbox")
    with psycopg.connect(database_url) as app_conn:
        app_conn.execute("SELECT jobq.enqueue(queue => 'outbox', type => 'sql')")
        deleting = asyncio.create_task(client.delete("/v1/queues/outbox"))
        # The delete commits (the row is gone), then waits for this transaction.
        with psycopg.connect(database_url, autocommit=True) as probe:
            for _ in range(500):
                if not probe.execute("SELECT 1 FROM queues WHERE name = 'outbox'").fetchall():
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the delete did not commit")
        await asyncio.sleep(0.1)
        assert not deleting.done()  # it waits for the transaction that writes jobs
        app_conn.commit()
    r = await deleting
    assert r.status_code == 204, r.text
    entry = (await client.get("/v1/queues/outbox")).json()
    assert entry["counts"]["pending"] == 1
    [lease] = await claim(client, "outbox")
    assert lease["job"]["type"] == "sql"


SLOW_INSERTS = """
CREATE FUNCTION test_slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.queue = 'slow' THEN PERFORM pg_sleep(1.5); END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_slow_insert BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION test_slow_insert();
"""


async def _sleeping(database_url: str) -> bool:
    rows = await db_rows(database_url, "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
    return bool(rows)


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/jobs/batch"])
async def test_a_delete_waits_for_an_enqueue_in_flight_and_then_sees_its_job(
        client: httpx.AsyncClient, database_url: str, path: str) -> None:
    """An enqueue that has read the queue and not yet committed (held up here by a slow
    trigger) makes the delete wait for it: the delete then finds the job and answers 409."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(SLOW_INSERTS)
    await patch_queue(client, "slow")
    body = {"type": "t", "queue": "slow"} if path == "/v1/jobs" else {"jobs": [{"type": "t", "queue": "slow"}]}
    enqueuing = asyncio.create_task(client.post(path, json=body))
    for _ in range(500):
        if await _sleeping(database_url):
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the enqueue did not reach its insert")
    r = await client.delete("/v1/queues/slow")
    assert (await enqueuing).status_code == 201
    assert problem(r, 409, "queue_not_empty")["counts"] == {"pending": 1}
    assert len(await claim(client, "slow")) == 1
