"""/metrics keeps a drained queue's gauges as 0 instead of dropping the series (issue 15),
and starts a new queue's counters at 0 (issue 26)."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobq.core import counters
from tests.conftest import ROOT

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


def _jobs_total(series: dict[tuple[str, frozenset[tuple[str, str]]], float], queue: str,
                event: str) -> float | None:
    return series.get(("jobq_jobs_total", frozenset({"queue": queue, "event": event}.items())))


async def test_a_new_queues_counters_are_scraped_at_zero_before_its_first_job(
    client: httpx.AsyncClient,
) -> None:
    """`increase(jobq_jobs_total{queue="q",event="enqueued"}[5m])` was 0 after 200 jobs: the
    series began at its first increment (already 200 at the first scrape), and increase()
    counts from a series' first sample. A queue made by a settings call is scraped at 0 for
    every event, "released" included, and its other series by queue too."""
    q = f"fresh{time.monotonic_ns()}"
    r = await client.patch(f"/v1/queues/{q}", json={"max_depth": 1000})
    assert r.status_code == 200, r.text
    before = await _series(client)
    for event in counters.EVENTS:
        assert _jobs_total(before, q, event) == 0, event
    assert "released" in counters.EVENTS
    one = frozenset({"queue": q}.items())
    assert before[("jobq_enqueue_rejected_total", one)] == 0
    assert before[("jobq_job_run_seconds_count", one)] == 0
    assert before[("jobq_job_pickup_seconds_count", one)] == 0

    r = await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t", "queue": q}] * 200})
    assert r.status_code == 201, r.text
    after = await _series(client)
    assert _jobs_total(after, q, "enqueued") - _jobs_total(before, q, "enqueued") == 200  # type: ignore[operator]
    assert _jobs_total(after, q, "claimed") == 0


async def test_a_queues_first_count_starts_its_other_series_at_zero(client: httpx.AsyncClient) -> None:
    """A queue first counted by this process (its first enqueue here): the events that have
    not happened yet are there at 0, so their first one is an increase too."""
    q = f"first{time.monotonic_ns()}"
    r = await client.post("/v1/jobs", json={"type": "t", "queue": q})
    assert r.status_code == 201, r.text
    series = await _series(client)
    assert _jobs_total(series, q, "enqueued") == 1
    for event in set(counters.EVENTS) - {"enqueued"}:
        assert _jobs_total(series, q, event) == 0, event


def test_every_event_the_core_emits_is_started_at_zero() -> None:
    """An event missing from counters.EVENTS would still be counted, but its series would
    be born at its first increment again."""
    emitted: set[str] = set()
    for path in (ROOT / "app" / "jobq").rglob("*.py"):
        for line in path.read_text().splitlines():
            if ".emit(" in line or "_batched(" in line:
                emitted.update(re.findall(r'"([a-z_]+)"', line))
    assert {"enqueued", "claimed", "completed", "dead", "failed", "replayed", "purged"} <= emitted
    assert emitted <= set(counters.EVENTS), emitted - set(counters.EVENTS)
