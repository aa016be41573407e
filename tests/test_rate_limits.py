"""Rate limits (issue 29): a queue's pace of claims (rate_limit), producers' enqueue rates
(per queue and per token), adaptive backpressure (soft thresholds), their settings, answers
and metrics; the pace's SQL under concurrent claims from many connections."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from jobq.domain.rates import (
    Bucket,
    Spreader,
    overload,
    overload_retry_ms,
    parse_rate,
    refused_fraction,
    retry_after_s,
)
from jobq.store.queries import Q
from tests.conftest import app_with_tokens
from tests.helpers import long_polls_idle, problem, validation

pytestmark = pytest.mark.timeout(90)

ADMIN = "rate-limits-admin-token-0123456789"


@pytest.fixture
def c(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """conftest's in-process client of the ``app`` fixture, under a short name."""
    return client


async def patch(c: httpx.AsyncClient, queue: str, **settings: Any) -> dict[str, Any]:
    r = await c.patch(f"/v1/queues/{queue}", json=settings)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def enqueue_n(c: httpx.AsyncClient, queue: str, n: int, **job: Any) -> None:
    r = await c.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "queue": queue, **job} for _ in range(n)]})
    assert r.status_code == 201, r.text


async def claim(c: httpx.AsyncClient, queue: str, limit: int, **body: Any) -> list[dict[str, Any]]:
    r = await c.post("/v1/leases", json={"worker_id": "w", "queues": [queue], "limit": limit, **body})
    assert r.status_code == 200, r.text
    return list(r.json()["leases"])


def sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no sample {name} {labels}")


# ------------------------------------------------------------------------------ settings


BAD_SETTINGS = [
    ({"rate_limit": {"jobs": 0, "per_ms": 1000}}, ["body", "rate_limit", "jobs"]),
    ({"rate_limit": {"jobs": 5}}, ["body", "rate_limit", "per_ms"]),
    ({"rate_limit": {"jobs": 5, "per_ms": 1000, "key": "tenant"}}, ["body", "rate_limit", "key"]),
    ({"rate_limit": {"jobs": 5, "per_ms": 1000, "burst": 3}}, ["body", "rate_limit", "burst"]),
    ({"rate_limit": {"jobs": "5", "per_ms": 1000}}, ["body", "rate_limit", "jobs"]),
    ({"rate_limit": 10}, ["body", "rate_limit"]),
    ({"enqueue_rate": {"jobs": 5, "per_ms": 0}}, ["body", "enqueue_rate", "per_ms"]),
    ({"enqueue_rate": {"jobs": 5, "per_ms": 1000, "burst": 0}}, ["body", "enqueue_rate", "burst"]),
    ({"enqueue_rate": {"jobs": 5, "per_ms": 1000, "key": "type"}}, ["body", "enqueue_rate", "key"]),
    ({"soft_depth": 0}, ["body", "soft_depth"]),
    ({"soft_lag_ms": -1}, ["body", "soft_lag_ms"]),
    ({"soft_depth": True}, ["body", "soft_depth"]),
]


async def test_bad_rate_settings_are_422_naming_the_field(c: httpx.AsyncClient) -> None:
    for settings, loc in BAD_SETTINGS:
        r = await c.patch("/v1/queues/q", json=settings)
        items = validation(r)
        assert any(i["loc"][:len(loc)] == loc for i in items), (settings, items)


async def test_rate_settings_round_trip_and_clear(c: httpx.AsyncClient) -> None:
    q = await patch(c, "q", rate_limit={"jobs": 5, "per_ms": 1000, "key": "payload.tenant"},
                    enqueue_rate={"jobs": 50, "per_ms": 1000}, soft_depth=100, soft_lag_ms=5000)
    s = q["settings"]
    assert s["rate_limit"] == {"jobs": 5, "per_ms": 1000, "key": "payload.tenant"}
    assert s["enqueue_rate"] == {"jobs": 50, "per_ms": 1000, "burst": 50}  # burst defaults to jobs
    assert (s["soft_depth"], s["soft_lag_ms"]) == (100, 5000)
    assert q["rate_limit_use"] == {"jobs": 0, "keys": 0, "keys_at_limit": 0, "free_in_ms": None}
    q = await patch(c, "q", rate_limit=None, enqueue_rate=None, soft_depth=None, soft_lag_ms=None)
    s = q["settings"]
    assert (s["rate_limit"], s["enqueue_rate"], s["soft_depth"], s["soft_lag_ms"]) == (None,) * 4
    assert q["rate_limit_use"] is None


# --------------------------------------------------------------------------------- pace


async def test_a_claim_at_the_limit_gets_what_the_limit_allows(c: httpx.AsyncClient) -> None:
    await patch(c, "p", rate_limit={"jobs": 3, "per_ms": 60_000})
    await enqueue_n(c, "p", 10)
    assert len(await claim(c, "p", 5)) == 3
    assert await claim(c, "p", 5) == []
    r = await c.get("/v1/queues/p")
    use = r.json()["rate_limit_use"]
    assert use["jobs"] == 3 and use["keys"] == 1 and use["keys_at_limit"] == 1
    assert 50_000 < use["free_in_ms"] <= 60_000
    assert r.json()["counts"]["pending"] == 7
    metrics = (await c.get("/metrics")).text
    # First claim: 5 asked, 2 held; second: 5 asked, 5 held.
    assert sample(metrics, "jobq_rate_limited_jobs_total", queue="p") == 7


async def test_a_waiting_claim_is_woken_when_the_window_frees(c: httpx.AsyncClient,
                                                              app: FastAPI) -> None:
    """Not by polling: the service sets a timer for the moment the window's oldest grant
    leaves it, and the long-poll takes the job then."""
    await patch(c, "p", rate_limit={"jobs": 2, "per_ms": 1500})
    await enqueue_n(c, "p", 4)
    start = time.monotonic()
    assert len(await claim(c, "p", 2)) == 2
    readings = app.state.ctx.wakeups.readings
    got = await claim(c, "p", 2, wait_ms=10_000)
    waited = time.monotonic() - start
    assert len(got) == 2
    assert 1.3 < waited < 3.0, waited
    # One reading at the timer (perhaps one when the long-poll first slept), not one per 100 ms.
    assert app.state.ctx.wakeups.readings - readings <= 3


async def test_a_key_gives_each_value_its_own_allowance(c: httpx.AsyncClient) -> None:
    await patch(c, "k", rate_limit={"jobs": 2, "per_ms": 60_000, "key": "payload.tenant"})
    # Tenant a's burst first, then b's jobs behind it.
    await enqueue_n(c, "k", 6, payload={"tenant": "a"})
    await enqueue_n(c, "k", 3, payload={"tenant": "b"})
    await enqueue_n(c, "k", 1)  # no tenant: a key of its own
    got = await claim(c, "k", 10)
    tenants = sorted(str(lease["job"]["payload"].get("tenant")) for lease in got)
    assert tenants == ["None", "a", "a", "b", "b"]
    assert await claim(c, "k", 10) == []
    use = (await c.get("/v1/queues/k")).json()["rate_limit_use"]
    assert use["jobs"] == 2 and use["keys"] == 3 and use["keys_at_limit"] == 2


async def test_a_key_by_type(c: httpx.AsyncClient) -> None:
    await patch(c, "kt", rate_limit={"jobs": 1, "per_ms": 60_000, "key": "type"})
    r = await c.post("/v1/jobs/batch", json={"jobs": [
        {"type": t, "queue": "kt"} for t in ("x", "x", "y", "y", "z")]})
    assert r.status_code == 201
    got = await claim(c, "kt", 10)
    assert sorted(lease["job"]["type"] for lease in got) == ["x", "y", "z"]


async def test_a_paced_queue_with_max_running_and_aging_keeps_both(c: httpx.AsyncClient) -> None:
    await patch(c, "pa", rate_limit={"jobs": 3, "per_ms": 60_000}, max_running=2, aging_ms=1000)
    r = await c.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "queue": "pa", "priority": p} for p in (0, 5, 9, 1)]})
    assert r.status_code == 201
    first = await claim(c, "pa", 10)
    assert [lease["job"]["priority"] for lease in first] == [9, 5]  # max_running 2, aging order
    for lease in first:
        assert (await c.post(f"/v1/leases/{lease['lease_id']}/ack")).status_code == 200
    assert [lease["job"]["priority"] for lease in await claim(c, "pa", 10)] == [1]  # pace: 3
    assert await claim(c, "pa", 10) == []


async def test_claims_naming_paced_and_plain_queues(c: httpx.AsyncClient) -> None:
    await patch(c, "p1", rate_limit={"jobs": 1, "per_ms": 60_000})
    await enqueue_n(c, "p1", 3)
    await enqueue_n(c, "plain1", 2)
    await enqueue_n(c, "plain2", 2)
    r = await c.post("/v1/leases", json={"worker_id": "w", "queues": ["plain1", "p1", "plain2"],
                                         "limit": 10})
    assert [lease["job"]["queue"] for lease in r.json()["leases"]] == [
        "plain1", "plain1", "p1", "plain2", "plain2"]


async def test_the_pace_holds_under_concurrent_claims_from_many_connections(
        database_url: str) -> None:
    """JobClaimPaced alone, from 8 connections at once: whatever the interleaving, no window
    of per_ms holds more than `jobs` grants. A grant happens while its statement runs, so a
    job whose statement both began and returned inside a window was granted inside it."""
    jobs, per_ms = 5, 400
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as setup:
        await setup.execute("INSERT INTO queues (name, rate_limit) VALUES ('c', %s::jsonb)",
                            (f'{{"jobs": {jobs}, "per_ms": {per_ms}}}',))
        await setup.execute("INSERT INTO jobs (queue, type, status, max_attempts) "
                            "SELECT 'c', 't', 'pending', 5 FROM generate_series(1, 400)")
    spans: list[tuple[float, float]] = []
    stop = time.monotonic() + 2.2

    async def claimer(i: int) -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            n = 0
            while time.monotonic() < stop:
                n += 1
                began = time.monotonic()
                cur = await conn.execute(Q.JobClaimPaced, {
                    "queue": "c", "types": None, "limit": 1 + (i + n) % 3, "lease_ms": None,
                    "worker_id": f"w{i}", "token_id": None})
                rows = await cur.fetchall()
                ended = time.monotonic()
                spans.extend((began, ended) for _ in [r for r in rows if r[0] is not None])

    await asyncio.gather(*(claimer(i) for i in range(8)))
    window = per_ms / 1000
    for start, _ in spans:
        inside = [s for s in spans if start <= s[0] and s[1] < start + window]
        assert len(inside) <= jobs, (len(inside), start)
    elapsed = max(e for _, e in spans) - min(s for s, _ in spans)
    assert len(spans) <= jobs * (math.floor(elapsed / window) + 1)
    # And the limit is used, not only never passed: most windows were full.
    assert len(spans) >= jobs * math.floor(2.0 / window) - jobs


# ------------------------------------------------------------------------- enqueue rates


async def test_queue_enqueue_rate_answers_429_with_the_wait_from_the_bucket(
        c: httpx.AsyncClient) -> None:
    await patch(c, "e", enqueue_rate={"jobs": 2, "per_ms": 1000, "burst": 3})
    start = time.monotonic()
    for _ in range(3):
        assert (await c.post("/v1/jobs", json={"type": "t", "queue": "e"})).status_code == 201
    r = await c.post("/v1/jobs", json={"type": "t", "queue": "e"})
    took_ms = (time.monotonic() - start) * 1000
    body = problem(r, 429, "queue_rate_limited")
    # Empty bucket, 2 per s: one job in 500 ms, less what refilled while the 3 went in.
    assert 500 - took_ms - 5 <= body["retry_after_ms"] <= 500
    assert r.headers["Retry-After"] == "1"
    await asyncio.sleep(body["retry_after_ms"] / 1000)
    assert (await c.post("/v1/jobs", json={"type": "t", "queue": "e"})).status_code == 201
    metrics = (await c.get("/metrics")).text
    assert sample(metrics, "jobq_enqueue_limited_total", queue="e", code="queue_rate_limited") == 1


async def test_a_batch_is_taken_whole_or_not_at_all(c: httpx.AsyncClient) -> None:
    await patch(c, "b", enqueue_rate={"jobs": 5, "per_ms": 1000, "burst": 5})
    await enqueue_n(c, "b", 3)
    r = await c.post("/v1/jobs/batch", json={"jobs": [{"type": "t", "queue": "b"}] * 4})
    body = problem(r, 429, "queue_rate_limited")
    # 2 left, 4 wanted: 2 more tokens at 5 per s, about 400 ms, for the whole batch.
    assert 300 <= body["retry_after_ms"] <= 400
    assert (await c.get("/v1/queues/b")).json()["counts"]["pending"] == 3  # none of the 4
    # The refused batch took nothing: the 2 tokens left are still there.
    await enqueue_n(c, "b", 2)
    r = await c.post("/v1/jobs/batch", json={"jobs": [{"type": "t", "queue": "b"}] * 6})
    assert "burst" in validation(r, "body")[0]["msg"]  # could never be accepted: not a 429


async def test_a_full_queue_gives_back_its_bucket_take(c: httpx.AsyncClient) -> None:
    await patch(c, "f", enqueue_rate={"jobs": 1, "per_ms": 60_000, "burst": 2}, max_depth=0)
    for _ in range(3):
        problem(await c.post("/v1/jobs", json={"type": "t", "queue": "f"}), 429, "queue_full")
    await patch(c, "f", max_depth=None)
    for _ in range(2):  # both tokens still there
        assert (await c.post("/v1/jobs", json={"type": "t", "queue": "f"})).status_code == 201
    problem(await c.post("/v1/jobs", json={"type": "t", "queue": "f"}), 429, "queue_rate_limited")


async def test_a_token_enqueue_rate(database_url: str) -> None:
    async with app_with_tokens(database_url, ADMIN, {}) as (c, _):
        r = await c.post("/v1/tokens", json={"role": "producer", "enqueue_rate": {
            "jobs": 2, "per_ms": 60_000}})
        assert r.status_code == 201, r.text
        assert r.json()["enqueue_rate"] == {"jobs": 2, "per_ms": 60_000, "burst": 2}
        token_id = r.json()["id"]
        producer = {"Authorization": f"Bearer {r.json()['token']}"}
        for queue in ("a", "b"):  # one bucket across queues
            r = await c.post("/v1/jobs", json={"type": "t", "queue": queue}, headers=producer)
            assert r.status_code == 201, r.text
        r = await c.post("/v1/jobs", json={"type": "t", "queue": "c"}, headers=producer)
        body = problem(r, 429, "token_rate_limited")
        assert 29_000 < body["retry_after_ms"] <= 30_000
        assert r.headers["Retry-After"] == str(math.ceil(body["retry_after_ms"] / 1000))
        # Other callers are not limited by it.
        assert (await c.post("/v1/jobs", json={"type": "t", "queue": "c"})).status_code == 201
        # Cleared: the token enqueues again at once.
        r = await c.patch(f"/v1/tokens/{token_id}", json={"enqueue_rate": None})
        assert r.status_code == 200 and r.json()["enqueue_rate"] is None
        r = await c.post("/v1/jobs", json={"type": "t", "queue": "c"}, headers=producer)
        assert r.status_code == 201, r.text
        r = await c.patch(f"/v1/tokens/{token_id}", json={"enqueue_rate": {"jobs": 0, "per_ms": 1}})
        validation(r, "body", "enqueue_rate", "jobs")
        r = await c.patch("/v1/tokens/nope", json={"enqueue_rate": None})
        problem(r, 404, "not_found")


# ------------------------------------------------------------------ adaptive backpressure


def test_the_overload_curve() -> None:
    assert overload(50, None, 100, None) == 0.5
    assert overload(150, 1000, 100, 10_000) == 1.5
    assert overload(50, 30_000, 100, 10_000) == 3.0
    assert overload(10**6, None, None, None) == 0.0  # no threshold: never overloaded
    assert refused_fraction(1.0) == 0.0
    assert refused_fraction(2.0) == 0.5
    assert refused_fraction(4.0) == 0.75
    assert refused_fraction(1.1) == pytest.approx(1 - 1 / 1.1)
    assert overload_retry_ms(1.01) == 100  # at least 100 ms
    assert overload_retry_ms(2.0) == 1000
    assert overload_retry_ms(4.0) == 3000
    assert overload_retry_ms(500.0) == 60_000  # at most 60 s
    s = Spreader()
    assert [s.refuse(0.25) for _ in range(8)] == [False, False, False, True] * 2
    assert sum(s.refuse(0.5) for _ in range(100)) == 50
    assert not any(s.refuse(0.0) for _ in range(10))


def test_rates_and_retry_after() -> None:
    assert parse_rate("50/1000") == Bucket(50, 1000, 50)
    assert parse_rate("50/1s:100") == Bucket(50, 1000, 100)
    assert parse_rate("100/1m") == Bucket(100, 60_000, 100)
    for bad in ("50", "50/0", "0/1000", "5/1000:0", "a/b", "50/1000:"):
        with pytest.raises(ValueError):
            parse_rate(bad)
    assert Bucket(50, 1000, 50).wait_ms(1) == 20
    assert Bucket(50, 1000, 50).wait_ms(0.01) == 1
    assert Bucket(3, 1000, 3).wait_ms(1) == 334  # rounded up: a retry then is accepted
    assert (retry_after_s(1), retry_after_s(1000), retry_after_s(1001)) == (1, 1, 2)


async def test_past_soft_depth_a_growing_share_is_refused(c: httpx.AsyncClient) -> None:
    await patch(c, "s", soft_depth=10)
    await enqueue_n(c, "s", 20)  # a batch passes one check: depth 0 then
    await asyncio.sleep(0.3)  # the pressure reading's TTL (250 ms): the bound under test
    # Depth 20 over 10: overload 2, half refused, 1 s to wait; more as the depth grows.
    codes = []
    for _ in range(20):
        r = await c.post("/v1/jobs", json={"type": "t", "queue": "s"})
        codes.append(r.status_code)
        if r.status_code == 429:
            body = problem(r, 429, "queue_overloaded")
            assert r.headers["Retry-After"] == str(retry_after_s(body["retry_after_ms"]))
    # Half at depth 20; two thirds at 30, if a reading comes before the 20 enqueues are done.
    assert 9 <= codes.count(429) <= 14, codes
    assert codes[:2] == [201, 429], codes  # evenly spread, not by chance
    metrics = (await c.get("/metrics")).text
    assert sample(metrics, "jobq_enqueue_limited_total", queue="s",
                  code="queue_overloaded") == codes.count(429)
    # Under the threshold, nothing is refused.
    await patch(c, "s", soft_depth=1000)
    await asyncio.sleep(0.3)  # the pressure reading's TTL: the bound under test
    for _ in range(10):
        assert (await c.post("/v1/jobs", json={"type": "t", "queue": "s"})).status_code == 201


async def test_past_soft_lag_enqueues_are_refused(c: httpx.AsyncClient) -> None:
    await patch(c, "l", soft_lag_ms=100)
    await enqueue_n(c, "l", 1)
    await asyncio.sleep(0.45)  # the oldest job's lag: 4 times the threshold and more
    refused = 0
    for _ in range(8):
        r = await c.post("/v1/jobs", json={"type": "t", "queue": "l"})
        if r.status_code == 429:
            refused += 1
            assert problem(r, 429, "queue_overloaded")["retry_after_ms"] >= 3000
    assert refused >= 6  # at least 75%


async def test_long_polls_on_a_paced_queue_are_woken_by_the_timer(c: httpx.AsyncClient,
                                                                  app: FastAPI) -> None:
    """A waiter that slept before the window was full (not a claim that saw it full) is
    woken by the reading's timer too."""
    await patch(c, "w", rate_limit={"jobs": 1, "per_ms": 800})
    waiter = asyncio.create_task(claim(c, "w", 1, wait_ms=10_000))
    await long_polls_idle(app, "w")
    await enqueue_n(c, "w", 2)
    assert len(await waiter) == 1
    start = time.monotonic()
    second = await claim(c, "w", 1, wait_ms=10_000)
    assert len(second) == 1 and 0.4 < time.monotonic() - start < 2.5


async def test_the_leader_forgets_rate_state_no_limit_needs(c: httpx.AsyncClient,
                                                            database_url: str) -> None:
    await patch(c, "g", rate_limit={"jobs": 5, "per_ms": 100, "key": "type"},
                enqueue_rate={"jobs": 1, "per_ms": 100})
    await enqueue_n(c, "g", 1)
    assert len(await claim(c, "g", 1)) == 1
    await patch(c, "g2", enqueue_rate={"jobs": 1, "per_ms": 3_600_000})
    await enqueue_n(c, "g2", 1)
    await asyncio.sleep(0.15)  # past per_ms: both "g" rows hold nothing a limit needs
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        n = (await (await conn.execute(Q.RateStateForget)).fetchone())[0]  # type: ignore[index]
        assert n == 2
        left = await (await conn.execute("SELECT kind, name FROM enqueue_buckets")).fetchall()
        assert left == [("queue", "g2")]  # an hour to refill: still needed
        assert await (await conn.execute("SELECT * FROM rate_windows")).fetchall() == []
