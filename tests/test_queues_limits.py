"""Queues (issue 4): GET/PATCH /v1/queues, counts and lag, max_running, aging_ms."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import make_settings, running_app
from tests.helpers import long_polls_idle

pytestmark = pytest.mark.timeout(60)

DEFAULTS = {
    "max_depth": None,
    "paused": False,
    "lease_ms": 30000,
    "max_attempts": 25,
    "backoff_base_ms": 1000,
    "backoff_max_ms": 3600000,
    "max_lease_expiries": 5,
    "aging_ms": None,
    "max_running": None,
}
STATUSES = {"pending", "running", "failed", "completed", "dead", "cancelled"}


# --- helpers ---------------------------------------------------------------------------------


def problem_code(r: httpx.Response) -> str:
    assert r.headers["content-type"].startswith("application/problem+json"), r.text
    return str(r.json()["code"])


async def enqueue(c: httpx.AsyncClient, type_: str, queue: str, **body: Any) -> dict[str, Any]:
    r = await c.post("/v1/jobs", json={"type": type_, "queue": queue, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


async def enqueue_batch(c: httpx.AsyncClient, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = await c.post("/v1/jobs/batch", json={"jobs": bodies})
    assert r.status_code == 201, r.text
    return list(r.json()["jobs"])


async def claim(c: httpx.AsyncClient, queue: str, limit: int = 1, worker: str = "w",
                **body: Any) -> list[dict[str, Any]]:
    r = await c.post("/v1/leases", json={"worker_id": worker, "queues": [queue], "limit": limit,
                                         **body})
    assert r.status_code == 200, r.text
    return list(r.json()["leases"])


async def ack(c: httpx.AsyncClient, lease_id: str) -> None:
    r = await c.post(f"/v1/leases/{lease_id}/ack", json={})
    assert r.status_code == 200, r.text


async def fail(c: httpx.AsyncClient, lease_id: str, **body: Any) -> dict[str, Any]:
    r = await c.post(f"/v1/leases/{lease_id}/fail", json={"error": "e", **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def get_queue(c: httpx.AsyncClient, name: str) -> dict[str, Any]:
    r = await c.get(f"/v1/queues/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def patch(c: httpx.AsyncClient, name: str, **settings: Any) -> dict[str, Any]:
    r = await c.patch(f"/v1/queues/{name}", json=settings)
    assert r.status_code == 200, r.text
    return dict(r.json())


def core_settings(entry: dict[str, Any]) -> dict[str, Any]:
    """The settings the contract lists (the service adds retention ones of its own)."""
    return {k: entry["settings"][k] for k in DEFAULTS}


# --- GET /v1/queues --------------------------------------------------------------------------


async def test_queue_entry_counts_waiting_by_type_and_settings(client: httpx.AsyncClient) -> None:
    q = "qa"
    await enqueue(client, "a", q)
    await enqueue(client, "a", q)
    await enqueue(client, "b", q, delay_ms=3_600_000)            # pending, delayed
    for t in ("fail", "run", "done", "dead", "cancel"):
        await enqueue(client, t, q, priority=10)                  # claimed first, by type
    lease = lambda t: claim(client, q, types=[t])  # noqa: E731
    await fail(client, (await lease("fail"))[0]["lease_id"], retry_in_ms=3_600_000)
    await lease("run")
    await ack(client, (await lease("done"))[0]["lease_id"])
    await fail(client, (await lease("dead"))[0]["lease_id"], retry=False)
    cancel = await enqueue(client, "cancel2", q)
    assert (await client.post(f"/v1/jobs/{cancel['id']}/cancel")).status_code == 200

    entry = await get_queue(client, q)
    assert set(entry) == {"name", "settings", "counts", "waiting_by_type", "oldest_waiting_ms",
                          "rate_limit_use"}
    assert entry["name"] == q
    assert core_settings(entry) == DEFAULTS
    assert entry["counts"] == {"pending": 4, "running": 1, "failed": 1, "completed": 1,
                               "dead": 1, "cancelled": 1}
    # pending + failed, delayed ones included (as max_depth counts them).
    assert entry["waiting_by_type"] == {"a": 2, "b": 1, "fail": 1, "cancel": 1}
    assert isinstance(entry["oldest_waiting_ms"], int) and entry["oldest_waiting_ms"] >= 0


async def test_empty_queue_has_all_six_counts(client: httpx.AsyncClient) -> None:
    entry = await patch(client, "emptyq")
    assert entry["counts"] == dict.fromkeys(STATUSES, 0)
    assert entry["waiting_by_type"] == {}
    assert entry["oldest_waiting_ms"] is None


async def test_oldest_waiting_ms_null_unless_claimable_and_grows(client: httpx.AsyncClient) -> None:
    q = "lag"
    await enqueue(client, "later", q, delay_ms=3_600_000)
    assert (await get_queue(client, q))["oldest_waiting_ms"] is None  # only a delayed job
    job = await enqueue(client, "now", q)
    (lease,) = await claim(client, q, types=["now"])
    assert (await get_queue(client, q))["oldest_waiting_ms"] is None  # the claimable one runs
    await fail(client, lease["lease_id"], retry_in_ms=3_600_000)
    assert (await get_queue(client, q))["oldest_waiting_ms"] is None  # failed, waiting out backoff
    assert (await client.post(f"/v1/jobs/{job['id']}/retry")).status_code == 200
    first = (await get_queue(client, q))["oldest_waiting_ms"]
    assert first is not None and first >= 0
    await asyncio.sleep(0.3)  # the time is the test: the lag grows with it
    second = (await get_queue(client, q))["oldest_waiting_ms"]
    assert second is not None and second - first >= 250, (first, second)
    # A newer job does not lower the lag: it is the oldest that counts.
    await enqueue(client, "now2", q)
    third = (await get_queue(client, q))["oldest_waiting_ms"]
    assert third is not None and third >= second


async def test_oldest_waiting_ms_counts_from_visible_at(client: httpx.AsyncClient) -> None:
    q, delay_s = "lagvis", 0.4
    t0 = time.monotonic()
    job = await enqueue(client, "d", q, delay_ms=int(delay_s * 1000))
    t1 = time.monotonic()
    assert (await get_queue(client, q))["oldest_waiting_ms"] is None
    await asyncio.sleep(0.7)  # the time is the test: past the delay, the lag counts from visible_at
    t2 = time.monotonic()
    lag = (await get_queue(client, q))["oldest_waiting_ms"]
    t3 = time.monotonic()
    created = datetime.fromisoformat(job["created_at"])
    visible = datetime.fromisoformat(job["visible_at"])
    assert abs((visible - created).total_seconds() - delay_s) < 0.05
    # visible_at fell in [t0, t1] + delay and the read in [t2, t3]: the lag is bounded by
    # those, which rules out counting from created_at (that would be ~400 ms more).
    assert lag is not None
    assert (t2 - t1 - delay_s) * 1000 - 20 <= lag <= (t3 - t0 - delay_s) * 1000 + 20, (
        lag, t1 - t0, t3 - t2)


async def test_oldest_waiting_ms_null_while_paused(client: httpx.AsyncClient) -> None:
    """A paused queue has nothing claimable (the contract's definition of claimable)."""
    q = "lagpause"
    await enqueue(client, "x", q)
    assert (await get_queue(client, q))["oldest_waiting_ms"] is not None
    assert (await patch(client, q, paused=True))["oldest_waiting_ms"] is None
    assert (await patch(client, q, paused=False))["oldest_waiting_ms"] is not None


async def test_list_queues_matches_single_entries(client: httpx.AsyncClient) -> None:
    await enqueue(client, "a", "l1", delay_ms=3_600_000)
    await enqueue(client, "b", "l2", delay_ms=3_600_000)
    await patch(client, "l3", max_depth=7)
    r = await client.get("/v1/queues")
    assert r.status_code == 200, r.text
    listed = {e["name"]: e for e in r.json()["queues"]}
    assert {"l1", "l2", "l3"} <= set(listed)
    for name in ("l1", "l2", "l3"):
        assert listed[name] == await get_queue(client, name)
    assert listed["l3"]["settings"]["max_depth"] == 7
    assert listed["l1"]["waiting_by_type"] == {"a": 1}
    assert listed["l2"]["counts"]["pending"] == 1


async def test_unknown_queue_is_404(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/queues/never-used")
    assert r.status_code == 404, r.text
    assert problem_code(r) == "not_found"
    r = await client.get("/v1/queues/bad%20name")
    assert r.status_code == 422 and problem_code(r) == "validation_error"
    names = {e["name"] for e in (await client.get("/v1/queues")).json()["queues"]}
    assert "never-used" not in names  # reading does not create


# --- PATCH /v1/queues/{name} -----------------------------------------------------------------


async def test_patch_creates_queue_with_defaults(client: httpx.AsyncClient) -> None:
    entry = await patch(client, "fresh", max_depth=5)
    assert core_settings(entry) == {**DEFAULTS, "max_depth": 5}
    assert entry["counts"] == dict.fromkeys(STATUSES, 0)
    assert (await get_queue(client, "fresh")) == entry
    # An empty PATCH creates with pure defaults, like first use by an enqueue.
    assert core_settings(await patch(client, "fresh2")) == DEFAULTS
    await enqueue(client, "x", "fresh3")
    assert core_settings(await get_queue(client, "fresh3")) == DEFAULTS
    # Jobs take the queue's defaults.
    job = await enqueue(client, "x", "fresh3")
    assert job["max_attempts"] == 25


async def test_patch_changes_only_given_settings(client: httpx.AsyncClient) -> None:
    await patch(client, "pq")
    changes: list[dict[str, Any]] = [
        {"max_depth": 10},
        {"lease_ms": 5000, "paused": True},
        {"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_ms": 100},
        {"max_lease_expiries": 2, "aging_ms": 500, "max_running": 4},
        {"max_depth": None},
        {"aging_ms": None, "max_running": None, "paused": False},
        {"retention_ms": 1000, "dead_retention_ms": 2000},
    ]
    expected = dict((await get_queue(client, "pq"))["settings"])
    for change in changes:
        entry = await patch(client, "pq", **change)
        expected.update(change)
        assert entry["settings"] == expected, change
        assert (await get_queue(client, "pq"))["settings"] == expected
    # New jobs follow the changed settings.
    await patch(client, "pq", max_attempts=7)
    assert (await enqueue(client, "x", "pq"))["max_attempts"] == 7


@pytest.mark.parametrize("body", [
    {"max_depth": -1},
    {"lease_ms": -1},
    {"lease_ms": 0},
    {"max_attempts": -1},
    {"max_attempts": 0},
    {"backoff_base_ms": -1},
    {"backoff_max_ms": -1},
    {"max_lease_expiries": -3},
    {"aging_ms": -1},
    {"max_running": -1},
    {"retention_ms": -1},
    {"dead_retention_ms": -1},
    {"paused": None},
    {"lease_ms": None},
    {"max_attempts": None},
    {"backoff_base_ms": None},
    {"backoff_max_ms": None},
    {"max_lease_expiries": None},
    {"retention_ms": None},
    {"bogus": 1},
    {"max_depth": 5, "unknown_setting": True},
    {"max_depth": "lots"},
    {"paused": "maybe"},
    {"max_depth": 1.5},
])
async def test_patch_validates(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    before = await patch(client, "vq", max_depth=3)
    r = await client.patch("/v1/queues/vq", json=body)
    assert r.status_code == 422, (body, r.text)
    assert problem_code(r) == "validation_error"
    assert r.json()["errors"], r.json()
    assert (await get_queue(client, "vq"))["settings"] == before["settings"]


async def test_patch_malformed_bodies(client: httpx.AsyncClient) -> None:
    for content in (b"{", b"[]", b"42", b'"x"'):
        r = await client.patch("/v1/queues/mq", content=content,
                               headers={"content-type": "application/json"})
        assert r.status_code == 422, (content, r.text)
        assert problem_code(r) == "validation_error"
    r = await client.patch("/v1/queues/bad%20name", json={"max_depth": 1})
    assert r.status_code == 422 and problem_code(r) == "validation_error"
    names = {e["name"] for e in (await client.get("/v1/queues")).json()["queues"]}
    assert "mq" not in names and "bad name" not in names


# --- max_running -----------------------------------------------------------------------------


@pytest.fixture
async def second_client(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A second in-process replica on the same database."""
    async with running_app(make_settings(database_url)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq2",
                                     timeout=30) as c:
            yield c


async def test_max_running_holds_under_16_concurrent_claimers(
    client: httpx.AsyncClient, second_client: httpx.AsyncClient,
) -> None:
    q, cap, total = "capped", 3, 50
    await patch(client, q, max_running=cap)
    await enqueue_batch(client, [{"type": "t", "queue": q} for _ in range(total)])

    outstanding = 0      # leases the test holds: claimed and not yet sent to ack
    max_outstanding = 0
    acked: list[str] = []
    sampled: list[int] = []
    done = asyncio.Event()

    async def claimer(c: httpx.AsyncClient, n: int) -> None:
        nonlocal outstanding, max_outstanding
        rnd = random.Random(n)
        while len(acked) < total:
            leases = await claim(c, q, limit=rnd.randint(1, 3), worker=f"w{n}")
            if not leases:
                await asyncio.sleep(rnd.uniform(0.001, 0.01))  # a worker's pause before it asks again
                continue
            outstanding += len(leases)
            max_outstanding = max(max_outstanding, outstanding)
            assert outstanding <= cap, outstanding
            await asyncio.sleep(rnd.uniform(0.005, 0.03))  # the work, held under the cap
            for le in leases:
                outstanding -= 1
                await ack(c, le["lease_id"])
                acked.append(le["job"]["id"])

    async def sampler() -> None:
        while not done.is_set():
            sampled.append((await get_queue(client, q))["counts"]["running"])
            await asyncio.sleep(0.005)  # the sampler's pace

    sampling = asyncio.create_task(sampler())
    # Half the claimers on each replica: the cap is across replicas, not per process.
    await asyncio.wait_for(asyncio.gather(*(claimer(client if n % 2 else second_client, n)
                                            for n in range(16))), timeout=40)
    done.set()
    await sampling

    assert len(acked) == len(set(acked)) == total
    assert max_outstanding == cap  # the claimers did press against the cap
    assert sampled and max(sampled) <= cap, max(sampled)
    assert max(sampled) == cap
    counts = (await get_queue(client, q))["counts"]
    assert counts["completed"] == total and counts["running"] == 0


async def test_max_running_zero_hands_out_nothing(client: httpx.AsyncClient) -> None:
    q = "zero"
    await patch(client, q, max_running=0)
    await enqueue_batch(client, [{"type": "t", "queue": q} for _ in range(3)])
    assert await claim(client, q, limit=10) == []
    start = time.monotonic()
    assert await claim(client, q, limit=10, wait_ms=300) == []
    assert time.monotonic() - start >= 0.25
    entry = await get_queue(client, q)
    assert entry["counts"]["running"] == 0 and entry["counts"]["pending"] == 3
    # A cap of 1 hands out one at a time, whatever the limit.
    await patch(client, q, max_running=1)
    first = await claim(client, q, limit=10)
    assert len(first) == 1
    assert await claim(client, q, limit=10) == []
    await ack(client, first[0]["lease_id"])
    assert len(await claim(client, q, limit=10)) == 1
    # No cap: the rest.
    await patch(client, q, max_running=None)
    assert len(await claim(client, q, limit=10)) == 1
    assert (await get_queue(client, q))["counts"]["running"] == 2


async def test_max_running_zero_then_raised_wakes_long_poll(app: FastAPI, client: httpx.AsyncClient) -> None:
    """A worker long-polling a capped-out queue gets work once the cap allows it."""
    q = "zerowake"
    await patch(client, q, max_running=0)
    await enqueue(client, "t", q)
    poll = asyncio.create_task(claim(client, q, wait_ms=8000))
    await long_polls_idle(app, q)
    assert not poll.done()
    await patch(client, q, max_running=1)
    leases = await asyncio.wait_for(poll, timeout=9)
    assert len(leases) == 1


# --- aging_ms --------------------------------------------------------------------------------


async def _starvation_run(c: httpx.AsyncClient, q: str, seconds: float, stop_when_low: bool
                          ) -> tuple[dict[str, Any], list[dict[str, Any]], float | None]:
    """One priority-0 job, then keep the queue full of priority-5 work while one claimer
    takes a job at a time. Returns the low job, the claimed jobs in order, and the time (s
    after the low job's enqueue) the low job was claimed, or None."""
    low = await enqueue(c, "low", q, priority=0)
    start = time.monotonic()
    await enqueue_batch(c, [{"type": "high", "queue": q, "priority": 5} for _ in range(5)])
    claimed: list[dict[str, Any]] = []
    while time.monotonic() - start < seconds:
        await enqueue(c, "high", q, priority=5)
        (lease,) = await claim(c, q)
        claimed.append(lease["job"])
        await ack(c, lease["lease_id"])
        if lease["job"]["id"] == low["id"]:
            if stop_when_low:
                return low, claimed, time.monotonic() - start
        await asyncio.sleep(0.002)  # the producer's pace
    return low, claimed, None


async def test_aging_unstarves_low_priority(client: httpx.AsyncClient) -> None:
    q, aging_ms = "aged", 200
    await patch(client, q, aging_ms=aging_ms)
    low, claimed, after = await _starvation_run(client, q, seconds=8, stop_when_low=True)
    # Five priority steps of 200 ms: due after ~1 s of waiting; generous bound.
    assert after is not None, f"low-priority job never claimed in {len(claimed)} claims"
    assert after < 6, after
    # Exactly the aging rule: a priority-5 job beats the low one iff it became visible less
    # than 5 × aging_ms after it. Check with a margin around the boundary.
    low_visible = datetime.fromisoformat(low["visible_at"])
    before_low = claimed[:-1]
    assert claimed[-1]["id"] == low["id"]
    assert before_low, "high-priority work should have gone first"
    for job in before_low:
        waited = (datetime.fromisoformat(job["visible_at"]) - low_visible).total_seconds()
        assert waited < 5 * aging_ms / 1000 + 0.05, waited
    waiting = (await client.get("/v1/jobs", params={"queue": q, "status": "pending",
                                                    "limit": 1000})).json()["jobs"]
    early = [j for j in waiting if (datetime.fromisoformat(j["visible_at"]) - low_visible
                                    ).total_seconds() < 5 * aging_ms / 1000 - 0.05]
    assert early == [], "a priority-5 job that was due before the low one still waits"


async def test_without_aging_low_priority_starves(client: httpx.AsyncClient) -> None:
    """The control: same run, strict priority; the low job waits while higher work exists."""
    q = "strict"
    await patch(client, q)
    low, claimed, after = await _starvation_run(client, q, seconds=2.0, stop_when_low=True)
    assert after is None
    assert len(claimed) > 20 and low["id"] not in {j["id"] for j in claimed}
    # Once the higher work is gone, the low job runs last.
    rest = await claim(client, q, limit=1000)
    assert rest[-1]["job"]["id"] == low["id"]
    assert all(le["job"]["priority"] == 5 for le in rest[:-1])


async def test_aging_applies_to_jobs_already_waiting_and_can_be_switched_off(
    client: httpx.AsyncClient,
) -> None:
    q = "agelate"
    low = await enqueue(client, "low", q, priority=0)
    await asyncio.sleep(0.4)  # the time is the test: the low job ages while it waits
    high = await enqueue(client, "high", q, priority=1)
    # Strict priority would take `high` first; with aging_ms 100 the low job has gained ~4
    # steps while high gained none.
    await patch(client, q, aging_ms=100)
    (first,) = await claim(client, q)
    assert first["job"]["id"] == low["id"]
    await fail(client, first["lease_id"], retry_in_ms=0)
    # Switched off again: strict priority, the retried low job after high.
    await patch(client, q, aging_ms=None)
    leases = await claim(client, q, limit=2)
    assert [le["job"]["id"] for le in leases] == [high["id"], low["id"]]
