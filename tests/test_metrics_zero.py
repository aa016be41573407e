"""/metrics keeps a drained queue's gauges as 0 instead of dropping the series (issue 15)."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.timeout(60)


async def _series(c: httpx.AsyncClient) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    r = await c.get("/metrics")
    assert r.status_code == 200, r.text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


async def test_a_drained_queue_reports_zero_waiting_not_a_vanished_series(
    client: httpx.AsyncClient,
) -> None:
    q = f"drain{time.monotonic_ns()}"  # the in-process registry is shared by all tests
    r = await client.post("/v1/jobs", json={"type": "t", "queue": q})
    assert r.status_code == 201, r.text
    waiting = ("jobq_waiting_jobs", frozenset({"queue": q, "type": "t"}.items()))
    pending = ("jobq_jobs", frozenset({"queue": q, "status": "pending"}.items()))
    before = await _series(client)
    assert before[waiting] == 1 and before[pending] == 1

    r = await client.post("/v1/leases", json={"worker_id": "w", "queues": [q]})
    assert r.status_code == 200, r.text
    [lease] = r.json()["leases"]
    r = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={})
    assert r.status_code == 200, r.text

    after = await _series(client)
    assert waiting in after and after[waiting] == 0  # present, with 0: not missing
    assert pending in after and after[pending] == 0
    assert after[("jobq_jobs", frozenset({"queue": q, "status": "completed"}.items()))] == 1
    assert after[("jobq_oldest_waiting_seconds", frozenset({"queue": q}.items()))] == 0


async def test_a_queue_without_any_job_reports_zero_for_every_status(
    client: httpx.AsyncClient,
) -> None:
    q = f"empty{time.monotonic_ns()}"
    r = await client.patch(f"/v1/queues/{q}", json={"max_depth": 10})
    assert r.status_code == 200, r.text
    after = await _series(client)
    for status in ("pending", "running", "failed", "completed", "dead", "cancelled"):
        assert after[("jobq_jobs", frozenset({"queue": q, "status": status}.items()))] == 0, status


async def test_counters_come_without_created_twins(client: httpx.AsyncClient) -> None:
    """One line per series: prometheus-client's `*_created` samples (the time each series
    began) are turned off, so a counter is not printed twice."""
    r = await client.post("/v1/jobs", json={"type": "t", "queue": f"created{time.monotonic_ns()}"})
    assert r.status_code == 201, r.text
    text = (await client.get("/metrics")).text
    assert "jobq_jobs_total{" in text
    assert [line for line in text.splitlines() if "_created" in line.split("{")[0]] == []
