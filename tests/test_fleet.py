"""Several serving processes on one database behave as one queue: `jobq serve --workers N`
(one scrape reaches one process, and still counts what all did: prometheus-client's
multiprocess mode) and separate replicas (each counts its own; Prometheus sums targets)."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import pytest

from tests.conftest import LiveServer
from tests.helpers import job_events

JOBS = 60


async def _fresh(url: str, method: str, path: str, **kw: object) -> httpx.Response:
    # A connection per call, so that the kernel spreads them over the worker processes.
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        return await c.request(method, path, **kw)  # type: ignore[arg-type]


async def _drain(urls: list[str], queue: str) -> list[str]:
    """Concurrent claimers on every URL until the queue is empty; acks all; the job ids leased."""
    leased: list[str] = []

    async def claimer(url: str) -> None:
        while True:
            r = await _fresh(url, "POST", "/v1/leases", json={
                "worker_id": "w", "queues": [queue], "limit": 3})
            assert r.status_code == 200, r.text
            leases = r.json()["leases"]
            if not leases:
                return
            for le in leases:
                leased.append(le["job"]["id"])
                a = await _fresh(url, "POST", f"/v1/leases/{le['lease_id']}/ack", json={"result": 1})
                assert a.status_code == 200, a.text

    await asyncio.gather(*(claimer(url) for url in urls for _ in range(4)))
    return leased


@pytest.mark.slow
async def test_workers_n_metrics_add_up(database_url: str) -> None:
    server = LiveServer(database_url, args=["--workers", "2"])
    server.start()
    try:
        await asyncio.gather(*(_fresh(server.url, "POST", "/v1/jobs", json={"type": "t", "queue": "m"})
                               for _ in range(JOBS)))
        leased = await _drain([server.url], "m")
        assert len(leased) == JOBS and len(set(leased)) == JOBS
        for _ in range(6):  # each scrape may reach either process: each must tell the total
            scrape = await _fresh(server.url, "GET", "/metrics")
            events = job_events(scrape.text, "m")
            assert events["enqueued"] == JOBS, events
            assert events["claimed"] == JOBS and events["completed"] == JOBS, events
    finally:
        server.stop()


@pytest.mark.slow
async def test_replicas_sum_and_lease_each_job_once(replicas: tuple[LiveServer, LiveServer]) -> None:
    a, b = replicas
    await asyncio.gather(*(_fresh((a, b)[i % 2].url, "POST", "/v1/jobs", json={"type": "t", "queue": "r"})
                           for i in range(JOBS)))
    leased = await _drain([a.url, b.url], "r")
    assert len(leased) == JOBS and len(set(leased)) == JOBS  # none leased twice
    total: Counter[str] = Counter()
    for server in (a, b):
        total += job_events((await _fresh(server.url, "GET", "/metrics")).text, "r")
    assert total["enqueued"] == JOBS and total["claimed"] == JOBS and total["completed"] == JOBS, total
