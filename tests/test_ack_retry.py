"""An ack whose first attempt committed but whose answer was lost is retried; the retry is
answered `lease_lost` with `already_completed: true`, and the worker logs the truth: the
result is stored. A lease really lost answers `lease_lost` without it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from jobq.worker import Worker
from tests.helpers_workers import claim_one, code, enqueue
from tests.waiting import aeventually


async def test_a_second_ack_says_the_first_stored_it(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    lease = await claim_one(client)
    first = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": 1})
    assert first.status_code == 200
    again = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": 1})
    assert again.status_code == 409 and code(again) == "lease_lost"
    assert again.json()["already_completed"] is True


async def test_a_lease_lost_to_a_cancel_is_no_completion(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    assert (await client.post(f"/v1/jobs/{job['id']}/cancel")).status_code == 200
    lost = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": 1})
    assert lost.status_code == 409 and code(lost) == "lease_lost"
    assert "already_completed" not in lost.json()


async def test_a_batch_ack_sent_twice(client: httpx.AsyncClient) -> None:
    stored, cancelled = await enqueue(client), await enqueue(client)
    leases = {(le := await claim_one(client))["job"]["id"]: le["lease_id"] for _ in range(2)}
    assert (await client.post(f"/v1/jobs/{cancelled['id']}/cancel")).status_code == 200
    body = {"acks": [{"lease_id": leases[stored["id"]], "result": "r"},
                     {"lease_id": leases[cancelled["id"]], "result": "r"}]}
    first = (await client.post("/v1/leases/ack", json=body)).json()["results"]
    assert [r["ok"] for r in first] == [True, False]
    assert "already_completed" not in first[1]
    again = (await client.post("/v1/leases/ack", json=body)).json()["results"]
    assert again == [
        {"lease_id": leases[stored["id"]], "ok": False, "code": "lease_lost", "already_completed": True},
        {"lease_id": leases[cancelled["id"]], "ok": False, "code": "lease_lost"},
    ]


class LosesFirstAckAnswers(httpx.AsyncBaseTransport):
    """Passes every request to the service; for the first single ack and the first batch ack,
    lets the service answer (so it committed) and then drops the answer, as a connection reset
    would."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.dropped: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        path = request.url.path
        kind = ("batch" if path == "/v1/leases/ack" else
                "single" if path.startswith("/v1/leases/") and path.endswith("/ack") else None)
        if kind is not None and kind not in self.dropped:
            await response.aread()
            assert response.status_code == 200, response.content
            self.dropped.append(kind)
            raise httpx.ReadError("connection reset after the service answered", request=request)
        return response


async def test_the_worker_logs_a_retried_ack_as_stored(app: FastAPI, client: httpx.AsyncClient,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    jobs = [await enqueue(client, payload={"n": i}) for i in range(6)]
    transport = LosesFirstAckAnswers(httpx.ASGITransport(app=app))
    release = asyncio.Event()

    async def handle(job: Any) -> dict[str, int]:
        # The first finishes alone, so its ack goes out single; the others wait until it is
        # sent and then pile up behind it into a batch.
        if job.payload["n"] != 0:
            await release.wait()
        else:
            asyncio.get_running_loop().call_later(0.05, release.set)
        return {"done": job.payload["n"]}

    caplog.set_level(logging.DEBUG, logger="jobq")
    worker = Worker("http://jobq", queues=["default"], handlers={"t": handle}, concurrency=6,
                    wait_ms=1000, transport=transport)
    running = asyncio.create_task(worker.run_async())

    async def all_completed() -> bool:
        for job in jobs:
            if (await client.get(f"/v1/jobs/{job['id']}")).json()["status"] != "completed":
                return False
        return True

    try:
        await aeventually(all_completed, timeout_s=30, what="every job completed")
    finally:
        worker.stop()
        await asyncio.wait_for(running, 30)
    assert sorted(transport.dropped) == ["batch", "single"]
    for job in jobs:
        got = (await client.get(f"/v1/jobs/{job['id']}")).json()
        assert got["status"] == "completed" and got["result"] == {"done": job["payload"]["n"]}
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "dropped" in m], messages
    stored = [m for m in messages if "a retried ack" in m]
    assert len(stored) >= 2, messages  # the single one, and at least one of the batch
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], messages
