"""The contract's Guarantees under concurrency: concurrent claimers never share a job, no two
live leases on one job, a job is completed at most once and runs until acked (at-least-once),
idempotency keys are remembered while their job exists, and nothing a client sends makes the
service answer 500. Most of these run against a real ``jobq serve`` over TCP."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import make_settings, running_app
from tests.helpers import history_made
from tests.helpers_workers import (
    DrainedServer,
    ack,
    claim,
    claim_one,
    counts,
    drained_server,
    enqueue,
    enqueue_many,
    fail,
    get_job,
    heartbeat,
    sql,
)
from tests.waiting import aeventually

STATUSES = ("pending", "running", "failed", "completed", "dead", "cancelled")


@pytest.fixture
def server(database_url: str) -> Iterator[DrainedServer]:
    yield from drained_server(database_url)


def only(**nonzero: int) -> dict[str, int]:
    return {s: nonzero.get(s, 0) for s in STATUSES}


def asgi_client(application: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=application),
                             base_url="http://jobq", timeout=30)


async def test_concurrent_claimers_never_get_the_same_job(server: DrainedServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                 limits=httpx.Limits(max_connections=32)) as c:
        jobs = await enqueue_many(c, [{"type": "t", "payload": {"i": i}} for i in range(400)])
        start = asyncio.Event()

        async def claimer(n: int) -> list[dict[str, Any]]:
            got: list[dict[str, Any]] = []
            await start.wait()
            while leases := await claim(c, worker_id=f"w{n}", limit=3):
                got.extend(leases)
            return got

        tasks = [asyncio.create_task(claimer(n)) for n in range(16)]
        start.set()
        per_worker = await asyncio.gather(*tasks)
        leases = [le for got in per_worker for le in got]
        job_ids = Counter(le["job"]["id"] for le in leases)
        assert [j for j, n in job_ids.items() if n > 1] == []
        assert set(job_ids) == {j["id"] for j in jobs}
        assert len({le["lease_id"] for le in leases}) == 400
        # Each job's holder is the worker that got it.
        for n, got in enumerate(per_worker):
            assert all(le["job"]["worker_id"] == f"w{n}" for le in got)
        assert sum(1 for got in per_worker if got) > 1, "the claims should have overlapped"
        assert await counts(c) == only(running=400)


async def test_2000_jobs_through_8_workers_complete_exactly_once(
    server: DrainedServer, database_url: str,
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                 limits=httpx.Limits(max_connections=16)) as c:
        jobs = await enqueue_many(c, [{"type": "t", "payload": {"i": i}} for i in range(2000)])
        wanted = {j["id"] for j in jobs}
        claimed: Counter[str] = Counter()
        lease_of: dict[str, str] = {}
        acked: Counter[str] = Counter()
        refused: list[tuple[str, Any]] = []

        async def worker(n: int) -> None:
            name = f"w{n}"
            while leases := await claim(c, worker_id=name, limit=10, wait_ms=100):
                claimed.update(le["job"]["id"] for le in leases)
                lease_of.update((le["job"]["id"], le["lease_id"]) for le in leases)
                if n % 2:  # half the workers ack in batches, half one by one
                    body = [{"lease_id": le["lease_id"],
                             "result": {"by": name, "lease": le["lease_id"]}} for le in leases]
                    r = await c.post("/v1/leases/ack", json={"acks": body})
                    assert r.status_code == 200, r.text
                    for le, res in zip(leases, r.json()["results"], strict=True):
                        assert res["lease_id"] == le["lease_id"]
                        if res["ok"]:
                            acked[le["job"]["id"]] += 1
                        else:
                            refused.append((le["lease_id"], res))
                else:
                    for le in leases:
                        result = {"by": name, "lease": le["lease_id"]}
                        r = await ack(c, le["lease_id"], result=result)
                        if r.status_code == 200:
                            assert r.json()["status"] == "completed"
                            acked[le["job"]["id"]] += 1
                        else:
                            refused.append((le["lease_id"], r.text))

        await asyncio.gather(*(worker(n) for n in range(8)))
        assert refused == []
        assert set(claimed) == wanted and max(claimed.values()) == 1  # no job handed out twice
        assert set(acked) == wanted and max(acked.values()) == 1
        assert await counts(c) == only(completed=2000)
        # What the database holds: each job completed once, by the lease that acked it.
        # A synchronous read of jobs_history: not while the leader's first round may hold its lock.
        await aeventually(lambda: history_made(database_url), what="the history partitions")
        rows = sql(database_url, "SELECT id::text, status, attempt, result FROM jobs_all")
        assert len(rows) == 2000
        assert {r[1] for r in rows} == {"completed"} and {r[2] for r in rows} == {1}
        assert {r[0]: r[3]["lease"] for r in rows} == lease_of


async def test_no_two_live_leases_while_leases_expire_and_jobs_are_reclaimed(
    server: DrainedServer,
) -> None:
    """Workers that are often too slow for their 100 ms lease: each job's lease moves on, and
    once a newer lease of a job has been handed out, no older one ever heartbeats or acks."""
    rng = random.Random(7)
    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                 limits=httpx.Limits(max_connections=16)) as c:
        # Expiries are the point here: neither attempts nor the poison-pill rule may end a job.
        r = await c.patch("/v1/queues/default", json={"max_lease_expiries": 1000})
        assert r.status_code == 200, r.text
        jobs = await enqueue_many(c, [{"type": "t", "payload": {"i": i}, "max_attempts": 1000}
                                      for i in range(60)])
        wanted = {j["id"] for j in jobs}
        # job id -> [(lease id, when its claim answer arrived)], in claim order
        issued: dict[str, list[tuple[str, float]]] = defaultdict(list)
        # job id -> [(lease id, op, when the request was sent)] for the ops that succeeded
        wins: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
        done: set[str] = set()
        # The simulated workers' budget, not a wait: a broken run stops here, and the
        # assertion after says what was left undone.
        deadline = time.monotonic() + 15

        async def op(name: str, job_id: str, lease_id: str, **body: Any) -> None:
            sent = time.monotonic()
            r = await c.post(f"/v1/leases/{lease_id}/{name}", json=body)
            assert r.status_code in (200, 409), r.text
            if r.status_code == 200:
                wins[job_id].append((lease_id, name, sent))
                if name == "ack":
                    done.add(job_id)

        async def worker(n: int) -> None:
            while time.monotonic() < deadline and len(done) < len(wanted):
                leases = await claim(c, worker_id=f"w{n}", lease_ms=100, wait_ms=300)
                if not leases:
                    continue
                lease_id, job_id = leases[0]["lease_id"], leases[0]["job"]["id"]
                issued[job_id].append((lease_id, time.monotonic()))
                roll = rng.random()
                if roll < 0.3:
                    await op("ack", job_id, lease_id, result=lease_id)
                    continue
                if roll < 0.65:  # keeps its lease a little, then stalls
                    await asyncio.sleep(0.03)  # a slow worker, by design
                    await op("heartbeat", job_id, lease_id, extend_ms=100)
                await asyncio.sleep(rng.uniform(0.12, 0.3))  # stalls past its 100 ms lease, by design
                await op("heartbeat", job_id, lease_id)
                await op("ack", job_id, lease_id, result=lease_id)

        await asyncio.gather(*(worker(n) for n in range(8)))
        assert done == wanted, "every job should have been completed"
        for job_id in wanted:
            leases = issued[job_id]
            acks = [w for w in wins[job_id] if w[1] == "ack"]
            assert len(acks) == 1, (job_id, acks)  # completed at most once
            assert acks[0][0] == leases[-1][0], "only the newest lease can complete the job"
            for lease_id, name, sent in wins[job_id]:
                k = [lid for lid, _ in leases].index(lease_id)
                if k + 1 < len(leases):
                    assert sent < leases[k + 1][1], (
                        f"{name} of {lease_id} sent after a newer lease was handed out, and won")
        assert sum(len(v) for v in issued.values()) > len(wanted), "some leases should have expired"
        assert any(name == "heartbeat" for w in wins.values() for _, name, _ in w)
        assert await counts(c) == only(completed=60)
        for job_id in rng.sample(sorted(wanted), 10):
            stored = await get_job(c, job_id)
            assert stored["result"] == issued[job_id][-1][0]
            assert stored["attempt"] == len(issued[job_id])
            assert len(stored["errors"]) == len(issued[job_id]) - 1
            for old, _ in issued[job_id]:
                r = await heartbeat(c, old)
                assert r.status_code == 409, r.text


async def test_concurrent_acks_of_one_lease_complete_it_once(client: httpx.AsyncClient) -> None:
    await enqueue_many(client, [{"type": "t"}] * 20)
    leases = await claim(client, limit=20)

    async def race(lease: dict[str, Any]) -> list[httpx.Response]:
        single = [ack(client, lease["lease_id"], result=f"single-{k}") for k in range(4)]
        batch = [client.post("/v1/leases/ack", json={"acks": [
            {"lease_id": lease["lease_id"], "result": f"batch-{k}"}]}) for k in range(2)]
        failing = [fail(client, lease["lease_id"], error="racing fail", retry_in_ms=0)]
        return list(await asyncio.gather(*single, *batch, *failing))

    all_answers = await asyncio.gather(*(race(le) for le in leases))
    for lease, answers in zip(leases, all_answers, strict=True):
        singles, batches, fails = answers[:4], answers[4:6], answers[6:]
        wins = [f"single-{k}" for k, r in enumerate(singles) if r.status_code == 200]
        wins += [f"batch-{k}" for k, r in enumerate(batches) if r.json()["results"][0]["ok"]]
        fail_won = fails[0].status_code == 200
        assert len(wins) + fail_won == 1, (wins, fail_won)
        for r in singles + fails:
            assert r.status_code in (200, 409), r.text
        stored = await get_job(client, lease["job"]["id"])
        if fail_won:
            assert stored["status"] == "failed" and stored["result"] is None
        else:
            assert stored["status"] == "completed" and stored["result"] == wins[0]


async def test_late_ack_racing_the_reclaim_completes_at_most_once(
    client: httpx.AsyncClient,
) -> None:
    """An ack right at the lease's end, against the reaper and a waiting claimer: either the
    ack wins and the job is never handed out again, or the new holder gets it."""
    jobs = await enqueue_many(client, [{"type": "t", "payload": {"i": i}} for i in range(20)])
    first = await claim(client, limit=20, lease_ms=100)
    grabbed: list[dict[str, Any]] = []

    async def claimer() -> None:
        while leases := await claim(client, worker_id="w2", limit=20, wait_ms=1500):
            grabbed.extend(leases)

    async def late_acker(lease: dict[str, Any], delay: float) -> httpx.Response:
        await asyncio.sleep(delay)  # the time is the test: acks spread around the lease end
        return await ack(client, lease["lease_id"], result="late")

    task = asyncio.create_task(claimer())
    rng = random.Random(3)
    answers = await asyncio.gather(*(late_acker(le, rng.uniform(0.05, 0.35)) for le in first))
    await task
    late_ok = {le["job"]["id"]
               for le, r in zip(first, answers, strict=True) if r.status_code == 200}
    assert all(r.status_code in (200, 409) for r in answers)
    again = {le["job"]["id"] for le in grabbed}
    assert late_ok.isdisjoint(again), "a completed job was handed out again"
    assert late_ok | again == {j["id"] for j in jobs}
    for le in grabbed:
        assert (await ack(client, le["lease_id"], result="second")).status_code == 200
    for j in jobs:
        stored = await get_job(client, j["id"])
        assert stored["status"] == "completed"
        assert stored["result"] == ("late" if j["id"] in late_ok else "second")


async def test_a_job_runs_until_acked_dead_or_cancelled(client: httpx.AsyncClient) -> None:
    flaky = await enqueue(client, payload={"n": "flaky"})
    slow = await enqueue(client, payload={"n": "slow"})
    cancelled = await enqueue(client, payload={"n": "cancelled"}, delay_ms=200)
    poison = await enqueue(client, payload={"n": "poison"})
    assert (await client.post(f"/v1/jobs/{cancelled['id']}/cancel")).status_code == 200
    runs: Counter[str] = Counter()
    fails_left = {flaky["id"]: 2, poison["id"]: 0}
    expiries_left = {slow["id"]: 2}
    while leases := await claim(client, limit=10, wait_ms=1500):
        for le in leases:
            job_id = le["job"]["id"]
            runs[job_id] += 1
            if job_id == poison["id"]:
                r = await fail(client, le["lease_id"], error="poison", retry=False)
            elif fails_left.get(job_id, 0) > 0:
                fails_left[job_id] -= 1
                r = await fail(client, le["lease_id"], error="flaky", retry_in_ms=0)
            elif expiries_left.get(job_id, 0) > 0:
                expiries_left[job_id] -= 1
                r = await heartbeat(client, le["lease_id"], extend_ms=100)  # then abandon it
            else:
                r = await ack(client, le["lease_id"], result="done")
            assert r.status_code == 200, r.text
    assert runs == {flaky["id"]: 3, slow["id"]: 3, poison["id"]: 1}
    assert (await get_job(client, flaky["id"]))["status"] == "completed"
    assert (await get_job(client, slow["id"]))["status"] == "completed"
    assert (await get_job(client, poison["id"]))["status"] == "dead"
    assert (await get_job(client, cancelled["id"]))["status"] == "cancelled"


async def test_idempotency_key_is_remembered_while_its_job_exists(database_url: str) -> None:
    body = {"type": "t", "payload": {"k": 1}, "idempotency_key": "once"}
    async with running_app(make_settings(database_url)) as application, \
            asgi_client(application) as c:
        first = await c.post("/v1/jobs", json=body)
        assert first.status_code == 201
        lease = await claim_one(c)
        assert (await ack(c, lease["lease_id"], result="r")).status_code == 200
        # Long after it ran, the key still names the job: nothing new is enqueued.
        again = await c.post("/v1/jobs", json=body)
        assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
        assert again.json()["status"] == "completed"
        assert await claim(c) == []
        r = await c.patch("/v1/queues/default", json={"retention_ms": 0})
        assert r.status_code == 200
    # A fresh process becomes the leader and runs retention at once.
    async with running_app(make_settings(database_url)) as application, \
            asgi_client(application) as c:
        job_id = first.json()["id"]

        async def gone() -> bool:
            return (await c.get(f"/v1/jobs/{job_id}")).status_code == 404

        await aeventually(gone, what="retention removed the completed job")
        # Retention removed the job, and the key with it.
        fresh = await c.post("/v1/jobs", json=body)
        assert fresh.status_code == 201 and fresh.json()["id"] != job_id


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    choices: list[Any] = [
        None, True, -1, 0, 2**63, -(2**63) - 1, 10**40, 1.5e308, -0.0, "", "x" * 300,
        "\u0000", "\U0001f600", "1.1", "../../etc", [], {},
    ]
    if depth < 2:
        choices += [[_random_value(rng, depth + 1)], {"a": _random_value(rng, depth + 1)}]
    return rng.choice(choices)


async def test_random_worker_requests_never_answer_500(server: DrainedServer) -> None:
    rng = random.Random(11)
    fields = {
        "/v1/leases": ["worker_id", "queues", "types", "limit", "lease_ms", "wait_ms"],
        "heartbeat": ["extend_ms"],
        "ack": ["result"],
        "fail": ["error", "retry", "retry_in_ms"],
        "/v1/leases/ack": ["acks"],
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        await enqueue_many(c, [{"type": "t"}] * 50)
        held = await claim(c, limit=50)
        statuses: Counter[int] = Counter()
        for i in range(300):
            target = rng.choice(list(fields))
            body: dict[str, Any] = {}
            valid = {"worker_id": "w", "queues": ["default"], "wait_ms": 0}
            for name in fields[target]:
                roll = rng.random()
                if roll < 0.5:
                    body[name] = _random_value(rng)
                elif roll < 0.8 and name in valid:
                    body[name] = valid[name]
            if rng.random() < 0.1:
                body["unknown"] = 1
            if target == "/v1/leases/ack" and rng.random() < 0.5:
                lease_id = rng.choice([held[i % 50]["lease_id"], "1.x", "\u00b2.1"])
                body["acks"] = [{"lease_id": lease_id, "result": _random_value(rng)}]
            if target in ("heartbeat", "ack", "fail"):
                lease_id = rng.choice([held[i % 50]["lease_id"], "0.0", "1.\u00b2", "9" * 25])
                url = f"/v1/leases/{lease_id}/{target}"
            else:
                url = target
            r = await c.post(url, json=body)
            statuses[r.status_code] += 1
            assert r.status_code < 500, (url, body, r.status_code, r.text)
        assert statuses[200] > 0 and statuses[422] > 0, statuses
