"""Lifecycle log lines: one per job and event, as JSON or text, also when the event came from
a batch call (one log record then carries the whole batch; each job still gets its line)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from tests.waiting import aeventually


def lines(server: LiveServer) -> list[str]:
    return Path(server.log.name).read_text().splitlines()


def events(server: LiveServer) -> list[dict[str, Any]]:
    out = []
    for line in lines(server):
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("logger") == "jobq.events":
                out.append(record)
    return out


@pytest.fixture
def json_server(database_url: str) -> Iterator[LiveServer]:
    server = LiveServer(database_url, env={"JOBQ_LOG_FORMAT": "json", "JOBQ_LOG_LEVEL": "INFO"})
    server.start()
    yield server
    server.stop()


async def test_every_job_of_a_batch_gets_its_own_json_line(json_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=json_server.url, timeout=30) as c:
        r = await c.post("/v1/jobs/batch", json={"jobs": [{"type": "mail", "queue": "lg"}] * 3})
        ids = [j["id"] for j in r.json()["jobs"]]
        r = await c.post("/v1/leases", json={"worker_id": "w-7", "queues": ["lg"], "limit": 3})
        leases = r.json()["leases"]
        r = await c.post("/v1/leases/ack", json={"acks": [{"lease_id": le["lease_id"]} for le in leases[:2]]})
        assert r.status_code == 200
        r = await c.post(f"/v1/leases/{leases[2]['lease_id']}/fail",
                         json={"error": "boom", "retry": False})
        assert r.status_code == 200

        async def logged() -> bool:
            return len(events(json_server)) >= 9
        await aeventually(logged, poll_s=0.1, what="nine event lines logged")

    seen = events(json_server)
    by_event: dict[str, list[dict[str, Any]]] = {}
    for record in seen:
        by_event.setdefault(record["event"], []).append(record)
    assert sorted(r["job_id"] for r in by_event["enqueued"]) == sorted(ids)
    assert sorted(r["job_id"] for r in by_event["claimed"]) == sorted(ids)
    assert len(by_event["completed"]) == 2 and len(by_event["dead"]) == 1
    for record in seen:
        assert record["level"] == "info" and record["msg"] == record["event"]
        assert record["queue"] == "lg" and record["type"] == "mail"
        assert record["ts"].endswith("Z")
    for record in by_event["claimed"] + by_event["completed"] + by_event["dead"]:
        assert record["worker_id"] == "w-7" and record["attempt"] == 1
        assert isinstance(record["duration_ms"], int) and record["duration_ms"] >= 0


async def test_text_lines_name_the_job(database_url: str) -> None:
    server = LiveServer(database_url, env={"JOBQ_LOG_FORMAT": "text", "JOBQ_LOG_LEVEL": "INFO"})
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            r = await c.post("/v1/jobs/batch", json={"jobs": [{"type": "mail", "queue": "tx"}] * 2})
            ids = [j["id"] for j in r.json()["jobs"]]

            async def logged() -> bool:
                return sum(" enqueued " in line for line in lines(server)) >= 2
            await aeventually(logged, poll_s=0.1, what="two enqueued lines logged")
        enqueued = [line for line in lines(server) if "jobq.events: enqueued" in line]
        assert [line.split("job_id=")[1].split()[0] for line in enqueued] == ids
        assert all("queue=tx type=mail" in line for line in enqueued)
    finally:
        server.stop()


async def test_warning_level_turns_the_lifecycle_lines_off(database_url: str) -> None:
    server = LiveServer(database_url, env={"JOBQ_LOG_FORMAT": "json", "JOBQ_LOG_LEVEL": "WARNING"})
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            assert (await c.post("/v1/jobs", json={"type": "t"})).status_code == 201
        assert events(server) == []
    finally:
        server.stop()
