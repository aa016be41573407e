"""A rolling restart of two replicas under load (issue 14): each is stopped with SIGTERM and
started again while producers and workers keep going, sending each request to a replica that
is up, as a load balancer would. No answer is a 5xx other than a 503 with Retry-After, every
job answered 201 is completed, and none is completed by two leases."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import LiveServer
from tests.waiting import aeventually

QUEUE = "rolling"


class Balancer:
    """Sends each request to the next replica that accepts a connection, and records every
    answer's status. A request whose answer was lost goes again to another replica: with an
    idempotency key (enqueue) or a lease (ack) that is safe, and it is what clients do."""

    def __init__(self, servers: list[LiveServer]) -> None:
        self.servers = servers
        self.turn = itertools.cycle(range(len(servers)))
        self.statuses: Counter[int] = Counter()
        self.bad: list[str] = []
        self.answered: Counter[str] = Counter()  # answers by replica URL, errors too

    async def call(self, method: str, path: str, body: dict[str, object]) -> httpx.Response:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            server = self.servers[next(self.turn)]
            try:
                # A connection per request: a kept-alive one may be closed by a stopping
                # server just as a request goes out, which says nothing about the service.
                async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
                    r = await http.request(method, path, json=body)
            except httpx.TransportError:
                await asyncio.sleep(0.02)  # a client's pause before its retry
                continue
            self.statuses[r.status_code] += 1
            self.answered[server.url] += 1
            if r.status_code >= 500:
                if r.status_code != 503 or "retry-after" not in r.headers:
                    self.bad.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
                await asyncio.sleep(0.05)  # a client's pause before its retry
                continue
            return r
        raise AssertionError(f"{method} {path}: no replica answered for 30 s")


@pytest.mark.slow
async def test_a_rolling_restart_under_load_serves_no_error(database_url: str) -> None:
    servers = [LiveServer(database_url), LiveServer(database_url)]
    for s in servers:
        s.start()
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
            r = await lb.call("POST", "/v1/leases", {"worker_id": f"w{n}", "queues": [QUEUE],
                                                     "limit": 5, "wait_ms": 500})
            assert r.status_code == 200, r.text
            leases = r.json()["leases"]
            if not leases:
                if not producing:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 2:
                        return
                continue
            idle_since = None
            r = await lb.call("POST", "/v1/leases/ack", {"acks": [
                {"lease_id": le["lease_id"], "result": None} for le in leases]})
            assert r.status_code == 200, r.text
            for le, item in zip(leases, r.json()["results"], strict=True):
                # A lease that expired while a replica was down comes back to someone else;
                # a retried ack whose first attempt was stored says so.
                if item.get("ok") or item.get("already_completed"):
                    completed[le["job"]["id"]] += 1

    tasks = [asyncio.create_task(producer(n)) for n in range(2)]
    tasks += [asyncio.create_task(worker(n)) for n in range(3)]
    def takes_load(server: LiveServer) -> Callable[[], bool]:
        before = lb.answered[server.url]
        return lambda: lb.answered[server.url] >= before + 20

    try:
        await aeventually(lambda: len(completed) >= 10, what="the load flowing: jobs completed")
        for server in servers:  # one at a time, as a deploy does
            t0 = time.monotonic()
            await asyncio.to_thread(server.stop)
            assert time.monotonic() - t0 < 5, "a stop took longer than a few seconds"
            await asyncio.to_thread(server.start)
            await aeventually(takes_load(server), what=f"the restarted {server.url} answering again")
        producing = False
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    finally:
        for task in tasks:
            task.cancel()
        for server in servers:
            server.stop()

    assert lb.bad == []
    assert len(created) > 10, lb.statuses  # the load did flow
    assert set(completed) == created  # every job answered 201 was done
    assert [j for j, n in completed.items() if n > 1] == []  # by one lease each
