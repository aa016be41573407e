"""Shared helpers for the worker-side tests (leases, concurrency, kills): thin wrappers over
the HTTP API that assert the status they expect, so a test reads as the scenario it checks."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from jobq.core import leases
from tests.conftest import LiveServer

QUEUE = "default"


def ts(value: str) -> datetime:
    """An RFC 3339 time from the wire; it must carry a UTC offset."""
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() is not None and parsed.utcoffset().total_seconds() == 0, value
    return parsed


def now() -> datetime:
    return datetime.now(UTC)


def code(resp: httpx.Response) -> str:
    assert resp.headers["content-type"].startswith("application/problem+json"), resp.text
    return str(resp.json()["code"])


async def enqueue(c: httpx.AsyncClient, type_: str = "t", **body: Any) -> dict[str, Any]:
    r = await c.post("/v1/jobs", json={"type": type_, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


async def enqueue_many(c: httpx.AsyncClient, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    for start in range(0, len(bodies), 1000):
        r = await c.post("/v1/jobs/batch", json={"jobs": bodies[start:start + 1000]})
        assert r.status_code == 201, r.text
        jobs.extend(r.json()["jobs"])
    return jobs


async def claim(c: httpx.AsyncClient, queues: Iterable[str] = (QUEUE,), worker_id: str = "w1",
                **body: Any) -> list[dict[str, Any]]:
    r = await c.post("/v1/leases", json={"worker_id": worker_id, "queues": list(queues), **body})
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"leases"}, r.text
    return list(r.json()["leases"])


async def claim_one(c: httpx.AsyncClient, queues: Iterable[str] = (QUEUE,),
                    **body: Any) -> dict[str, Any]:
    leases = await claim(c, queues, **body)
    assert len(leases) == 1, leases
    return leases[0]


async def get_job(c: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    r = await c.get(f"/v1/jobs/{job_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def patch_queue(c: httpx.AsyncClient, name: str = QUEUE, **settings: Any) -> dict[str, Any]:
    r = await c.patch(f"/v1/queues/{name}", json=settings)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def counts(c: httpx.AsyncClient, name: str = QUEUE) -> dict[str, int]:
    r = await c.get(f"/v1/queues/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json()["counts"])


async def ack(c: httpx.AsyncClient, lease_id: str, **body: Any) -> httpx.Response:
    return await c.post(f"/v1/leases/{lease_id}/ack", json=body)


async def fail(c: httpx.AsyncClient, lease_id: str, **body: Any) -> httpx.Response:
    return await c.post(f"/v1/leases/{lease_id}/fail", json=body)


async def heartbeat(c: httpx.AsyncClient, lease_id: str, **body: Any) -> httpx.Response:
    return await c.post(f"/v1/leases/{lease_id}/heartbeat", json=body)


async def expect_lost(c: httpx.AsyncClient, lease_id: str) -> None:
    """Every lease operation on a dead lease answers 409 lease_lost."""
    for r in (await heartbeat(c, lease_id), await ack(c, lease_id, result="late"),
              await fail(c, lease_id, error="late")):
        assert r.status_code == 409, r.text
        assert code(r) == "lease_lost"


def sql(database_url: str, statement: str,
        params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """Direct SQL, for reading what the service committed or for setup the API would take
    too long to reach (never to fake what a test checks)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        cur = conn.execute(statement, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start


class DrainedServer(LiveServer):
    """A LiveServer (which logs to a file, so a busy server never blocks on its log) that
    can show the tail of its log in failure messages."""

    def tail(self) -> str:
        return "".join(Path(self.log.name).read_text().splitlines(keepends=True)[-100:])


def drained_server(database_url: str) -> Iterator[DrainedServer]:
    """Body of the ``server`` fixture of the modules that run a real ``jobq serve``."""
    server = DrainedServer(database_url)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Claims:
    """Counts the claims long-polls run (``jobq.core.leases.claim_once``, the one statement
    path of a take): what an idle long-poll must not do, and what a job handed over in its
    enqueue makes unnecessary."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = leases.claim_once

        async def counted(ctx: Any, req: Any, *rest: Any) -> Any:
            self.n += 1
            return await real(ctx, req, *rest)

        monkeypatch.setattr(leases, "claim_once", counted)
