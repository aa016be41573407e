"""Guarantees under crashes: a worker killed with SIGKILL mid-job leaves its job to be
reclaimed after its lease ends (at-least-once), and a server killed with SIGKILL under load
has committed everything it answered 201 or 200 for."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.helpers import stored_jobs
from tests.helpers_workers import (
    DrainedServer,
    ack,
    claim,
    claim_one,
    drained_server,
    enqueue,
    expect_lost,
    get_job,
    heartbeat,
    now,
    ts,
)
from tests.waiting import aeventually

SLACK_S = 1.0

# A worker in its own process: claims one job with a 1 s lease, says which, and keeps the
# lease alive with heartbeats while it "works" until it is killed.
WORKER = r"""
import json, sys, time
import httpx

with httpx.Client(base_url=sys.argv[1], timeout=10) as c:
    r = c.post("/v1/leases", json={"worker_id": "doomed", "queues": ["default"],
                                   "lease_ms": 1000, "wait_ms": 10000})
    r.raise_for_status()
    lease = r.json()["leases"][0]
    print(json.dumps(lease), flush=True)
    while True:
        time.sleep(0.25)  # a worker's heartbeat pace
        c.post(f"/v1/leases/{lease['lease_id']}/heartbeat").raise_for_status()
"""


@pytest.fixture
def server(database_url: str) -> Iterator[DrainedServer]:
    yield from drained_server(database_url)


async def test_sigkilled_worker_leaves_its_job_to_be_reclaimed(server: DrainedServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        job = await enqueue(c, payload={"work": "long"})
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WORKER, server.url, cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 20)
            lease = json.loads(line)
            assert lease["job"]["id"] == job["id"]
            # Its heartbeats keep the job: past the 1 s lease it is still the worker's (the
            # time is the test).
            await asyncio.sleep(1.5)
            stored = await get_job(c, job["id"])
            assert stored["status"] == "running" and stored["worker_id"] == "doomed"
            assert stored["errors"] == []
            proc.kill()  # SIGKILL: no goodbye, no fail, no ack
            await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        until = ts((await get_job(c, job["id"]))["locked_until"])
        if until - now() > timedelta(seconds=0.3):
            # Still leased to the dead worker: nobody else may have it yet.
            assert await claim(c, worker_id="rescuer") == []
        rescued = await claim_one(c, worker_id="rescuer", wait_ms=10_000)
        back_at = now()
        assert rescued["job"]["id"] == job["id"]
        assert back_at >= until - timedelta(seconds=0.05)
        assert back_at - until < timedelta(seconds=1 + SLACK_S)
        assert rescued["job"]["attempt"] == 2
        assert rescued["job"]["worker_id"] == "rescuer"
        errors = rescued["job"]["errors"]
        assert [(e["attempt"], e["kind"]) for e in errors] == [(1, "lease_expired")]
        await expect_lost(c, lease["lease_id"])
        r = await ack(c, rescued["lease_id"], result="rescued")
        assert r.status_code == 200 and r.json()["status"] == "completed"


async def test_sigkilled_server_loses_nothing_it_answered_for(server: DrainedServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10,
                                 limits=httpx.Limits(max_connections=16)) as c:
        # Before the load: a lease held across the crash, and an idempotency key.
        await enqueue(c, queue="held")
        held = await claim_one(c, ["held"], lease_ms=120_000)
        keyed = await enqueue(c, "k", payload={"v": 1}, idempotency_key="before-crash")

        created: dict[str, dict[str, Any]] = {}   # job id -> payload, for every 201
        completed: dict[str, Any] = {}            # job id -> result, for every 200 ack

        async def producer(n: int) -> None:
            for k in range(100_000):
                payload = {"n": n, "k": k}
                try:
                    r = await c.post("/v1/jobs", json={"type": "load", "queue": "load",
                                                       "payload": payload})
                except httpx.HTTPError:
                    return
                if r.status_code == 201:
                    created[r.json()["id"]] = payload

        async def batch_producer() -> None:
            for k in range(100_000):
                payloads = [{"batch": k, "i": i} for i in range(20)]
                try:
                    r = await c.post("/v1/jobs/batch", json={"jobs": [
                        {"type": "load", "queue": "load", "payload": p} for p in payloads]})
                except httpx.HTTPError:
                    return
                if r.status_code == 201:
                    for job, p in zip(r.json()["jobs"], payloads, strict=True):
                        created[job["id"]] = p

        async def worker() -> None:
            while True:
                try:
                    leases = await claim(c, ["load"], worker_id="acker", limit=5)
                    for le in leases:
                        r = await ack(c, le["lease_id"], result=le["lease_id"])
                        if r.status_code == 200:
                            completed[le["job"]["id"]] = le["lease_id"]
                except (httpx.HTTPError, AssertionError):
                    return
                await asyncio.sleep(0)  # lets the producers run; no time passes

        tasks = [asyncio.create_task(producer(n)) for n in range(6)]
        tasks += [asyncio.create_task(batch_producer()), asyncio.create_task(worker())]
        await aeventually(lambda: len(created) >= 600 and len(completed) >= 50, poll_s=0.05,
                          what=lambda: f"load before the crash: {len(created)} created, {len(completed)} completed")
        server.kill()  # SIGKILL, with requests in flight
        await asyncio.wait_for(asyncio.gather(*tasks), 30)

    assert len(created) >= 100 and len(completed) >= 10, (len(created), len(completed))
    server.start()  # the same database
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        stored = await stored_jobs(c, "load")
        missing = sorted(set(created) - set(stored), key=int)
        assert missing == [], f"{len(missing)} jobs answered 201 are gone: {missing[:10]}"
        assert all(stored[j]["payload"] == p for j, p in created.items())
        for job_id, result in completed.items():
            assert stored[job_id]["status"] == "completed", stored[job_id]
            assert stored[job_id]["result"] == result
        # The lease held across the crash is still held, and the key still remembered.
        assert (await heartbeat(c, held["lease_id"])).status_code == 200
        r = await c.post("/v1/jobs", json={"type": "k", "payload": {"v": 1},
                                           "idempotency_key": "before-crash"})
        assert r.status_code == 200 and r.json()["id"] == keyed["id"]
        r = await ack(c, held["lease_id"], result="after the crash")
        assert r.status_code == 200 and r.json()["status"] == "completed"
        # And the queue still works.
        job = await enqueue(c, queue="load", payload={"after": True})
        assert (await get_job(c, job["id"]))["status"] == "pending"
