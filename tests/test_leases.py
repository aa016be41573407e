"""The contract's Workers section: claim (with long-poll), heartbeat, ack, fail, batch ack,
lease loss and lease expiry. Each test is one sentence of the contract a worker relies on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from jobq.core.reaper import reap_once
from tests.conftest import make_settings, running_app
from tests.helpers import job_reaches, long_polls_idle
from tests.helpers_workers import (
    DrainedServer,
    Stopwatch,
    ack,
    claim,
    claim_one,
    code,
    cpu_seconds,
    enqueue,
    enqueue_many,
    expect_lost,
    fail,
    get_job,
    heartbeat,
    now,
    patch_queue,
    sql,
    ts,
)

# Bounds on wall-clock checks are generous: the suite runs on a noisy 2-core machine.
SLACK_S = 1.0


def ms_between(later: str, earlier: str) -> float:
    return (ts(later) - ts(earlier)) / timedelta(milliseconds=1)


def asgi(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq", timeout=30)


# --------------------------------------------------------------------------- claim: input


@pytest.mark.parametrize("missing", ["worker_id", "queues"])
async def test_claim_requires_worker_id_and_queues(client: httpx.AsyncClient, missing: str) -> None:
    await enqueue(client)
    body: dict[str, Any] = {"worker_id": "w1", "queues": ["default"]}
    del body[missing]
    r = await client.post("/v1/leases", json=body)
    assert r.status_code == 422, r.text
    assert code(r) == "validation_error"
    assert any(missing in e["loc"] for e in r.json()["errors"]), r.json()
    # Nothing was leased by the refused call.
    assert len(await claim(client, limit=10)) == 1


@pytest.mark.parametrize("field,value", [
    ("limit", 0), ("limit", 1001), ("limit", -1),
    ("wait_ms", -1), ("wait_ms", 30001),
    ("queues", "default"),
])
async def test_claim_out_of_range_is_422(client: httpx.AsyncClient, field: str, value: Any) -> None:
    await enqueue(client)
    body: dict[str, Any] = {"worker_id": "w1", "queues": ["default"], field: value}
    r = await client.post("/v1/leases", json=body)
    assert r.status_code == 422, r.text
    assert code(r) == "validation_error"
    assert len(await claim(client)) == 1


async def test_claim_limit_defaults_to_1_and_goes_up_to_1000(client: httpx.AsyncClient) -> None:
    jobs = await enqueue_many(client, [{"type": "t", "payload": {"i": i}} for i in range(1002)])
    assert len(await claim(client)) == 1
    many = await claim(client, limit=1000)
    assert len(many) == 1000
    assert len({le["job"]["id"] for le in many}) == 1000
    assert len({le["lease_id"] for le in many}) == 1000
    rest = await claim(client, limit=1000)
    assert len(rest) == 1
    claimed = {le["job"]["id"] for le in many} | {rest[0]["job"]["id"]}
    assert len(claimed) == 1001 and claimed <= {j["id"] for j in jobs}
    assert await claim(client, limit=1000) == []


async def test_claim_returns_leases_with_running_job(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "email.welcome", payload={"to": "a@example.com"}, priority=3)
    before = now()
    leases = await claim(client, worker_id="worker-7", limit=5)
    assert len(leases) == 1
    lease = leases[0]
    assert set(lease) == {"lease_id", "locked_until", "job"}
    assert isinstance(lease["lease_id"], str) and lease["lease_id"]
    got = lease["job"]
    assert got["id"] == job["id"]
    assert got["type"] == "email.welcome" and got["payload"] == {"to": "a@example.com"}
    assert got["priority"] == 3
    assert got["status"] == "running"
    assert got["attempt"] == 1
    assert got["worker_id"] == "worker-7"
    assert ts(got["locked_until"]) == ts(lease["locked_until"]) > before
    stored = await get_job(client, job["id"])
    assert stored["status"] == "running" and stored["worker_id"] == "worker-7"
    assert ts(stored["locked_until"]) == ts(lease["locked_until"])


async def test_claim_types_filter(client: httpx.AsyncClient) -> None:
    jobs = {t: [await enqueue(client, t) for _ in range(3)] for t in ("a", "b", "c")}
    leases = await claim(client, types=["b", "c"], limit=100)
    assert sorted(le["job"]["type"] for le in leases) == ["b"] * 3 + ["c"] * 3
    assert await claim(client, types=["b", "zzz"], limit=100) == []
    for j in jobs["a"]:
        assert (await get_job(client, j["id"]))["status"] == "pending"
    rest = await claim(client, limit=100)
    assert sorted(le["job"]["type"] for le in rest) == ["a"] * 3


async def test_lease_ms_defaults_from_queue_then_per_claim(client: httpx.AsyncClient) -> None:
    await enqueue_many(client, [{"type": "t"}] * 3)

    async def lease_length_s(**body: Any) -> float:
        before = now()
        lease = await claim_one(client, **body)
        after = now()
        until = ts(lease["locked_until"])
        low, high = (until - after).total_seconds(), (until - before).total_seconds()
        # The true length is in [low, high]; report the middle for a simple range check.
        return (low + high) / 2

    assert 30 - SLACK_S < await lease_length_s() < 30 + SLACK_S  # the queue default, 30000
    await patch_queue(client, lease_ms=5000)
    assert 5 - SLACK_S < await lease_length_s() < 5 + SLACK_S
    assert 2 - SLACK_S < await lease_length_s(lease_ms=2000) < 2 + SLACK_S


async def test_attempt_is_incremented_by_every_claim(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    attempts = []
    for _ in range(3):
        lease = await claim_one(client)
        attempts.append(lease["job"]["attempt"])
        assert (await fail(client, lease["lease_id"], error="x", retry_in_ms=0)).status_code == 200
    lease = await claim_one(client, lease_ms=100)  # this one expires
    attempts.append(lease["job"]["attempt"])
    await job_reaches(client, job["id"], "pending")
    attempts.append((await claim_one(client))["job"]["attempt"])
    assert attempts == [1, 2, 3, 4, 5]


async def test_claim_order_priority_then_visible_at_then_creation(
    client: httpx.AsyncClient,
) -> None:
    base = now() - timedelta(minutes=5)

    def at(seconds: int) -> str:
        return (base + timedelta(seconds=seconds)).isoformat()

    j_late = await enqueue(client, payload={"n": "late"}, run_at=at(20))
    j_early = await enqueue(client, payload={"n": "early"}, run_at=at(10))
    j_high = await enqueue(client, payload={"n": "high"}, priority=10, run_at=at(30))
    j_low = await enqueue(client, payload={"n": "low"}, priority=-1, run_at=at(0))
    # Same priority and the same visible_at: creation order decides.
    same = [await enqueue(client, payload={"n": f"same{i}"}, run_at=at(5)) for i in range(3)]
    j_future = await enqueue(client, payload={"n": "future"}, priority=100, delay_ms=60_000)

    order = []
    while leases := await claim(client):
        order.append(leases[0]["job"]["id"])
    expected = [j_high, *same, j_early, j_late, j_low]
    assert order == [j["id"] for j in expected]
    assert (await get_job(client, j_future["id"]))["status"] == "pending"


async def test_claim_with_limit_takes_the_top_of_the_order(client: httpx.AsyncClient) -> None:
    low = [await enqueue(client, payload={"i": i}) for i in range(5)]
    high = [await enqueue(client, payload={"i": i}, priority=5) for i in range(2)]
    first = await claim(client, limit=3)
    assert {le["job"]["id"] for le in first} == {high[0]["id"], high[1]["id"], low[0]["id"]}


async def test_paused_queue_hands_out_nothing(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="pq")
    other = await enqueue(client, queue="open")
    entry = await patch_queue(client, "pq", paused=True)
    assert entry["settings"]["paused"] is True
    assert await claim(client, ["pq"], limit=10) == []
    assert await claim(client, ["pq"], types=["t"], wait_ms=300) == []
    # A paused queue among others is skipped; the others still serve.
    leases = await claim(client, ["pq", "open"], limit=10)
    assert [le["job"]["id"] for le in leases] == [other["id"]]
    assert (await get_job(client, job["id"]))["status"] == "pending"
    await patch_queue(client, "pq", paused=False)
    assert [le["job"]["id"] for le in await claim(client, ["pq"])] == [job["id"]]


async def test_unpausing_wakes_a_waiting_claim(app: FastAPI, client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="pq")
    await patch_queue(client, "pq", paused=True)
    waiting = asyncio.create_task(claim(client, ["pq"], wait_ms=10_000))
    await long_polls_idle(app, "pq")
    assert not waiting.done()
    await patch_queue(client, "pq", paused=False)
    clock = Stopwatch()
    leases = await asyncio.wait_for(waiting, 10)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert clock.elapsed < 1.0 + SLACK_S


async def test_queues_are_tried_in_the_order_listed(client: httpx.AsyncClient) -> None:
    a1 = await enqueue(client, queue="qa", payload={"n": 1})
    b1 = await enqueue(client, queue="qb", priority=100, payload={"n": 1})
    # qa first, though qb's job has a far higher priority.
    assert [le["job"]["id"] for le in await claim(client, ["qa", "qb"])] == [a1["id"]]
    a2 = await enqueue(client, queue="qa", payload={"n": 2})
    assert [le["job"]["id"] for le in await claim(client, ["qb", "qa"])] == [b1["id"]]
    # A later queue fills only what the earlier ones left.
    b2 = await enqueue(client, queue="qb", payload={"n": 2})
    b3 = await enqueue(client, queue="qb", payload={"n": 3})
    leases = await claim(client, ["qa", "qb"], limit=2)
    assert {le["job"]["id"] for le in leases} == {a2["id"], b2["id"]}
    assert [le["job"]["id"] for le in await claim(client, ["qa", "qb"], limit=5)] == [b3["id"]]


# ----------------------------------------------------------------------- claim: long-poll


async def test_long_poll_returns_as_soon_as_a_job_is_enqueued(app: FastAPI, client: httpx.AsyncClient) -> None:
    # At least one job is enough: a claim for 10 does not wait to fill up.
    waiting = asyncio.create_task(claim(client, ["lp"], limit=10, wait_ms=10_000))
    await long_polls_idle(app, "lp")
    assert not waiting.done()
    job = await enqueue(client, queue="lp")
    clock = Stopwatch()
    leases = await asyncio.wait_for(waiting, 12)
    assert clock.elapsed < 1.0, "the long-poll should return right after the enqueue"
    assert [le["job"]["id"] for le in leases] == [job["id"]]


async def test_long_poll_wakes_for_any_of_its_queues(app: FastAPI, client: httpx.AsyncClient) -> None:
    waiting = asyncio.create_task(claim(client, ["lp1", "lp2"], wait_ms=10_000))
    await long_polls_idle(app, "lp2")
    job = await enqueue(client, queue="lp2")
    clock = Stopwatch()
    leases = await asyncio.wait_for(waiting, 12)
    assert clock.elapsed < 1.0
    assert [le["job"]["id"] for le in leases] == [job["id"]]


async def test_long_poll_with_a_job_waiting_returns_at_once(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    clock = Stopwatch()
    leases = await claim(client, wait_ms=30_000)  # the top of the range is accepted
    assert clock.elapsed < 1.0 + SLACK_S
    assert [le["job"]["id"] for le in leases] == [job["id"]]


async def test_long_poll_returns_empty_when_time_is_up(client: httpx.AsyncClient) -> None:
    await enqueue(client, queue="other")
    await enqueue(client, delay_ms=60_000)  # not visible within the wait
    clock = Stopwatch()
    assert await claim(client, wait_ms=700) == []
    assert 0.69 <= clock.elapsed < 0.7 + SLACK_S
    clock = Stopwatch()
    assert await claim(client, wait_ms=0) == []
    assert clock.elapsed < SLACK_S
    clock = Stopwatch()
    assert await claim(client) == []  # wait_ms defaults to 0: no long-poll
    assert clock.elapsed < SLACK_S


async def test_delayed_job_wakes_a_long_poll_at_its_visible_time(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, delay_ms=500)
    clock = Stopwatch()
    leases = await claim(client, wait_ms=10_000)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert 0.4 <= clock.elapsed < 0.5 + SLACK_S


async def test_delayed_job_enqueued_during_a_long_poll_wakes_it_when_visible(
    app: FastAPI, client: httpx.AsyncClient,
) -> None:
    waiting = asyncio.create_task(claim(client, wait_ms=10_000))
    await long_polls_idle(app, "default")
    job = await enqueue(client, delay_ms=500)
    clock = Stopwatch()
    leases = await asyncio.wait_for(waiting, 12)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert 0.4 <= clock.elapsed < 0.5 + SLACK_S


async def test_failed_job_wakes_a_long_poll_when_its_retry_is_due(
    app: FastAPI, client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    waiting = asyncio.create_task(claim(client, worker_id="w2", wait_ms=10_000))
    await long_polls_idle(app, "default")
    assert (await fail(client, lease["lease_id"], error="x", retry_in_ms=500)).status_code == 200
    clock = Stopwatch()
    leases = await asyncio.wait_for(waiting, 12)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert 0.4 <= clock.elapsed < 0.5 + SLACK_S


async def test_expired_lease_wakes_a_long_poll(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    await claim_one(client, lease_ms=300)
    clock = Stopwatch()
    leases = await claim(client, worker_id="w2", wait_ms=10_000)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert leases[0]["job"]["attempt"] == 2
    assert clock.elapsed < 0.3 + 1.0 + SLACK_S  # expiry is processed within 1 s


async def test_long_poll_wakes_on_enqueue_through_another_replica(database_url: str) -> None:
    # Two service processes on one database, here two apps in one process: each has its own
    # LISTEN connection and hears only the other's NOTIFY.
    async with running_app(make_settings(database_url)) as a, \
            running_app(make_settings(database_url)) as b, asgi(a) as ca, asgi(b) as cb:
        await a.state.ctx.wakeups.notifications.listening.wait()
        waiting = asyncio.create_task(claim(ca, ["xr"], wait_ms=10_000))
        await long_polls_idle(a, "xr")
        assert not waiting.done()
        job = await enqueue(cb, queue="xr")
        clock = Stopwatch()
        leases = await asyncio.wait_for(waiting, 12)
        assert [le["job"]["id"] for le in leases] == [job["id"]]
        assert clock.elapsed < 1.0 + SLACK_S


async def _jobs_nobody_here_may_take(c: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """Waiting jobs the long-polls below may not take: another type, a paused queue, and one
    behind a full running cap. Answers the lease that fills the cap and the job behind it."""
    await enqueue(c, "other")
    await enqueue(c, queue="paused")
    await patch_queue(c, "paused", paused=True)
    await patch_queue(c, "capped", max_running=1)
    running = await enqueue(c, queue="capped", payload={"n": 1})
    first = await claim_one(c, ["capped"])
    assert first["job"]["id"] == running["id"]
    return first, await enqueue(c, queue="capped", payload={"n": 2})


async def test_idle_long_polls_sleep_instead_of_spinning(database_url: str) -> None:
    """Waiting jobs a long-poll may not take must not turn its wait into a busy loop. The
    service is a process of its own, so its CPU time is the service's alone."""
    server = DrainedServer(database_url)
    server.start()
    assert server.proc is not None
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            await _jobs_nobody_here_may_take(c)
            before = cpu_seconds(server.proc.pid)
            results = await asyncio.gather(
                claim(c, types=["mine"], wait_ms=2000),
                claim(c, ["paused"], wait_ms=2000),
                claim(c, ["capped"], wait_ms=2000),
            )
            used = cpu_seconds(server.proc.pid) - before
            assert results == [[], [], []]
            # Idle, the server uses a few hundredths of a second here; spinning, over one.
            assert used < 0.5, f"three idle 2 s long-polls burned {used:.2f} s of server CPU"
    finally:
        server.stop()


async def test_long_polls_beside_jobs_they_may_not_take_wake_for_theirs(
    app: FastAPI, client: httpx.AsyncClient,
) -> None:
    first, capped_next = await _jobs_nobody_here_may_take(client)
    waiting = asyncio.create_task(claim(client, types=["mine"], wait_ms=10_000))
    await long_polls_idle(app, "default")
    mine = await enqueue(client, "mine")
    clock = Stopwatch()
    assert [le["job"]["id"] for le in await waiting] == [mine["id"]]
    assert clock.elapsed < 1.0 + SLACK_S
    assert await claim(client, ["capped"]) == []  # the cap is full
    waiting = asyncio.create_task(claim(client, ["capped"], wait_ms=10_000))
    await long_polls_idle(app, "capped")
    assert (await ack(client, first["lease_id"])).status_code == 200
    clock = Stopwatch()
    assert [le["job"]["id"] for le in await waiting] == [capped_next["id"]]
    assert clock.elapsed < 1.0 + SLACK_S


# ----------------------------------------------------------------------- lease ids


async def test_lease_ids_are_never_issued_twice(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    issued: list[str] = []

    async def take(**body: Any) -> dict[str, Any]:
        lease = await claim_one(client, **body)
        assert lease["job"]["id"] == job["id"]
        issued.append(lease["lease_id"])
        return lease

    # Claimed again after a failure.
    lease = await take()
    assert (await fail(client, lease["lease_id"], error="x", retry_in_ms=0)).status_code == 200
    # Claimed again after an expiry.
    lease = await take(lease_ms=100)
    await job_reaches(client, job["id"], "pending")
    # Acked, then retried by an operator: attempt goes back to 0.
    lease = await take()
    assert lease["job"]["attempt"] == 3
    assert (await ack(client, lease["lease_id"])).status_code == 200
    r = await client.post(f"/v1/jobs/{job['id']}/retry")
    assert r.status_code == 409  # a completed job cannot be retried
    # Failed for good, then retried: attempt reset, a brand-new lease id.
    r = await fail(client, lease["lease_id"], error="late")
    assert r.status_code == 409
    job2 = await enqueue(client)
    assert job2["id"] != job["id"]
    job = job2
    lease = await take()
    assert (await fail(client, lease["lease_id"], error="bad", retry=False)).status_code == 200
    r = await client.post(f"/v1/jobs/{job['id']}/retry")
    assert r.status_code == 200 and r.json()["attempt"] == 0
    lease = await take()
    assert lease["job"]["attempt"] == 1
    # Cancelled while running, then retried.
    assert (await client.post(f"/v1/jobs/{job['id']}/cancel")).status_code == 200
    assert (await client.post(f"/v1/jobs/{job['id']}/retry")).status_code == 200
    lease = await take()
    assert lease["job"]["attempt"] == 1
    # Dead, then replayed from the dead-letter queue.
    assert (await fail(client, lease["lease_id"], error="bad", retry=False)).status_code == 200
    r = await client.post("/v1/dead/replay", json={})
    assert r.status_code == 200 and r.json() == {"replayed": 1}
    lease = await take()
    assert lease["job"]["attempt"] == 1

    assert len(set(issued)) == len(issued) == 7
    for old in issued[:-1]:
        await expect_lost(client, old)
    # The newest lease is the only one held.
    assert (await heartbeat(client, issued[-1])).status_code == 200
    r = await ack(client, issued[-1], result="done")
    assert r.status_code == 200 and r.json()["status"] == "completed"


async def test_old_lease_is_refused_after_retry_resets_attempt(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    first = await claim_one(client)
    assert (await fail(client, first["lease_id"], error="boom", retry=False)).status_code == 200
    assert (await client.post(f"/v1/jobs/{job['id']}/retry")).status_code == 200
    second = await claim_one(client)
    # Same job, same attempt number as the first claim: only the lease id tells them apart.
    assert second["job"]["attempt"] == first["job"]["attempt"] == 1
    assert second["lease_id"] != first["lease_id"]
    r = await ack(client, first["lease_id"], result="stale")
    assert r.status_code == 409 and code(r) == "lease_lost"
    r = await heartbeat(client, first["lease_id"])
    assert r.status_code == 409 and code(r) == "lease_lost"
    stored = await get_job(client, job["id"])
    assert stored["status"] == "running" and stored["result"] is None
    assert (await ack(client, second["lease_id"], result="fresh")).json()["result"] == "fresh"


# ----------------------------------------------------------------------- heartbeat


async def test_heartbeat_sets_locked_until_to_now_plus_extend_ms(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client, lease_ms=1000)
    before = now()
    r = await heartbeat(client, lease["lease_id"], extend_ms=60_000)
    after = now()
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"locked_until"}
    until = ts(r.json()["locked_until"])
    assert before + timedelta(seconds=60) - timedelta(seconds=SLACK_S) <= until
    assert until <= after + timedelta(seconds=60) + timedelta(seconds=SLACK_S)
    assert ts((await get_job(client, job["id"]))["locked_until"]) == until
    # Shortening works too: it is now + extend_ms, not locked_until + extend_ms.
    r = await heartbeat(client, lease["lease_id"], extend_ms=2000)
    assert ts(r.json()["locked_until"]) < until - timedelta(seconds=50)


async def test_heartbeat_defaults_to_the_lease_length(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    lease = await claim_one(client, lease_ms=2000)  # the queue's default would be 30000
    for kwargs in ({"json": {}}, {}):
        before = now()
        r = await client.post(f"/v1/leases/{lease['lease_id']}/heartbeat", **kwargs)
        after = now()
        assert r.status_code == 200, r.text
        until = ts(r.json()["locked_until"])
        assert before + timedelta(seconds=2 - SLACK_S) <= until
        assert until <= after + timedelta(seconds=2 + SLACK_S)


async def test_heartbeats_keep_a_short_lease_alive(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client, lease_ms=400)
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        r = await heartbeat(client, lease["lease_id"])
        assert r.status_code == 200, r.text
        await asyncio.sleep(0.1)  # the behaviour is over time: beats paced well inside the lease
    stored = await get_job(client, job["id"])
    assert stored["status"] == "running" and stored["errors"] == []
    assert await claim(client, worker_id="w2") == []
    r = await ack(client, lease["lease_id"])
    assert r.status_code == 200 and r.json()["attempt"] == 1


async def test_heartbeat_on_a_finished_lease_is_lease_lost(client: httpx.AsyncClient) -> None:
    await enqueue_many(client, [{"type": "t"}] * 3)
    acked, failed, cancelled = await claim(client, limit=3)
    assert (await ack(client, acked["lease_id"])).status_code == 200
    assert (await fail(client, failed["lease_id"], error="x")).status_code == 200
    assert (await client.post(f"/v1/jobs/{cancelled['job']['id']}/cancel")).status_code == 200
    for lease in (acked, failed, cancelled):
        before = await get_job(client, lease["job"]["id"])
        r = await heartbeat(client, lease["lease_id"], extend_ms=60_000)
        assert r.status_code == 409, r.text
        assert code(r) == "lease_lost"
        assert await get_job(client, lease["job"]["id"]) == before


@pytest.mark.parametrize("op", ["heartbeat", "ack", "fail"])
async def test_unknown_lease_is_404(client: httpx.AsyncClient, op: str) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    job_part, _, token = lease["lease_id"].partition(".")
    unknown = [
        "nope",
        "999999999.1",
        # Shaped like ours, for an existing job, but a token never handed out.
        f"{job_part}.{int(token) + 1_000_000}" if token.isdigit() else lease["lease_id"] + "x",
    ]
    body = {"error": "x"} if op == "fail" else {}  # fail requires an error
    for lease_id in unknown:
        r = await client.post(f"/v1/leases/{lease_id}/{op}", json=body)
        assert r.status_code == 404, (lease_id, r.text)
        assert code(r) == "not_found"
    stored = await get_job(client, job["id"])
    assert stored["status"] == "running" and stored["errors"] == []


# ------------------------------------------------------------- expired but not yet reaped


@pytest.fixture
async def reaped_by_hand(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A service whose background reaper is stopped: the test runs each round itself
    (``reap_once``), so a lease can be seen past its end but not yet processed."""
    async with running_app(make_settings(database_url)) as application:
        for task in asyncio.all_tasks():
            if task.get_name() == "jobq-reaper":
                task.cancel()
        async with asgi(application) as c:
            yield application, c


async def _past_its_end(lease: dict[str, Any]) -> None:
    # The one wait here is for the lease's own end: only time makes a lease expire.
    await asyncio.sleep(max(0.0, (ts(lease["locked_until"]) - now()).total_seconds()) + 0.02)


async def _in_the_late_window(c: httpx.AsyncClient, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Claim ``job_id`` with a lease that is past its end by the time this returns, while
    its expiry has not been processed; and, as a control, another such lease that nobody
    finishes, which the next reaper round must process."""
    lease = await claim_one(c, lease_ms=100)
    assert lease["job"]["id"] == job_id
    await enqueue(c, queue="control")
    control = await claim_one(c, ["control"], lease_ms=100)
    await _past_its_end(control)
    return lease, control


async def test_late_ack_in_the_expiry_window_succeeds(
    reaped_by_hand: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, c = reaped_by_hand
    job = await enqueue(c)
    lease, control = await _in_the_late_window(c, job["id"])
    r = await heartbeat(c, lease["lease_id"])
    assert r.status_code == 409, r.text  # past locked_until: no longer extendable
    assert code(r) == "lease_lost"
    r = await ack(c, lease["lease_id"], result={"late": True})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed" and r.json()["result"] == {"late": True}
    # The reaper's next round takes only the control; it leaves the completed job alone.
    assert await reap_once(app.state.ctx) == 1
    assert (await get_job(c, control["job"]["id"]))["status"] == "pending"
    stored = await get_job(c, job["id"])
    assert stored["status"] == "completed" and stored["errors"] == []


async def test_late_fail_in_the_expiry_window_succeeds(
    reaped_by_hand: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, c = reaped_by_hand
    job = await enqueue(c)
    lease, control = await _in_the_late_window(c, job["id"])
    r = await fail(c, lease["lease_id"], error="late failure", retry_in_ms=60_000)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "failed"
    assert await reap_once(app.state.ctx) == 1
    assert (await get_job(c, control["job"]["id"]))["status"] == "pending"
    stored = await get_job(c, job["id"])
    assert stored["status"] == "failed"
    assert [e["kind"] for e in stored["errors"]] == ["failed"]


async def test_slow_reaper_still_processes_expiry_within_a_second(database_url: str) -> None:
    # The reaper at the slowest interval the settings allow; the bound is the contract's.
    async with running_app(make_settings(database_url, reap_interval_s=1.0)) as application, \
            asgi(application) as c:
        job = await enqueue(c)
        lease = await claim_one(c, lease_ms=100)
        until = ts(lease["locked_until"])
        await job_reaches(c, job["id"], "pending")
        assert now() - until < timedelta(seconds=1 + SLACK_S)


# ----------------------------------------------------------------------- ack


@pytest.mark.parametrize("result", [
    {"ok": True, "n": [1, 2]}, [1, "two", None], "done", 42, 3.5, 2**70, True, None, {},
])
async def test_ack_completes_with_any_json_result(client: httpx.AsyncClient, result: Any) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    r = await ack(client, lease["lease_id"], result=result)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == job["id"]
    assert body["status"] == "completed"
    assert body["result"] == result
    assert body["locked_until"] is None
    assert body["completed_at"] is not None
    assert await get_job(client, job["id"]) == body


@pytest.mark.parametrize("kwargs", [{}, {"json": {}}])
async def test_ack_without_result_stores_null(
    client: httpx.AsyncClient, kwargs: dict[str, Any],
) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    r = await client.post(f"/v1/leases/{lease['lease_id']}/ack", **kwargs)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed" and r.json()["result"] is None
    assert (await get_job(client, job["id"]))["status"] == "completed"


async def test_second_ack_is_lease_lost_and_changes_nothing(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    first = await ack(client, lease["lease_id"], result="first")
    assert first.status_code == 200
    r = await ack(client, lease["lease_id"], result="second")
    assert r.status_code == 409, r.text
    assert code(r) == "lease_lost"
    assert await get_job(client, job["id"]) == first.json()
    r = await fail(client, lease["lease_id"], error="after ack")
    assert r.status_code == 409 and code(r) == "lease_lost"
    assert await get_job(client, job["id"]) == first.json()
    assert await claim(client) == []  # and a completed job is never handed out again


async def test_ack_after_cancel_is_lease_lost(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    cancelled = await client.post(f"/v1/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    await expect_lost(client, lease["lease_id"])
    assert await get_job(client, job["id"]) == cancelled.json()


# ----------------------------------------------------------------------- fail


async def _fail_at_attempt(client: httpx.AsyncClient, queue: str, attempt: int) -> dict[str, Any]:
    """A job failed (without retry_in_ms) on its ``attempt``-th claim; earlier attempts are
    failed with retry_in_ms=0 so they can be claimed again at once."""
    job = await enqueue(client, queue=queue)
    for _ in range(attempt - 1):
        lease = await claim_one(client, [queue])
        assert lease["job"]["id"] == job["id"]
        r = await fail(client, lease["lease_id"], error="again", retry_in_ms=0)
        assert r.status_code == 200
    lease = await claim_one(client, [queue])
    assert lease["job"]["attempt"] == attempt
    r = await fail(client, lease["lease_id"], error=f"attempt {attempt}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_fail_schedules_retry_with_exponential_backoff_and_jitter(
    client: httpx.AsyncClient,
) -> None:
    expected = {1: 1000, 2: 2000, 3: 4000, 4: 5000, 5: 5000}  # min(base × 2^(n−1), max)
    jitters = []
    for attempt, delay_ms in expected.items():
        # A queue per attempt: on a slow machine an earlier job's 1 s backoff can end while
        # this loop still claims, and that job would be handed out instead of this one.
        await patch_queue(client, f"bq{attempt}", backoff_base_ms=1000, backoff_max_ms=5000)
        job = await _fail_at_attempt(client, f"bq{attempt}", attempt)
        assert job["status"] == "failed"
        assert job["attempt"] == attempt
        # visible_at and the error's `at` are the same instant of the same statement.
        waited = ms_between(job["visible_at"], job["errors"][-1]["at"])
        assert delay_ms - 0.01 <= waited < delay_ms * 1.1 + 0.01, (attempt, waited)
        jitters.append(waited / delay_ms - 1)
    assert len({round(j, 6) for j in jitters}) > 1, "the jitter should vary"
    # Not claimable before visible_at.
    assert await claim(client, [f"bq{n}" for n in expected], limit=10) == []


async def test_backoff_follows_the_queue_settings_at_fail_time(client: httpx.AsyncClient) -> None:
    await patch_queue(client, "bq", backoff_base_ms=300, backoff_max_ms=100_000)
    job = await _fail_at_attempt(client, "bq", 3)
    waited = ms_between(job["visible_at"], job["errors"][-1]["at"])
    assert 1200 - 0.01 <= waited < 1320 + 0.01
    await patch_queue(client, "bq", backoff_base_ms=100, backoff_max_ms=150)
    job = await _fail_at_attempt(client, "bq", 2)
    waited = ms_between(job["visible_at"], job["errors"][-1]["at"])
    assert 150 - 0.01 <= waited < 165 + 0.01
    # And the retry really happens once the backoff is over.
    clock = Stopwatch()
    lease = await claim_one(client, ["bq"], wait_ms=5000)
    assert lease["job"]["id"] == job["id"] and lease["job"]["attempt"] == 3
    assert clock.elapsed < 0.165 + SLACK_S


async def test_backoff_is_capped_on_a_very_late_attempt(
    client: httpx.AsyncClient, database_url: str,
) -> None:
    """2^(attempt−1) overflows a double past attempt ~1024: still the capped backoff."""
    await patch_queue(client, "bq", backoff_base_ms=1000, backoff_max_ms=7000)
    job = await enqueue(client, queue="bq", max_attempts=10_000)
    lease = await claim_one(client, ["bq"])
    # Reaching attempt 1500 through the API takes 1500 claims; set it directly instead.
    sql(database_url, "UPDATE jobs SET attempt = 1500 WHERE id = %(id)s", {"id": int(job["id"])})
    r = await fail(client, lease["lease_id"], error="again")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "failed"
    waited = ms_between(r.json()["visible_at"], r.json()["errors"][-1]["at"])
    assert 7000 - 0.01 <= waited < 7700 + 0.01


async def test_fail_honours_retry_in_ms(client: httpx.AsyncClient) -> None:
    await enqueue_many(client, [{"type": "t"}] * 2)
    one, two = await claim(client, limit=2)
    r = await fail(client, one["lease_id"], error="later", retry_in_ms=123_456)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "failed"
    assert abs(ms_between(r.json()["visible_at"], r.json()["errors"][-1]["at"]) - 123_456) < 0.01
    r = await fail(client, two["lease_id"], error="soon", retry_in_ms=300)
    assert abs(ms_between(r.json()["visible_at"], r.json()["errors"][-1]["at"]) - 300) < 0.01
    clock = Stopwatch()
    assert await claim(client, limit=10) == []
    lease = await claim_one(client, limit=10, wait_ms=5000)
    assert lease["job"]["id"] == two["job"]["id"] and lease["job"]["attempt"] == 2
    assert clock.elapsed < 0.3 + SLACK_S


async def test_fail_with_retry_false_is_dead(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    r = await fail(client, lease["lease_id"], error="bad input", retry=False)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "dead" and body["attempt"] == 1 < body["max_attempts"]
    assert body["last_error"] == "bad input"
    history = [(e["attempt"], e["error"], e["kind"]) for e in body["errors"]]
    assert history == [(1, "bad input", "failed")]
    assert await claim(client) == []
    assert await get_job(client, job["id"]) == body
    r = await client.get("/v1/jobs", params={"status": "dead"})
    assert [j["id"] for j in r.json()["jobs"]] == [job["id"]]


async def test_fail_on_the_last_attempt_is_dead(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, max_attempts=2)
    lease = await claim_one(client)
    r = await fail(client, lease["lease_id"], error="one", retry_in_ms=0)
    assert r.json()["status"] == "failed"
    lease = await claim_one(client)
    assert lease["job"]["attempt"] == 2
    r = await fail(client, lease["lease_id"], error="two", retry_in_ms=0)
    assert r.status_code == 200
    assert r.json()["status"] == "dead" and r.json()["last_error"] == "two"
    assert await claim(client, wait_ms=200) == []
    assert (await get_job(client, job["id"]))["status"] == "dead"


async def test_fail_records_errors_oldest_first(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    stamps = []
    for n in range(1, 4):
        lease = await claim_one(client)
        before = now()
        r = await fail(client, lease["lease_id"], error=f"boom {n}", retry_in_ms=0)
        after = now()
        assert r.status_code == 200
        stamps.append((before, after))
    stored = await get_job(client, job["id"])
    assert stored["status"] == "failed"
    assert stored["last_error"] == "boom 3"
    errors = stored["errors"]
    assert [set(e) for e in errors] == [{"attempt", "at", "error", "kind"}] * 3
    assert [(e["attempt"], e["error"], e["kind"]) for e in errors] == [
        (1, "boom 1", "failed"), (2, "boom 2", "failed"), (3, "boom 3", "failed")]
    for e, (before, after) in zip(errors, stamps, strict=True):
        slack = timedelta(seconds=SLACK_S)
        assert before - slack <= ts(e["at"]) <= after + slack
    assert ts(errors[0]["at"]) <= ts(errors[1]["at"]) <= ts(errors[2]["at"])


async def test_fail_twice_is_lease_lost_and_changes_nothing(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    first = await fail(client, lease["lease_id"], error="one", retry_in_ms=60_000)
    assert first.status_code == 200
    r = await fail(client, lease["lease_id"], error="two", retry=False)
    assert r.status_code == 409 and code(r) == "lease_lost"
    r = await ack(client, lease["lease_id"], result="x")
    assert r.status_code == 409 and code(r) == "lease_lost"
    assert await get_job(client, job["id"]) == first.json()


# ----------------------------------------------------------------------- batch ack


async def test_batch_ack_answers_each_lease_in_request_order(client: httpx.AsyncClient) -> None:
    await enqueue_many(client, [{"type": "t", "payload": {"i": i}} for i in range(4)])
    a, lost, b, reclaimed = await claim(client, limit=4)
    assert (await ack(client, lost["lease_id"], result="earlier")).status_code == 200
    assert (await fail(client, reclaimed["lease_id"], error="x", retry_in_ms=0)).status_code == 200
    again = await claim_one(client)
    assert again["job"]["id"] == reclaimed["job"]["id"]
    acks = [
        {"lease_id": b["lease_id"], "result": {"b": 1}},
        {"lease_id": lost["lease_id"], "result": "overwrite?"},
        {"lease_id": "999999999.1"},
        {"lease_id": reclaimed["lease_id"], "result": "stale"},
        {"lease_id": "nope"},
        {"lease_id": a["lease_id"], "result": [1, 2]},
    ]
    r = await client.post("/v1/leases/ack", json={"acks": acks})
    assert r.status_code == 200, r.text
    assert r.json() == {"results": [
        {"lease_id": b["lease_id"], "ok": True},
        # Acked before by this very lease: its result is stored (issue 14).
        {"lease_id": lost["lease_id"], "ok": False, "code": "lease_lost", "already_completed": True},
        {"lease_id": "999999999.1", "ok": False, "code": "not_found"},
        {"lease_id": reclaimed["lease_id"], "ok": False, "code": "lease_lost"},
        {"lease_id": "nope", "ok": False, "code": "not_found"},
        {"lease_id": a["lease_id"], "ok": True},
    ]}
    got = {j: await get_job(client, j) for j in (a["job"]["id"], b["job"]["id"], lost["job"]["id"],
                                                 reclaimed["job"]["id"])}
    got_a, got_b = got[a["job"]["id"]], got[b["job"]["id"]]
    assert got_a["status"] == "completed" and got_a["result"] == [1, 2]
    assert got_b["status"] == "completed" and got_b["result"] == {"b": 1}
    assert got[lost["job"]["id"]]["result"] == "earlier"
    assert got[reclaimed["job"]["id"]]["status"] == "running"
    # The new holder's lease was not disturbed.
    assert (await ack(client, again["lease_id"], result="fresh")).status_code == 200


async def test_batch_ack_naming_a_lease_twice_acks_it_once(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    r = await client.post("/v1/leases/ack", json={"acks": [
        {"lease_id": lease["lease_id"], "result": "first"},
        {"lease_id": "999999999.1"},
        {"lease_id": lease["lease_id"], "result": "second"},
        {"lease_id": "999999999.1"},
    ]})
    assert r.status_code == 200, r.text
    # The repeat is a second ack of the same lease: lease_lost, as it would be on its own.
    assert r.json()["results"] == [
        {"lease_id": lease["lease_id"], "ok": True},
        {"lease_id": "999999999.1", "ok": False, "code": "not_found"},
        {"lease_id": lease["lease_id"], "ok": False, "code": "lease_lost", "already_completed": True},
        {"lease_id": "999999999.1", "ok": False, "code": "not_found"},
    ]
    stored = await get_job(client, job["id"])
    assert stored["status"] == "completed" and stored["result"] == "first"


async def test_batch_ack_takes_up_to_1000(client: httpx.AsyncClient) -> None:
    await enqueue_many(client, [{"type": "t", "payload": {"i": i}} for i in range(1000)])
    leases = await claim(client, limit=1000)
    too_many = [{"lease_id": le["lease_id"]} for le in leases] + [{"lease_id": "1.1"}]
    r = await client.post("/v1/leases/ack", json={"acks": too_many})
    assert r.status_code == 422, r.text
    assert (await client.get("/v1/queues/default")).json()["counts"]["running"] == 1000
    body = [{"lease_id": le["lease_id"], "result": le["job"]["payload"]["i"]} for le in leases]
    r = await client.post("/v1/leases/ack", json={"acks": body})
    assert r.status_code == 200, r.text
    assert [x["lease_id"] for x in r.json()["results"]] == [le["lease_id"] for le in leases]
    assert all(x["ok"] is True for x in r.json()["results"])
    counts = (await client.get("/v1/queues/default")).json()["counts"]
    assert counts["completed"] == 1000 and counts["running"] == 0
    sample = await get_job(client, leases[417]["job"]["id"])
    assert sample["result"] == leases[417]["job"]["payload"]["i"]


# ----------------------------------------------------------------------- lease expiry


async def test_expired_lease_returns_the_job_to_pending_at_once(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client, lease_ms=200)
    until = ts(lease["locked_until"])
    await job_reaches(client, job["id"], "pending")
    assert now() - until < timedelta(seconds=1 + SLACK_S)  # processed within 1 s
    stored = await get_job(client, job["id"])
    assert stored["locked_until"] is None
    assert ts(stored["visible_at"]) <= now() + timedelta(seconds=SLACK_S)  # no backoff
    assert len(stored["errors"]) == 1
    entry = stored["errors"][0]
    assert set(entry) == {"attempt", "at", "error", "kind"}
    assert entry["kind"] == "lease_expired" and entry["attempt"] == 1
    assert stored["last_error"] is not None
    # Claimable at once, with the next attempt.
    again = await claim_one(client, worker_id="w2")
    assert again["job"]["id"] == job["id"]
    assert again["job"]["attempt"] == 2
    assert again["job"]["worker_id"] == "w2"
    await expect_lost(client, lease["lease_id"])
    done = await ack(client, again["lease_id"], result="ok")
    assert done.status_code == 200
    assert [e["kind"] for e in done.json()["errors"]] == ["lease_expired"]


async def test_errors_history_mixes_failures_and_expiries_oldest_first(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    assert (await fail(client, lease["lease_id"], error="first", retry_in_ms=0)).status_code == 200
    await claim_one(client, lease_ms=100)
    await job_reaches(client, job["id"], "pending")
    lease = await claim_one(client)
    assert (await fail(client, lease["lease_id"], error="third", retry_in_ms=0)).status_code == 200
    stored = await get_job(client, job["id"])
    assert [(e["attempt"], e["kind"]) for e in stored["errors"]] == [
        (1, "failed"), (2, "lease_expired"), (3, "failed")]
    assert stored["errors"][0]["error"] == "first" and stored["errors"][2]["error"] == "third"
    assert stored["last_error"] == "third"


async def test_expiry_on_the_last_attempt_is_dead(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, max_attempts=2)
    lease = await claim_one(client)
    assert (await fail(client, lease["lease_id"], error="x", retry_in_ms=0)).status_code == 200
    lease = await claim_one(client, lease_ms=100)
    assert lease["job"]["attempt"] == 2
    await job_reaches(client, job["id"], "dead")
    stored = await get_job(client, job["id"])
    assert [e["kind"] for e in stored["errors"]] == ["failed", "lease_expired"]
    assert await claim(client, wait_ms=300) == []
    await expect_lost(client, lease["lease_id"])


async def test_expiring_max_lease_expiries_times_is_dead(client: httpx.AsyncClient) -> None:
    entry = await patch_queue(client, max_lease_expiries=2)
    assert entry["settings"]["max_lease_expiries"] == 2
    job = await enqueue(client)  # 25 attempts: attempts are not what kills it
    await claim_one(client, lease_ms=100)
    await job_reaches(client, job["id"], "pending")
    lease = await claim_one(client)
    # A failure reported by the worker is not a lease expiry.
    assert (await fail(client, lease["lease_id"], error="x", retry_in_ms=0)).status_code == 200
    lease = await claim_one(client, lease_ms=100)
    assert lease["job"]["attempt"] == 3
    await job_reaches(client, job["id"], "dead")
    stored = await get_job(client, job["id"])
    assert [e["kind"] for e in stored["errors"]] == ["lease_expired", "failed", "lease_expired"]
    assert stored["attempt"] == 3 < stored["max_attempts"]
    assert await claim(client) == []


async def test_default_max_lease_expiries_is_5(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    for n in range(1, 6):
        lease = await claim_one(client, lease_ms=100)
        assert lease["job"]["attempt"] == n
        target = "dead" if n == 5 else "pending"
        await job_reaches(client, job["id"], target)
    assert len((await get_job(client, job["id"]))["errors"]) == 5


# ------------------------------------------- nothing a worker sends makes the service fail


@pytest.mark.parametrize("lease_id", [
    "1.\u00b2", "\u00b2.1", "\u0661.\u0661", "1.1.1", "-1.1", "1.-1", "1.", ".1", "9" * 40 + ".1",
    "1." + "9" * 40, "0.0", "%20", "1.1%00", "x" * 100,
])
async def test_malformed_lease_ids_are_not_found(client: httpx.AsyncClient, lease_id: str) -> None:
    await enqueue(client)
    held = await claim_one(client)
    for op, body in (("heartbeat", {}), ("ack", {}), ("fail", {"error": "x"})):
        r = await client.post(f"/v1/leases/{lease_id}/{op}", json=body)
        assert r.status_code == 404, (op, r.status_code, r.text)
        assert code(r) == "not_found"
    r = await client.post("/v1/leases/ack", json={"acks": [{"lease_id": lease_id},
                                                           {"lease_id": held["lease_id"]}]})
    assert r.status_code == 200, r.text
    assert r.json()["results"] == [{"lease_id": lease_id, "ok": False, "code": "not_found"},
                                   {"lease_id": held["lease_id"], "ok": True}]


@pytest.mark.parametrize("op,body", [
    ("ack", {"result": {"text": "a\u0000b"}}),
    ("ack", '{"result": "\\ud800"}'),  # a lone surrogate: valid JSON, not storable
    ("fail", {"error": "nul \u0000 inside"}),
    ("heartbeat", {"extend_ms": 10**30}),
    ("fail", {"error": "x", "retry_in_ms": 10**30}),
    ("ack", {"result": 1, "extra": True}),
])
async def test_unstorable_worker_input_is_4xx_and_changes_nothing(
    client: httpx.AsyncClient, op: str, body: dict[str, Any] | str,
) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    before = await get_job(client, job["id"])
    url = f"/v1/leases/{lease['lease_id']}/{op}"
    if isinstance(body, str):
        r = await client.post(url, content=body, headers={"content-type": "application/json"})
    else:
        r = await client.post(url, json=body)
    assert r.status_code == 422, r.text
    assert code(r) == "validation_error"
    assert await get_job(client, job["id"]) == before
    assert (await ack(client, lease["lease_id"])).status_code == 200  # still held


async def test_unstorable_result_in_batch_ack_is_4xx(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    lease = await claim_one(client)
    r = await client.post("/v1/leases/ack", json={"acks": [
        {"lease_id": lease["lease_id"], "result": "nul \u0000"}]})
    assert 400 <= r.status_code < 500, r.text
    stored = await get_job(client, lease["job"]["id"])
    assert stored["status"] == "running"
